"""Claude Code: hooks in the worktree's settings, persona in ``.claude/CLAUDE.md``, trust.

Before the CLI starts in a folder, the persona and the protocol go into ``.claude/CLAUDE.md``
(`semo.engine.agents.persona`), semo's hooks into ``.claude/settings.local.json``
(`semo.engine.agents.claude.settings`; both kept out of commits), and the folder is marked trusted
in the ``~/.claude.json`` of the HOME the agent runs with, onboarding too
(`semo.engine.agents.claude.trust`), so the CLI reaches its prompt without a person. A Stop's
whole turn text is read from the transcript the hook names (`semo.engine.agents.claude.transcript`);
a conversation is resumed with ``--resume <session id>``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from semo.engine.agents.base import AgentProfile, WorktreeSetup
from semo.engine.agents.claude.conversations import transcript_of, valid_session_id
from semo.engine.agents.claude.screen import ClaudeScreen
from semo.engine.agents.claude.settings import HOOK_EVENTS, install_hooks
from semo.engine.agents.claude.transcript import TranscriptScope, turn_text_from_transcript
from semo.engine.agents.claude.trust import ensure_trusted_async
from semo.engine.agents.persona import PERSONA_RELPATH
from semo.engine.approval_policy import Answer, hook_decision

__all__ = ["CLAUDE", "ClaudeAdapter"]

#: a prompt goes in as a bracketed paste (the CLI enables mode 2004) followed by Enter, and
#: counts as delivered only when the UserPromptSubmit hook reports it; Esc cancels (Ctrl+C
#: twice quits the CLI)
CLAUDE = AgentProfile("claude", cancel_keys="<Esc>", uses_hooks=True)


class ClaudeAdapter:
    """The Claude Code CLI (`claude`)."""

    name = "claude"
    hook_events: tuple[str, ...] = HOOK_EVENTS

    def profile(
        self, *, prompt_pattern: str | None = None, reads_prompts: bool | None = None
    ) -> AgentProfile:
        return CLAUDE if reads_prompts is None else replace(CLAUDE, reads_prompts=reads_prompts)

    def runs(self, command: Sequence[str]) -> bool:
        return bool(command) and os.path.basename(command[0]) == "claude"

    async def prepare(self, setup: WorktreeSetup) -> None:
        folder = setup.folder
        await setup.persona.inject_async(folder, setup.agent, setup.peers, relpath=PERSONA_RELPATH)
        await asyncio.to_thread(
            install_hooks,
            folder,
            setup.hook_command,
            timeouts=setup.hook_timeouts,
            permission_mode=setup.permission_mode,
        )
        home = setup.env.get("HOME")
        await ensure_trusted_async(folder, home=Path(home) if home else None)

    def turn_text_reader(self, folder: Path, env: Mapping[str, str]) -> TranscriptScope:
        return TranscriptScope.for_session(folder, env)

    def recorded_turn_text(self, path: str) -> str | None:
        return turn_text_from_transcript(path)

    def screen_reader(self, profile: AgentProfile) -> ClaudeScreen:
        return ClaudeScreen()

    def conversation_id(self, payload: Mapping[str, Any]) -> str | None:
        value = payload.get("session_id")
        return value if valid_session_id(value) else None

    def valid_conversation_id(self, value: object) -> bool:
        return valid_session_id(value)

    def missing_conversation(
        self, folder: Path, env: Mapping[str, str], conversation: str
    ) -> str | None:
        if transcript_of(folder, env, conversation) is not None:
            return None
        return f"no transcript of conversation {conversation} in the projects folder of {folder}"

    def resume_command(self, command: Sequence[str], conversation: str) -> list[str]:
        if not valid_session_id(conversation):
            raise ValueError(f"{conversation!r} is not a Claude Code session id")
        return [*command, "--resume", conversation]

    def permission_output(self, answer: Answer, default_reason: str) -> dict[str, Any]:
        return hook_decision(answer, default_reason)
