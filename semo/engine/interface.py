"""The engine as the console sees it: one interface, two implementations.

`EngineClient` (semo/engine/control/client.py: an engine in another process, through the office's
control socket) and `InProcessEngine` (semo/engine/in_process.py: an `Engine` in this process) both
implement `EngineInterface`; the console is typed against it and nothing else. What the
interface returns is plain data (the dataclasses here), live sessions (`SessionHandle`), or,
for the jobs view only, the engine's job models. Standard library only at run time: the
console imports this module before its first frame (tests/test_layering.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from semo.engine.bus import EventBus
    from semo.engine.jobwork.review import JobDiff, JobReview
    from semo.engine.office.job_ops import JobTimeline, JobView
    from semo.engine.protocol.state import AgentState
    from semo.engine.store.models import Job
    from semo.engine.terminal.screen import TerminalScreen


@dataclass(frozen=True)
class OfficeView:
    """The office an engine serves."""

    name: str
    id: str | None


@dataclass(frozen=True)
class AgentView:
    """One of the office's agents (semo.engine.store.models.Agent's id and role)."""

    id: str
    role: str
    #: the name semo.toml gives it (the role when it gives none)
    name: str = ""


#: how an evicted session's end reason starts (sessions/pool_words.py; the console's
#: announcement reads it; tests/console/test_pool_view.py holds the two together)
EVICTED = "evicted"


@dataclass(frozen=True)
class PooledView:
    """A session of the pool: how old it is and the task its lease runs (None: idle)."""

    age_s: float | None
    task_id: str | None
    role: str = ""
    #: the role's warm session (kept running), else a cold one (reaped when idle too long)
    warm: bool = False
    leased: bool = False
    #: seconds idle (None while leased or not ready)
    idle_s: float | None = None


@dataclass(frozen=True)
class BreakerView:
    """A role's restart breaker (sessions.breaker): open means no new session until the
    retry time."""

    state: str
    failures: int
    retry_after_s: float


@dataclass(frozen=True)
class WaiterView:
    """A request waiting for a session of `role` (a job's task id is `job-<id>`)."""

    role: str
    task_id: str | None
    waited_s: float


@dataclass(frozen=True)
class PoolView:
    """The pool as the session list's header and the pool view show it
    (sessions.pool.PoolStatus)."""

    total: int
    max_sessions: int
    #: warm roles without a session
    down: tuple[str, ...] = ()
    sessions: Mapping[str, PooledView] = field(default_factory=dict)
    #: why each warm role in `down` has no session
    why_down: Mapping[str, str] = field(default_factory=dict)
    starting: int = 0
    #: by role; closed ones included
    breakers: Mapping[str, BreakerView] = field(default_factory=dict)
    waiting: tuple[WaiterView, ...] = ()


@dataclass(frozen=True)
class QuestionView:
    """A pending question of the inbox (semo.engine.store.models.UserQuestion's fields)."""

    id: str
    agent_id: str
    session_id: str | None
    question_type: str
    question: str
    options: list[str]
    created_at: datetime


@dataclass(frozen=True)
class CommandView:
    """A recent command of the commands panel (semo.engine.store.models.AgentCommand's fields)."""

    id: str
    created_at: datetime
    command_type: str
    status: str
    payload: dict[str, Any]


class TerminalHandle(Protocol):
    """A session's terminal as a console pane drives it (semo/console/widgets/terminal_pane.py)."""

    @property
    def screen(self) -> TerminalScreen: ...

    def write(self, text: str) -> None: ...

    def resize(self, cols: int, rows: int) -> None: ...

    def add_listener(self, listener: Callable[[str], None]) -> None: ...

    def remove_listener(self, listener: Callable[[str], None]) -> None: ...

    def set_visible(self, visible: bool) -> None:
        """Whether a pane shows it: a client's engine sends no frames for a hidden one."""

    def want_history(self, lines: int) -> None:
        """A pane scrolled back wants the last `lines` lines of scrollback (0: none); a
        client's engine sends them, an in-process screen has them all."""


class SessionHandle(Protocol):
    """A live agent session, kept current by its engine."""

    @property
    def session_id(self) -> str: ...

    @property
    def role(self) -> str: ...

    @property
    def state(self) -> AgentState: ...

    @property
    def queued(self) -> int: ...

    @property
    def stale(self) -> bool: ...

    @property
    def ended(self) -> bool: ...

    @property
    def terminal(self) -> TerminalHandle: ...


class EngineInterface(Protocol):
    """Everything the console asks of an engine."""

    # -- life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the engine (in process) or attach to it and subscribe (a client)."""

    async def stop(self, reason: str = "console closed") -> None:
        """The console is done with it: an in-process engine stops, a client detaches."""

    async def stop_office(self) -> None:
        """Stop the office's engine and every agent (the palette's "Stop the office")."""

    @property
    def gone(self) -> str | None:
        """Why the engine went away; None while it is there."""

    def on_gone(self, listener: Callable[[str], None]) -> None:
        """`listener(reason)` once when the engine goes away."""

    def on_office(self, listener: Callable[[], None]) -> None:
        """`listener()` after each office snapshot (sessions may have come or gone)."""

    @property
    def engine_id(self) -> str | None: ...

    @property
    def consoles(self) -> int:
        """How many consoles are attached (this one included)."""

    # -- the office ----------------------------------------------------------------------------

    @property
    def bus(self) -> EventBus:
        """The engine's events (semo.engine.events models)."""

    @property
    def office(self) -> OfficeView | None: ...

    @property
    def backend(self) -> str:
        """The store's backend, as the header says it."""

    def connection_state(self) -> str:
        """How the engine hears about new rows (or that it is gone), for the header."""

    @property
    def agents(self) -> Mapping[str, AgentView]:
        """The office's agents by role."""

    def sessions(self) -> Sequence[SessionHandle]: ...

    def session(self, session_id: str) -> SessionHandle | None: ...

    def last_line(self, session_id: str) -> str | None:
        """The session's last line as the engine read it, when the console's own copy of its
        screen may be behind (a hidden pane of a client gets no frames); else None."""

    def pool_status(self) -> PoolView | None: ...

    def recent_steps(self) -> list[dict[str, Any]]:
        """Routing steps from before this console came (semo.engine.control.views.step_view)."""

    async def pending_questions(self) -> list[QuestionView]: ...

    async def recent_commands(self, limit: int = 20) -> list[CommandView]: ...

    async def command_outcome(self, command_id: str) -> str | None:
        """A finished command's outcome as the commands panel says it (views.outcome_text);
        None while it runs or when it is not known."""

    # -- acting ----------------------------------------------------------------------------------

    async def answer(
        self, question_id: str, *, text: str | None = None, option: int | None = None
    ) -> str | None:
        """Answer a pending question; returns the answer as recorded."""

    def send_prompt(self, session_id: str, text: str) -> None: ...

    async def cancel(self, session_id: str) -> None: ...

    async def terminate(self, session_id: str) -> None: ...

    async def new_session(self, role: str) -> SessionHandle: ...

    async def start_recording(self, session_id: str) -> Path: ...

    async def stop_recording(self, session_id: str) -> None: ...

    async def demo_job(self, started: Callable[[str], None]) -> None:
        """Run the demo office's job if it has none yet (`started(task)` first); nothing for
        an engine that runs its own (a background demo engine)."""

    # -- jobs --------------------------------------------------------------------------------------

    async def list_jobs(self, *, include_ended: bool = True) -> list[JobView]: ...

    async def job_timeline(self, job_id: str) -> JobTimeline: ...

    async def job_review(self, job_id: str) -> JobReview: ...

    async def job_diff(self, job_id: str) -> JobDiff: ...

    async def create_job(
        self, role: str, task: str, context: dict[str, Any] | None = None
    ) -> Job: ...

    async def cancel_job(self, job_id: str, reason: str = "") -> Job: ...


def pool_view(data: Mapping[str, Any]) -> PoolView:
    """A PoolView from sessions.pool.PoolStatus's JSON (both engines: the control snapshot
    carries that JSON, the in-process engine dumps its pool's status)."""
    sessions = {
        session_id: PooledView(
            age_s=row.get("age_s"),
            task_id=row.get("task_id"),
            role=str(row.get("role") or ""),
            warm=bool(row.get("warm")),
            leased=bool(row.get("leased")),
            idle_s=row.get("idle_s"),
        )
        for session_id, row in (data.get("sessions") or {}).items()
    }
    down = data.get("down") or {}
    breakers = {
        str(role): BreakerView(
            state=str(row.get("state") or "closed"),
            failures=int(row.get("failures") or 0),
            retry_after_s=float(row.get("retry_after_s") or 0.0),
        )
        for role, row in (data.get("breakers") or {}).items()
    }
    waiting = tuple(
        WaiterView(
            role=str(row.get("role") or ""),
            task_id=row.get("task_id"),
            waited_s=float(row.get("waited_s") or 0.0),
        )
        for row in data.get("waiters") or ()
    )
    return PoolView(
        total=int(data.get("total") or 0),
        max_sessions=int(data.get("max_sessions") or 0),
        down=tuple(down),
        sessions=sessions,
        why_down=dict(down) if isinstance(down, Mapping) else {},
        starting=int(data.get("starting") or 0),
        breakers=breakers,
        waiting=waiting,
    )
