"""InProcessEngine: an `Engine` of this process behind the console's `EngineInterface`.

    app = SemoApp(InProcessEngine(Engine(config)))   # the app starts it, and stops it on exit

Tests and scripts run the console on an engine in their own process; `semo console` runs it
on an `EngineClient` instead (semo/engine/control/client.py). Both implement
semo/engine/interface.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from semo.engine.control.views import outcome_text
from semo.engine.interface import (
    AgentView,
    CommandView,
    EngineInterface,
    OfficeView,
    PoolView,
    QuestionView,
    SessionHandle,
    pool_view,
)

if TYPE_CHECKING:
    from semo.engine.bus import EventBus
    from semo.engine.control.client import EngineClient
    from semo.engine.engine import Engine
    from semo.engine.jobwork.review import JobDiff, JobReview
    from semo.engine.office.job_ops import JobTimeline, JobView
    from semo.engine.store.models import Job


class InProcessEngine:
    """The console's view of `engine`: it never goes away, and it is its only console."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # -- life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        await self.engine.start()

    async def stop(self, reason: str = "console closed") -> None:
        await self.engine.stop(reason)

    async def stop_office(self) -> None:
        await self.engine.stop("stopped by the operator")

    @property
    def gone(self) -> str | None:
        return None

    def on_gone(self, listener: Callable[[str], None]) -> None:
        """Nothing to tell: the engine goes only with this process."""

    def on_office(self, listener: Callable[[], None]) -> None:
        """Nothing to tell: every change comes on the bus."""

    @property
    def engine_id(self) -> str | None:
        return self.engine.engine_id

    @property
    def consoles(self) -> int:
        return 1

    # -- the office ----------------------------------------------------------------------------

    @property
    def bus(self) -> EventBus:
        return self.engine.bus

    @property
    def office(self) -> OfficeView | None:
        office = self.engine.office
        return None if office is None else OfficeView(name=office.name, id=office.id)

    @property
    def backend(self) -> str:
        return self.engine.store.backend

    def connection_state(self) -> str:
        return self.engine.connection_state()

    @property
    def agents(self) -> Mapping[str, AgentView]:
        return {
            role: AgentView(id=a.id, role=role, name=a.name)
            for role, a in self.engine.agents.items()
        }

    def sessions(self) -> Sequence[SessionHandle]:
        return self.engine.sessions()

    def session(self, session_id: str) -> SessionHandle | None:
        manager = self.engine.manager
        return manager.sessions.get(session_id) if manager is not None else None

    def last_line(self, session_id: str) -> str | None:
        return None  # the console's screen is the session's own

    def pool_status(self) -> PoolView | None:
        pool = self.engine.pool
        if pool is None:
            return None
        status = pool.status()
        return pool_view(status.model_dump(mode="json"))

    def recent_steps(self) -> list[dict[str, Any]]:
        return []  # its console is there from the start: it sees every step on the bus

    async def pending_questions(self) -> list[QuestionView]:
        return [
            QuestionView(
                id=q.id,
                agent_id=q.agent_id,
                session_id=q.session_id,
                question_type=q.question_type,
                question=q.question,
                options=list(q.options),
                created_at=q.created_at,
            )
            for q in await self.engine.pending_questions()
        ]

    async def recent_commands(self, limit: int = 20) -> list[CommandView]:
        return [
            CommandView(
                id=c.id,
                created_at=c.created_at,
                command_type=c.command_type,
                status=c.status,
                payload=dict(c.payload or {}),
            )
            for c in await self.engine.recent_commands(limit)
        ]

    async def command_outcome(self, command_id: str) -> str | None:
        result = await self.engine.store.get_result(command_id)
        return None if result is None else outcome_text(result)

    # -- acting ----------------------------------------------------------------------------------

    async def answer(
        self, question_id: str, *, text: str | None = None, option: int | None = None
    ) -> str | None:
        question = await self.engine.answer(question_id, text=text, option=option)
        return question.answer

    def send_prompt(self, session_id: str, text: str) -> None:
        self.engine.send_prompt(session_id, text)

    async def cancel(self, session_id: str) -> None:
        await self.engine.cancel(session_id)

    async def terminate(self, session_id: str) -> None:
        await self.engine.terminate(session_id)

    async def new_session(self, role: str) -> SessionHandle:
        return await self.engine.new_session(role)

    async def start_recording(self, session_id: str) -> Path:
        return self.engine.start_recording(session_id)

    async def stop_recording(self, session_id: str) -> None:
        self.engine.stop_recording(session_id)

    async def demo_job(self, started: Callable[[str], None]) -> None:
        from semo.engine.demo.office import DEMO_TASK, new_demo_job

        job = await new_demo_job(self.engine)
        if job is None or self.engine.jobs is None:
            return
        started(DEMO_TASK)
        await self.engine.jobs.execute_job(job.id)

    # -- jobs --------------------------------------------------------------------------------------

    async def list_jobs(self, *, include_ended: bool = True) -> list[JobView]:
        return await self.engine.list_jobs(include_ended=include_ended)

    async def job_timeline(self, job_id: str) -> JobTimeline:
        return await self.engine.job_timeline(job_id)

    async def job_review(self, job_id: str) -> JobReview:
        return await self.engine.job_review(job_id)

    async def job_diff(self, job_id: str) -> JobDiff:
        return await self.engine.job_diff(job_id)

    async def create_job(self, role: str, task: str, context: dict[str, Any] | None = None) -> Job:
        return await self.engine.create_job(role, task, context)

    async def cancel_job(self, job_id: str, reason: str = "") -> Job:
        return await self.engine.cancel_job(job_id, reason)


if TYPE_CHECKING:  # mypy checks that both engines implement the console's interface

    def _in_process(engine: InProcessEngine) -> EngineInterface:
        return engine

    def _client(client: EngineClient) -> EngineInterface:
        return client
