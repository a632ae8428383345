"""Engine events (seed 003 SE10): what the engine's bus carries.

How it works: docs/OPERATIONS.md, "Engine events".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, field_validator

from semo.engine.bus import EventBus, Subscription
from semo.engine.protocol.monitor import SignalKind
from semo.engine.store.models import JobStatus, SessionStatus, now

if TYPE_CHECKING:
    from semo.engine.store.base import Store

log = logging.getLogger("semo.events")

#: the broadcast event name on the office channel
BROADCAST_EVENT = "semo_event"
#: a broadcast's JSON payload is at most this many bytes (output data is cut to fit)
MAX_BROADCAST_BYTES = 64 * 1024
#: text fields of events other than SessionOutput are cut to this many characters
MAX_TEXT = 4096
#: a CommandFinished result summary larger than this (as JSON) is replaced by a note
MAX_RESULT_BYTES = 16 * 1024


def _cut(value: str) -> str:
    return value if len(value) <= MAX_TEXT else value[: MAX_TEXT - 1] + "…"


#: a text field cut to MAX_TEXT characters
Text = Annotated[str, AfterValidator(_cut)]


class BaseEvent(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    kind: str
    office_id: str
    at: datetime = Field(default_factory=now)

    @field_validator("at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    def to_json(self) -> str:
        return self.model_dump_json()


class SessionStatusChanged(BaseEvent):
    kind: Literal["session_status"] = "session_status"
    session_id: str
    agent_id: str
    role: str | None = None
    status: SessionStatus
    previous: SessionStatus | None = None
    #: who said so: hook, screen, process, protocol, engine
    source: str = "engine"
    reason: Text = ""


class SessionOutput(BaseEvent):
    """A chunk of the agent's decoded terminal output. `seq` counts a session's chunks from 0;
    a coalesced broadcast carries chunks `first_seq`..`seq`, and `truncated` says data of
    that range is missing (cut to fit a broadcast, or dropped by a slow subscriber)."""

    kind: Literal["session_output"] = "session_output"
    session_id: str
    data: str
    seq: int = Field(ge=0)
    first_seq: int | None = None
    truncated: bool = False


class CommandClaimed(BaseEvent):
    kind: Literal["command_claimed"] = "command_claimed"
    command_id: str
    command_type: str
    session_id: str | None = None


class CommandFinished(BaseEvent):
    kind: Literal["command_finished"] = "command_finished"
    command_id: str
    command_type: str
    success: bool
    error: Text | None = None
    #: a summary of the result row (not the whole output)
    result: dict[str, Any] | None = None

    @field_validator("result")
    @classmethod
    def _small(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is None:
            return None
        size = len(json.dumps(value, default=str, ensure_ascii=False).encode())
        if size > MAX_RESULT_BYTES:
            return {"truncated": True, "bytes": size}
        return value


class AgentMessage(BaseEvent):
    """A protocol message an agent wrote (ASK_USER, INVOKE, DELIVER_RESULT, STEP_COMPLETE,
    DONE)."""

    kind: Literal["agent_message"] = "agent_message"
    session_id: str
    agent_id: str
    message_kind: str
    summary: Text = ""


class MalformedAgentMessage(BaseEvent):
    kind: Literal["malformed_agent_message"] = "malformed_agent_message"
    session_id: str
    #: what the agent was told (ProtocolError.for_agent())
    error: Text


#: what an engine is doing, as its status events say
EnginePhase = Literal["starting", "running", "stopping", "stopped"]


class EngineStatus(BaseEvent):
    kind: Literal["engine_status"] = "engine_status"
    engine_id: str
    status: EnginePhase
    detail: Text = ""


class RoutingStep(BaseEvent):
    """One step of routing (question asked/answered, invocation sent, result delivered...)."""

    kind: Literal["routing_step"] = "routing_step"
    step: str
    ref_id: str | None = None  # the question, invocation or result row
    session_id: str | None = None
    agent_id: str | None = None
    #: the job whose work this step is, if any (its timeline records the step)
    job_id: str | None = None
    detail: Text = ""


JobStep = Literal[
    "created",
    "started",
    "queued",
    "session",
    "delivered",
    "turn",
    "retry",
    "cancel_requested",
    "cancelling",
    "done",
    "failed",
    "pr_created",
    # the job's branch (semo/engine/jobwork): its start, a role's worktree put on it, a conflict
    # handed to a role, the leftovers committed, the roles' work combined, a conflict
    "branch",
    "worktree",
    "resolving",
    "committed",
    "combined",
    "needs_review",
]


class JobEvent(BaseEvent):
    """A step of a job: created (by a person: CLI, API), started (an engine took it), queued
    (waiting for a session: the pool is full), session (leased), delivered (the prompt), turn
    (a turn ended without an outcome), retry, cancel_requested (by a person), cancelling (its
    engine ends it), done, failed."""

    kind: Literal["job"] = "job"
    job_id: str
    agent_id: str
    step: JobStep
    status: JobStatus
    attempts: int = 0
    session_id: str | None = None
    needs_human: bool = False
    detail: Text = ""


class SessionSignal(BaseEvent):
    """A completion/error pattern seen in a session (semo.engine.protocol.monitor.Signal)."""

    kind: Literal["session_signal"] = "session_signal"
    session_id: str
    signal_kind: SignalKind
    pattern: str
    #: model_text, tool_output or screen
    source: str
    text: Text = ""


class Notification(BaseEvent):
    """A notification for the operator's terminal (semo.engine.notify's console sink): every
    attached console shows it as a desktop notification (OSC 9 / OSC 777) and rings. The
    texts are already made inert by semo.engine.notify (one line, no controls, bounded)."""

    kind: Literal["notification"] = "notification"
    #: semo.engine.notify.models.NoticeKind
    notice_kind: str
    headline: Text
    body: Text = ""
    agent: str = ""
    ref: str = ""


Event = Annotated[
    SessionStatusChanged
    | SessionOutput
    | CommandClaimed
    | CommandFinished
    | AgentMessage
    | MalformedAgentMessage
    | EngineStatus
    | SessionSignal
    | RoutingStep
    | JobEvent
    | Notification,
    Field(discriminator="kind"),
]
EVENT_TYPES: tuple[type[BaseEvent], ...] = (
    SessionStatusChanged,
    SessionOutput,
    CommandClaimed,
    CommandFinished,
    AgentMessage,
    MalformedAgentMessage,
    EngineStatus,
    SessionSignal,
    RoutingStep,
    JobEvent,
    Notification,
)
EVENT_KINDS: frozenset[str] = frozenset(t.model_fields["kind"].default for t in EVENT_TYPES)
_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)


def event_from_json(data: str | bytes | dict[str, Any]) -> Event:
    """The event a `model_dump(mode="json")` dict or its JSON text describes (pydantic's
    ValidationError when it is not one)."""
    if isinstance(data, dict):
        return _ADAPTER.validate_python(data)
    return _ADAPTER.validate_json(data)


# -- forwarding to the store (Realtime broadcasts) ---------------------------------------------


def _json_size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def fit_output(event: SessionOutput, max_bytes: int = MAX_BROADCAST_BYTES) -> SessionOutput:
    """`event` with its oldest data cut so that its JSON is at most `max_bytes` (flagged
    `truncated`); the event itself when it fits."""
    if _json_size(event.model_dump(mode="json")) <= max_bytes:
        return event
    data = event.data
    flagged = event.model_copy(update={"data": "", "truncated": True})
    budget = max_bytes - _json_size(flagged.model_dump(mode="json")) + 2  # "" counted there
    # the smallest start whose tail fits (every character is at least one byte)
    low, high = max(0, len(data) - max(0, budget)), len(data)
    while low < high:
        middle = (low + high) // 2
        if _json_size(data[middle:]) <= budget:
            high = middle
        else:
            low = middle + 1
    return event.model_copy(update={"data": data[low:], "truncated": True})


@dataclass
class _Pending:
    """Output chunks of one session waiting for their broadcast."""

    first: SessionOutput
    last: SessionOutput
    due: float
    parts: list[str] = field(default_factory=list)
    chars: int = 0
    truncated: bool = False


class EventForwarder:
    """Forwards the bus's events to `store.publish_event(office_id, event_name, json dict)`.

    Output chunks are coalesced per session: the first is sent at once, those that follow
    within `interval` go together when it has passed (data concatenated, `first_seq`..`seq`),
    cut to `max_bytes`. Other events are sent as they come (so an output broadcast can trail
    a status change by up to `interval`). Broadcasts are best effort: what the store cannot
    send (`False`) is counted in `failed`, never retried. `start()` needs a running loop;
    `await stop()` sends what is queued (within `flush_timeout`) and ends the task."""

    def __init__(
        self,
        bus: EventBus,
        store: Store,
        *,
        office_id: str | None = None,
        kinds: Iterable[str] | None = None,
        event_name: str = BROADCAST_EVENT,
        interval: float = 0.1,
        max_bytes: int = MAX_BROADCAST_BYTES,
        maxsize: int = 10_000,
    ) -> None:
        self.bus = bus
        self.store = store
        self.office_id = office_id
        self.kinds = kinds
        self.event_name = event_name
        self.interval = interval
        self.max_bytes = max_bytes
        self.maxsize = maxsize
        #: broadcasts the store sent / could not send; output broadcasts cut to fit
        self.sent = 0
        self.failed = 0
        self.truncated = 0
        self._subscription: Subscription | None = None
        self._task: asyncio.Task[None] | None = None
        self._pending: dict[tuple[str, str], _Pending] = {}
        self._last_sent: dict[tuple[str, str], float] = {}

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def dropped(self) -> int:
        """Output events the bus dropped because forwarding fell behind."""
        return self._subscription.dropped if self._subscription is not None else 0

    def start(self) -> None:
        if self.running:
            return
        self._subscription = self.bus.subscribe(
            kinds=self.kinds, office_id=self.office_id, maxsize=self.maxsize
        )
        self._task = asyncio.get_running_loop().create_task(
            self._run(self._subscription), name="semo-event-forwarder"
        )

    async def stop(self, *, flush_timeout: float = 2.0) -> None:
        task, subscription = self._task, self._subscription
        if subscription is not None:
            subscription.close()
        if task is None:
            return
        done, _ = await asyncio.wait({task}, timeout=flush_timeout)
        if not done:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        self._task = None

    async def _run(self, subscription: Subscription) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                timeout = None
                if self._pending:
                    due = min(p.due for p in self._pending.values())
                    timeout = max(0.0, due - loop.time())
                event = await subscription.get(timeout)
                if event is None and subscription.closed and not len(subscription):
                    await self._flush(force=True)
                    return
                if isinstance(event, SessionOutput):
                    self._buffer(event, loop.time())
                elif event is not None:
                    await self._send(event)
                await self._flush()
            except asyncio.CancelledError:
                raise
            except Exception:  # the forwarder must not die
                log.exception("semo: event forwarder error (continuing)")
                await asyncio.sleep(0.05)

    def _buffer(self, event: SessionOutput, at: float) -> None:
        key = (event.office_id, event.session_id)
        pending = self._pending.get(key)
        if pending is None:
            due = max(at, self._last_sent.get(key, -float("inf")) + self.interval)
            pending = self._pending[key] = _Pending(event, event, due)
        elif event.seq != pending.last.seq + 1:
            pending.truncated = True  # chunks were dropped in between
        pending.last = event
        pending.truncated |= event.truncated
        pending.parts.append(event.data)
        pending.chars += len(event.data)
        if pending.chars > 2 * self.max_bytes:  # only the newest max_bytes can be sent
            tail = "".join(pending.parts)[-self.max_bytes :]
            pending.parts, pending.chars, pending.truncated = [tail], len(tail), True

    async def _flush(self, *, force: bool = False) -> None:
        current = asyncio.get_running_loop().time()
        for key, pending in list(self._pending.items()):
            if not force and pending.due > current:
                continue
            del self._pending[key]
            self._last_sent[key] = current
            first, last = pending.first, pending.last
            start = first.seq if first.first_seq is None else first.first_seq
            merged = last.model_copy(
                update={
                    "data": "".join(pending.parts),
                    "first_seq": None if start == last.seq else start,
                    "truncated": pending.truncated,
                    "at": first.at,
                }
            )
            fitted = fit_output(merged, self.max_bytes)
            if fitted is not merged:
                self.truncated += 1
            await self._send(fitted)
        if len(self._last_sent) > 10_000:  # forget sessions idle for a while
            horizon = current - 10 * self.interval
            self._last_sent = {k: t for k, t in self._last_sent.items() if t > horizon}

    async def _send(self, event: BaseEvent) -> None:
        started = time.monotonic()
        ok = await self.store.publish_event(
            event.office_id, self.event_name, event.model_dump(mode="json")
        )
        if ok:
            self.sent += 1
        else:
            self.failed += 1
            log.debug(
                "semo: %s event for office %s not broadcast (%.0f ms)",
                event.kind,
                event.office_id,
                (time.monotonic() - started) * 1000,
            )
