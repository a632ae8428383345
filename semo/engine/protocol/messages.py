"""Typed protocol messages (one pydantic model each) and the error reported for a malformed one.

The grammar that produces them is in docs/PROTOCOL.md; `semo.engine.protocol.parser` builds them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

MAX_PAYLOAD_BYTES = 64 * 1024
"""A payload (block body, or the text after a one-line tag) may be at most this many UTF-8 bytes."""

EXCERPT_CHARS = 200
ROLE_NAME_PATTERN = r"[A-Za-z][A-Za-z0-9_-]{0,31}"
"""An agent name in `[INVOKE:ROLE]` / `[DELIVER_RESULT:ROLE]`: a letter, then up to 31 more."""

QuestionType = Literal["text", "choice", "confirm"]
QUESTION_TYPES: tuple[QuestionType, ...] = ("text", "choice", "confirm")
CONFIRM_OPTIONS = ("yes", "no")

RoleName = Annotated[str, StringConstraints(pattern=rf"^{ROLE_NAME_PATTERN}$")]

ErrorKind = Literal[
    "bad_json",
    "unknown_question_type",
    "invalid_payload",
    "oversize",
    "missing_close",
    "unexpected_close",
    "bad_target",
    "too_many",
]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AskUser(_Model):
    """`[ASK_USER]`: a question for the human; the answer is the asking session's next prompt.

    `options` is empty for `text`, the choices (>= 2, distinct) for `choice`, and always
    `["yes", "no"]` for `confirm`.
    """

    kind: Literal["ask_user"] = "ask_user"
    question: str = Field(min_length=1)
    question_type: QuestionType = "text"
    options: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _confirm_options(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("question_type") == "confirm":
            return {**data, "options": list(CONFIRM_OPTIONS)}
        return data

    @model_validator(mode="after")
    def _check_options(self) -> AskUser:
        if self.question_type == "choice":
            if len(self.options) < 2 or len(set(self.options)) != len(self.options):
                raise ValueError("a choice question needs at least 2 distinct options")
            if not all(option.strip() for option in self.options):
                raise ValueError("choice options must not be empty")
        elif self.question_type == "text" and self.options:
            raise ValueError("a text question has no options")
        return self


class Invoke(_Model):
    """`[INVOKE:ROLE]`: ask agent `target` to do `task`; `raw` is the block body as written."""

    kind: Literal["invoke"] = "invoke"
    target: RoleName
    task: str = Field(min_length=1)
    context: dict[str, Any] | None = None
    raw: str


class DeliverResult(_Model):
    """`[DELIVER_RESULT:ROLE]`: hand a result to agent `recipient`.

    `payload` is the parsed JSON object, or the free text (then `summary` is that text too).
    """

    kind: Literal["deliver_result"] = "deliver_result"
    recipient: RoleName
    invocation_id: str | None = None
    summary: str = Field(min_length=1)
    payload: dict[str, Any] | str


class StepComplete(_Model):
    """`[STEP_COMPLETE] text`: a progress note, one line."""

    kind: Literal["step_complete"] = "step_complete"
    text: str = Field(min_length=1)


class Done(_Model):
    """`[SEMO:DONE]`, optionally followed by a summary on the same line: the task is finished."""

    kind: Literal["done"] = "done"
    text: str = ""


ProtocolMessage = Annotated[
    AskUser | Invoke | DeliverResult | StepComplete | Done, Field(discriminator="kind")
]


class ProtocolError(_Model):
    """A malformed message. It is never dropped: `detail` is sent back to the agent verbatim.

    `tag` is the marker as the agent wrote it (`[INVOKE:BE]`, `[/ASK_USER]`); `excerpt` is the
    first 200 characters of the offending payload or line.
    """

    kind: ErrorKind
    tag: str
    detail: str
    excerpt: str = ""

    @field_validator("excerpt")
    @classmethod
    def _truncate(cls, value: str) -> str:
        return value[:EXCERPT_CHARS]

    def for_agent(self) -> str:
        """The text to send back to the agent that wrote the message."""
        return f"semo could not read your {self.tag} message ({self.kind}): {self.detail}"


ParseItem = AskUser | Invoke | DeliverResult | StepComplete | Done | ProtocolError
"""What the parser reports: a message, or an error in its place."""
