"""Names the command line needs at parse time (help texts, choices), without pydantic.

`semo --help` imports this module only, not the store models (semo/engine/store/models.py and
members.py take their literals from here)."""

from __future__ import annotations

from typing import Literal, TypeGuard, get_args

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
COMMAND_TYPES: tuple[CommandType, ...] = get_args(CommandType)


def is_command_type(value: str) -> TypeGuard[CommandType]:
    """True when `value` names a command type."""
    return value in COMMAND_TYPES


MemberRole = Literal["operator", "viewer"]
ROLES: tuple[MemberRole, ...] = ("operator", "viewer")
