"""Any other interactive program: read from the screen alone.

Readiness is a prompt pattern on the cursor row; a prompt is typed (pasted when the program
enabled bracketed paste) and Enter pressed; delivery counts as confirmed when the program
answers with output. Cancel is Ctrl+C. Nothing is installed in its folder, and a conversation
is never resumed: the pool starts the agent afresh.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from semo.engine.agents.base import AgentProfile, WorktreeSetup
from semo.engine.approval_policy import Answer
from semo.engine.protocol.observer import PromptScreen

__all__ = ["GENERIC", "GenericAdapter"]

GENERIC = AgentProfile(
    "generic", cancel_keys="<C-c>", uses_hooks=False, confirm_timeout=3.0, reads_prompts=False
)


class GenericAdapter:
    """Any program with a prompt: a shell, a REPL, an agent CLI without an adapter."""

    name = "generic"
    hook_events: tuple[str, ...] = ()

    def profile(
        self, *, prompt_pattern: str | None = None, reads_prompts: bool | None = None
    ) -> AgentProfile:
        if prompt_pattern is None and reads_prompts is None:
            return GENERIC
        return replace(
            GENERIC,
            prompt_pattern=prompt_pattern or GENERIC.prompt_pattern,
            reads_prompts=bool(reads_prompts),
        )

    def runs(self, command: Sequence[str]) -> bool:
        return True  # the fallback: asked last

    async def prepare(self, setup: WorktreeSetup) -> None:
        return None

    def turn_text_reader(self, folder: Path, env: Mapping[str, str]) -> None:
        return None

    def recorded_turn_text(self, path: str) -> str | None:
        return None

    def screen_reader(self, profile: AgentProfile) -> PromptScreen:
        return PromptScreen(profile.prompt_pattern)

    def conversation_id(self, payload: Mapping[str, Any]) -> str | None:
        return None

    def valid_conversation_id(self, value: object) -> bool:
        return False

    def missing_conversation(
        self, folder: Path, env: Mapping[str, str], conversation: str
    ) -> str | None:
        return "a generic agent has no conversation to resume"

    def resume_command(self, command: Sequence[str], conversation: str) -> list[str]:
        raise ValueError("a generic agent's conversation cannot be resumed")

    def permission_output(self, answer: Answer, default_reason: str) -> dict[str, Any]:
        return {}  # no hooks: nothing asks
