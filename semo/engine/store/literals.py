"""Names the command line needs at parse time (help texts, choices), without pydantic or the
store models: `semo --help` imports this module only (engine/store/models.py and members.py
take their literals from here)."""

from __future__ import annotations

from typing import Literal

CommandType = Literal[
    "create_session",
    "send_prompt",
    "send_text",
    "send_keys",
    "get_output",
    "cancel",
    "terminate",
    "run_job",
    "ship_job",
]
COMMAND_TYPES: tuple[str, ...] = CommandType.__args__  # type: ignore[attr-defined]

MemberRole = Literal["operator", "viewer"]
ROLES: tuple[MemberRole, ...] = ("operator", "viewer")
