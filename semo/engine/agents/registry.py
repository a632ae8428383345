"""The agent adapters by profile name: the one module that names each of them."""

from __future__ import annotations

from collections.abc import Sequence

from semo.engine.agents.base import AgentAdapter, AgentProfile
from semo.engine.agents.claude import ClaudeAdapter
from semo.engine.agents.generic import GenericAdapter

__all__ = [
    "FALLBACK",
    "UNNAMED_RECORDS",
    "adapter",
    "adapter_for_command",
    "hook_events",
    "names",
    "profile_for_command",
    "profile_named",
]

#: every adapter by name; an agent's command is matched against them in this order
_ADAPTERS: dict[str, AgentAdapter] = {a.name: a for a in (ClaudeAdapter(), GenericAdapter())}
#: the adapter of a command no other one runs
FALLBACK = "generic"
#: the adapter of a resume record that names none (an older semo recorded Claude Code's only)
UNNAMED_RECORDS = "claude"


def names() -> tuple[str, ...]:
    """The known profile names."""
    return tuple(_ADAPTERS)


def adapter(name: str) -> AgentAdapter:
    """The adapter of profile `name`; ValueError for an unknown one."""
    try:
        return _ADAPTERS[name]
    except KeyError:
        known = ", ".join(_ADAPTERS)
        raise ValueError(f"unknown agent profile {name!r} (known: {known})") from None


def adapter_for_command(command: Sequence[str]) -> AgentAdapter:
    """The adapter whose CLI `command` starts (the generic one when none does)."""
    for candidate in _ADAPTERS.values():
        if candidate.name != FALLBACK and candidate.runs(command):
            return candidate
    return _ADAPTERS[FALLBACK]


def profile_for_command(command: Sequence[str]) -> AgentProfile:
    """The default profile of the CLI `command` starts."""
    return adapter_for_command(command).profile()


def profile_named(
    name: str, *, prompt_pattern: str | None = None, reads_prompts: bool | None = None
) -> AgentProfile:
    """The profile `name` with semo.toml's overrides (None keeps the adapter's default)."""
    return adapter(name).profile(prompt_pattern=prompt_pattern, reads_prompts=reads_prompts)


def hook_events() -> tuple[str, ...]:
    """Every event some adapter's hooks report (what the hook server accepts)."""
    return tuple(dict.fromkeys(e for a in _ADAPTERS.values() for e in a.hook_events))
