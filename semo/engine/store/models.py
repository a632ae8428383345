"""Row models shared by every store backend (field names from seeds 000-003).

Every table has one model; backends read and write exactly these. Command payloads are
validated per command type here, so a bad command fails the same way on every backend.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from semo.engine.store.literals import COMMAND_TYPES, CommandType

SessionStatus = Literal["creating", "ready", "executing", "waiting_input", "error", "terminated"]
CommandStatus = Literal["pending", "processing", "completed", "failed"]
#: a command with its outcome (its result row is written in the same transaction)
COMMAND_ENDED: tuple[CommandStatus, ...] = ("completed", "failed")
#: permission: an agent's tool use waiting for a person (semo/engine/approval_policy.py)
QuestionType = Literal["text", "choice", "confirm", "permission"]
QuestionStatus = Literal["pending", "answered", "cancelled"]
#: cancelled: the job that caused it ended (failed attempt, engine death, cancel): never resent
InvocationStatus = Literal["pending", "running", "delivered", "failed", "cancelled"]
ResultStatus = Literal["pending", "delivered", "cancelled"]
JobStatus = Literal["pending", "running", "done", "failed", "needs_review"]
EngineState = Literal["running", "stopped"]

#: Re-run after an engine died mid-command: repeating these cannot do harm.
SAFE_TO_REPEAT = frozenset({"get_output", "cancel", "terminate"})
#: Types that act on an existing session and so need `session_id`.
NEEDS_SESSION = frozenset(COMMAND_TYPES) - {"create_session", "run_job", "ship_job"}
MAX_PAYLOAD_BYTES = 256 * 1024


def new_id() -> str:
    return str(uuid.uuid4())


def now() -> datetime:
    return datetime.now(UTC)


class Row(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Office(Row):
    id: str = Field(default_factory=new_id)
    name: str = Field(min_length=1, max_length=200)
    repository: str | None = None
    workspace_root: str | None = None
    created_at: datetime = Field(default_factory=now)


class Agent(Row):
    """An agent persona of an office (seed 000/003 OfficeAgent + persona)."""

    id: str = Field(default_factory=new_id)
    office_id: str
    name: str = Field(min_length=1, max_length=100)
    role: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
    prompt: str = ""
    scope_patterns: list[str] = Field(default_factory=list)
    core_skills: list[str] = Field(default_factory=list)
    command: list[str] = Field(default_factory=lambda: ["claude"])
    created_at: datetime = Field(default_factory=now)


class AgentSession(Row):
    """Seed 003 SessionInfo (iterm_tab_id became the engine that runs it and the child's pid)."""

    session_id: str = Field(default_factory=new_id)
    office_id: str
    agent_id: str
    worktree_id: str | None = None
    status: SessionStatus = "creating"
    engine_id: str | None = None
    pid: int | None = None
    created_at: datetime = Field(default_factory=now)
    last_activity_at: datetime = Field(default_factory=now)
    ended_at: datetime | None = None
    end_reason: str | None = None


class AgentCommand(Row):
    id: str = Field(default_factory=new_id)
    office_id: str
    session_id: str | None = None
    command_type: CommandType
    payload: dict[str, Any] = Field(default_factory=dict)
    status: CommandStatus = "pending"
    claimed_by: str | None = None
    lease_expires_at: datetime | None = None
    attempts: int = 0
    created_at: datetime = Field(default_factory=now)
    updated_at: datetime = Field(default_factory=now)


class AgentCommandResult(Row):
    id: str = Field(default_factory=new_id)
    command_id: str
    success: bool
    result: dict[str, Any] | None = None
    error: str | None = None
    created_at: datetime = Field(default_factory=now)


class UserQuestion(Row):
    id: str = Field(default_factory=new_id)
    office_id: str
    agent_id: str
    session_id: str | None = None
    question_type: QuestionType = "text"
    question: str = Field(min_length=1)
    options: list[str] = Field(default_factory=list)
    status: QuestionStatus = "pending"
    answer: str | None = None
    created_at: datetime = Field(default_factory=now)
    answered_at: datetime | None = None
    #: why a question was cancelled (its session ended, ...): it can no longer be answered
    cancel_reason: str | None = None
    cancelled_at: datetime | None = None
    #: when the engine's agent confirmed it took the answer (None: not typed yet)
    answer_delivered_at: datetime | None = None


class AgentInvocation(Row):
    id: str = Field(default_factory=new_id)
    office_id: str
    caller_agent_id: str
    caller_session_id: str | None = None
    target_agent_id: str
    task: str
    context: dict[str, Any] | None = None
    status: InvocationStatus = "pending"
    error: str | None = None
    #: the job whose work this is (the caller's job, or the job of the invocation the caller
    #: works on); None for work no job caused
    job_id: str | None = None
    created_at: datetime = Field(default_factory=now)
    updated_at: datetime = Field(default_factory=now)


class AgentResult(Row):
    id: str = Field(default_factory=new_id)
    office_id: str
    invocation_id: str | None = None
    sender_agent_id: str
    recipient_agent_id: str
    summary: str = ""
    payload: dict[str, Any] | str | None = None
    status: ResultStatus = "pending"
    #: the job whose work this is (its invocation's job)
    job_id: str | None = None
    #: why it was cancelled instead of delivered
    cancel_reason: str | None = None
    created_at: datetime = Field(default_factory=now)
    delivered_at: datetime | None = None


class Job(Row):
    id: str = Field(default_factory=new_id)
    office_id: str
    agent_id: str
    task: str
    context: dict[str, Any] | None = None
    status: JobStatus = "pending"
    session_id: str | None = None
    #: the engine running (or that last ran) the job; reconcile fails the running jobs of a
    #: dead engine
    engine_id: str | None = None
    attempts: int = 0
    failure_reason: str | None = None
    needs_human: bool = False
    #: an operator asked to cancel the job, and why (the engine running it ends it)
    cancel_reason: str | None = None
    #: the job's branch (``semo/job/<id>``), where its roles' work is combined (docs/JOBS.md)
    branch: str | None = None
    #: the office's base branch, and its commit when the job started (a retry keeps both)
    base_branch: str | None = None
    base_commit: str | None = None
    #: what the job's agents worked in, and a conflict of their work
    #: (`semo.engine.jobwork.model.JobWork`, as JSON)
    work: dict[str, Any] | None = None
    created_at: datetime = Field(default_factory=now)
    updated_at: datetime = Field(default_factory=now)


class JobEntry(Row):
    """One step of a job's timeline (table `job_events`, `id` increasing per database): the
    engine writes one for each of the job's steps (started, a session, the prompt delivered,
    turns, questions and answers, invocations and results, retries, the outcome)."""

    id: int | None = None  # given by the database
    job_id: str
    office_id: str
    step: str = Field(min_length=1, max_length=64)
    status: JobStatus | None = None
    attempts: int = 0
    session_id: str | None = None
    agent_id: str | None = None
    #: the question, invocation or result the step is about
    ref_id: str | None = None
    detail: str = ""
    at: datetime = Field(default_factory=now)


class JobWorkCancelled(BaseModel):
    """What `Store.cancel_job_work` cancelled (not a table)."""

    model_config = ConfigDict(frozen=True)

    invocations: list[AgentInvocation] = Field(default_factory=list)
    results: list[AgentResult] = Field(default_factory=list)


class EngineHeartbeat(Row):
    """An engine of an office and when it last said it was alive (table `engines`, one row per
    engine id). A running engine writes it every `lease_seconds / 3`; it counts as dead once
    `alive_until` (its last beat plus the limit it wrote, by the database's clock) has passed,
    and at once when it stopped cleanly."""

    office_id: str
    engine_id: str = Field(min_length=1)
    status: EngineState = "running"
    started_at: datetime = Field(default_factory=now)
    last_seen: datetime = Field(default_factory=now)
    alive_until: datetime
    stopped_at: datetime | None = None
    #: running and `alive_until` not passed, by the store's clock when the row was read (not a
    #: column)
    alive: bool


class EngineEnded(BaseModel):
    """What `Store.end_engine` did about what one engine left (not a table)."""

    model_config = ConfigDict(frozen=True)

    engine_id: str
    #: whether the engine counted as dead when its rows were written (False: it was alive, e.g.
    #: it beat again since the caller looked, and nothing was changed)
    dead: bool
    sessions_ended: int = 0
    questions_cancelled: int = 0
    commands_failed: int = 0
    jobs_failed: int = 0


# -- command payloads -----------------------------------------------------------------------


class Payload(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateSessionPayload(Payload):
    agent_id: str | None = None
    # validate_default: the "agent_id or role" check must also run when role is left out
    role: str | None = Field(default=None, validate_default=True)

    @field_validator("role")
    @classmethod
    def _role_or_agent(cls, role: str | None, info: Any) -> str | None:
        if role is None and info.data.get("agent_id") is None:
            raise ValueError("give agent_id or role")
        return role


class SendPromptPayload(Payload):
    prompt: str = Field(min_length=1)
    wait: bool = False
    timeout: float = Field(default=30.0, gt=0, le=3600)


class SendTextPayload(Payload):
    text: str = Field(min_length=1)


class SendKeysPayload(Payload):
    keys: str = Field(min_length=1)


class GetOutputPayload(Payload):
    lines: int | None = Field(default=None, gt=0, le=10_000)


class EmptyPayload(Payload):
    pass


class RunJobPayload(Payload):
    job_id: str


class ShipJobPayload(Payload):
    """Ship a job's work (semo/engine/ship): the steps to run, at least one (docs/JOBS.md)."""

    job_id: str = Field(min_length=1)
    push: bool = False
    pr: bool = False
    merge: bool = False

    @model_validator(mode="after")
    def _some_step(self) -> ShipJobPayload:
        if not (self.push or self.pr or self.merge):
            raise ValueError("say what to do: push, pr and/or merge")
        return self


PAYLOADS: dict[str, type[Payload]] = {
    "create_session": CreateSessionPayload,
    "send_prompt": SendPromptPayload,
    "send_text": SendTextPayload,
    "send_keys": SendKeysPayload,
    "get_output": GetOutputPayload,
    "cancel": EmptyPayload,
    "terminate": EmptyPayload,
    "run_job": RunJobPayload,
    "ship_job": ShipJobPayload,
}


class InvalidCommand(ValueError):
    """A command that cannot run: unknown type, bad payload, missing session."""


def validate_command(command_type: str, payload: dict[str, Any], session_id: str | None) -> None:
    """Raise InvalidCommand with a sentence saying what is wrong."""
    model = PAYLOADS.get(command_type)
    if model is None:
        known = ", ".join(COMMAND_TYPES)
        raise InvalidCommand(f"unknown command type {command_type!r} (known: {known})")
    if command_type in NEEDS_SESSION and not session_id:
        raise InvalidCommand(f"{command_type} needs a session_id")
    try:
        model.model_validate(payload)
    except ValidationError as error:
        problems = validation_problems(error, whole="payload")
        raise InvalidCommand(f"bad payload for {command_type}: {problems}") from None


def validation_problems(error: ValidationError, whole: str = "value") -> str:
    """A pydantic error as one line: "field: what is wrong; ..." (`whole` names the model)."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or whole}: {e['msg']}" for e in error.errors()
    )
