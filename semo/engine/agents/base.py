"""The agent-adapter interface: what semo needs from each kind of agent CLI.

One adapter per CLI (`semo.engine.agents.claude`, `semo.engine.agents.generic`), found by profile
name in `semo.engine.agents.registry`; nothing outside `engine.agents` names a specific one. See
docs/AGENTS.md for what an adapter provides and how to add one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from semo.engine.agents.errors import AgentSetupError
from semo.engine.protocol.monitor import DEFAULT_PROMPT_PATTERN

__all__ = ["AgentAdapter", "AgentProfile", "AgentSetupError", "WorktreeSetup"]

if TYPE_CHECKING:
    from semo.engine.agents.persona import PersonaInjector
    from semo.engine.approval_policy import Answer
    from semo.engine.protocol.hooks import TurnTextReader
    from semo.engine.protocol.observer import ScreenReader
    from semo.engine.store.models import Agent


@dataclass(frozen=True)
class AgentProfile:
    """How a session talks to its CLI: keys, delivery, readiness (the adapter's runtime side)."""

    #: the adapter's name (`semo.engine.agents.registry`), also semo.toml's ``profile``
    name: str
    #: keys (semo.engine.terminal.keys spec) that interrupt the running turn
    cancel_keys: str
    #: the session's hooks report states (Claude Code) instead of the screen alone
    uses_hooks: bool
    #: seconds to wait for the agent to confirm a submitted prompt before the one retry
    confirm_timeout: float = 5.0
    prompt_pattern: str = DEFAULT_PROMPT_PATTERN
    #: the program reads what is typed as a prompt for a model, so semo's feedback on a refused
    #: protocol message may be typed into it; a shell would run that text as a command
    reads_prompts: bool = True


@dataclass(frozen=True)
class WorktreeSetup:
    """What an adapter gets to prepare a folder before its CLI starts there."""

    folder: Path
    agent: Agent
    #: the agents it may invoke (itself left out)
    peers: Sequence[Agent]
    persona: PersonaInjector
    #: the command line the CLI's hooks run (the hook shim), before the event name
    hook_command: Sequence[str]
    #: hook timeouts other than the default, by event (a permission request waits for a person)
    hook_timeouts: Mapping[str, int] = field(default_factory=dict)
    #: the CLI's permission mode from semo.toml (None: left to the CLI)
    permission_mode: str | None = None
    #: the environment the CLI starts with (its HOME and config dir are read from it)
    env: Mapping[str, str] = field(default_factory=dict)


class AgentAdapter(Protocol):
    """One agent CLI behind the interface semo's sessions, routing and control use.

    Hook events are named in the CLI's own spelling; the observer understands the ones of
    `semo.engine.protocol.observer` (SessionStart, UserPromptSubmit, Stop, PermissionRequest,
    Notification, SessionEnd): an adapter whose CLI names them otherwise maps them in its
    hook command. A conversation id is the CLI's own id of a session (what its resume takes).
    """

    #: the profile name (semo.toml's ``profile``)
    name: str
    #: the hook events semo listens to (empty: the CLI has no hooks, the screen is all)
    hook_events: tuple[str, ...]

    def profile(
        self, *, prompt_pattern: str | None = None, reads_prompts: bool | None = None
    ) -> AgentProfile:
        """The session profile, with semo.toml's overrides (None: the adapter's default)."""
        ...

    def runs(self, command: Sequence[str]) -> bool:
        """Whether `command` starts this CLI (an agent without a profile is matched by it)."""
        ...

    async def prepare(self, setup: WorktreeSetup) -> None:
        """Install persona, hooks and trust into `setup.folder` (kept out of commits), so the
        CLI reaches its prompt without a person. Raises AgentSetupError (or OSError)."""
        ...

    def turn_text_reader(self, folder: Path, env: Mapping[str, str]) -> TurnTextReader | None:
        """What reads a turn's whole text for the hook server (e.g. from a transcript the
        hook names), for a session in `folder` with `env`; None: the hook's text is all."""
        ...

    def recorded_turn_text(self, path: str) -> str | None:
        """The last turn's text from a record at a path the caller chose (a replay's
        transcript beside its recording); None: there is none."""
        ...

    def screen_reader(self, profile: AgentProfile) -> ScreenReader:
        """A new reader of one session's screen: readiness, dialogs, turns no hook reports."""
        ...

    def conversation_id(self, payload: Mapping[str, Any]) -> str | None:
        """The conversation id a hook payload names, if it is a valid one."""
        ...

    def valid_conversation_id(self, value: object) -> bool:
        """Whether `value` (untrusted: a hook's, or a file's) may go on a command line as a
        conversation id: never an option, never a path."""
        ...

    def missing_conversation(
        self, folder: Path, env: Mapping[str, str], conversation: str
    ) -> str | None:
        """Why the CLI started in `folder` with `env` cannot resume `conversation` (its own
        record of it is not there, or was planted from elsewhere); None when it can. Blocking
        file I/O."""
        ...

    def resume_command(self, command: Sequence[str], conversation: str) -> list[str]:
        """`command` changed to resume `conversation` (a valid id) instead of starting anew."""
        ...

    def permission_output(self, answer: Answer, default_reason: str) -> dict[str, Any]:
        """What the CLI's permission hook prints to give `answer` (a deny without a reason
        gives `default_reason`)."""
        ...
