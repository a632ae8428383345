"""Request and response bodies of the API.

Requests are the store's command payload models (`CreateSessionPayload`, `SendPromptPayload`),
strictly typed, so the API accepts exactly what `agent_commands` accepts; responses are the
store's row models (`AgentSession`, `UserQuestion`, `AgentCommand`, `AgentCommandResult`), a
session with its agent's role added.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from semo.engine.protocol.messages import ROLE_NAME_PATTERN
from semo.engine.store.models import (
    AgentCommand,
    AgentCommandResult,
    AgentSession,
    CommandStatus,
    CommandType,
    CreateSessionPayload,
    SendPromptPayload,
    SessionStatus,
)


#: JSON Schema for "this property is given, as a string / an integer"
def _given(name: str, kind: str) -> dict[str, Any]:
    return {"required": [name], "properties": {name: {"type": kind}}}


class CreateSession(CreateSessionPayload):
    """The create_session payload, with "agent_id or role" stated in its JSON schema and the
    role's form (a letter, then up to 31 letters, digits, `_` or `-`) checked by it."""

    model_config = ConfigDict(
        title="CreateSession",
        strict=True,
        json_schema_extra={"anyOf": [_given("role", "string"), _given("agent_id", "string")]},
    )

    role: str | None = Field(default=None, pattern=rf"^{ROLE_NAME_PATTERN}$", validate_default=True)
    agent_id: str | None = Field(default=None, min_length=1, max_length=200)


class SendPrompt(SendPromptPayload):
    """The send_prompt payload, strictly typed (`"wait": 0` is not a boolean)."""

    model_config = ConfigDict(title="SendPrompt", strict=True)


class Session(AgentSession):
    """An `agent_sessions` row and the role / name of its agent, and its state: its `status`,
    or "lost" when it has not ended but its engine is not running (`lost_reason` says why:
    its heartbeat ran out, or it was a process of the API's machine that has exited)."""

    role: str | None = None
    agent_name: str | None = None
    state: str = ""
    lost_reason: str | None = None


class SessionCreated(BaseModel):
    command_id: str
    session: Session


class CommandDone(BaseModel):
    """A command that completed: its id, type and the engine's result."""

    command_id: str
    command_type: CommandType
    result: dict[str, Any] = Field(default_factory=dict)


class Output(BaseModel):
    """What the session's terminal shows (the screen, or the last `lines` lines)."""

    command_id: str
    lines: list[str]
    cols: int
    rows: int
    cursor: list[int]
    state: SessionStatus | str


class CommandPending(BaseModel):
    """202: the wait the request asked for (`?timeout=`) ran out first; the command is queued
    or running and keeps its place: poll `poll` for its result."""

    command_id: str
    status: CommandStatus
    poll: str
    message: str


class CommandState(BaseModel):
    """A command and, once it finished, its result (for polling after a 504)."""

    command: AgentCommand
    result: AgentCommandResult | None = None


class Answer(BaseModel):
    """The answer to a question: its text, or the 1-based number of an option."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={"oneOf": [_given("text", "string"), _given("option", "integer")]},
    )

    text: str | None = Field(default=None, min_length=1, max_length=64 * 1024)
    #: no upper bound here: a question may have any number of options (checked against them)
    option: int | None = Field(default=None, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _integral_option(cls, data: Any) -> Any:
        """JSON Schema's `integer` is any number without a fraction: 2.0 is the integer 2."""
        option = data.get("option") if isinstance(data, dict) else None
        if isinstance(option, float) and option.is_integer():
            return {**data, "option": int(option)}
        return data

    @model_validator(mode="after")
    def _one_of(self) -> Answer:
        if (self.text is None) == (self.option is None):
            raise ValueError("give text or option, not both")
        return self


class Health(BaseModel):
    status: str = "ok"
    store: str
