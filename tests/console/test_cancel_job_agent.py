"""F8 on a job's agent (issue 25, 3): the dialog offers to cancel the turn or the job; the
operator's interrupt ends the job as cancelled by the operator, never retried as a crash; F8
on an agent with no turn running opens no dialog. A real engine, scripted agents in PTYs (a
generic agent gets Ctrl+C, which ends the script), the sqlite store."""

from __future__ import annotations

from pathlib import Path

from semo.console.app import SemoApp
from semo.console.confirm import Choose
from semo.console.widgets.session_list import SessionList
from semo.engine.engine import Engine
from semo.engine.in_process import InProcessEngine
from semo.engine.routing.jobs import OPERATOR_INTERRUPTED
from semo.engine.store.models import Job
from tests.console.console_snapshot_app import console_engine
from tests.support.console_app import at_three_sizes, runtime_dir_fixture, waiter
from tests.support.waiting import eventually_value

runtime_dir = runtime_dir_fixture("semo-f8-")
wait_for = waiter(30.0)


async def job_end(engine: Engine, job_id: str) -> Job:
    """The job's row once it has ended."""

    async def ended() -> Job | None:
        job = await engine.store.get_job(job_id)
        return job if job.status in ("done", "failed") else None

    return await eventually_value(ended, "the job's end", 30.0)


SLOW = {"FE": [{"match": "login", "text": "fe: done [SEMO:DONE]", "delay": 60}], "BE": []}


@at_three_sizes
async def test_f8_on_a_job_s_agent_cancels_the_turn_as_the_operator(
    tmp_path: Path, runtime_dir: Path, size: tuple[int, int]
) -> None:
    engine = console_engine(tmp_path, runtime_dir, scripts=SLOW)
    app = SemoApp(InProcessEngine(engine))
    async with app.run_test(size=size) as pilot:
        await wait_for(lambda: getattr(app.screen, "started", False), "the engine")
        main = app.screen
        be = next(s for s in engine.sessions() if s.role == "BE")
        main.select(be.session_id)
        main.query_one(SessionList).focus()
        await pilot.press("f8")  # BE is idle and runs no job: no dialog about a turn
        await pilot.pause()
        assert app.screen is main
        assert any("no turn to cancel" in n.message for n in app._notifications)

        job = await engine.create_job("FE", "build the login page")
        fe = next(s for s in engine.sessions() if s.role == "FE")
        await wait_for(lambda: fe.state.value == "executing", "FE working on the job")
        await wait_for(lambda: main._job_of(fe.session_id) == job.id, "FE leased to the job")
        main.select(fe.session_id)
        await pilot.press("f8")
        await wait_for(lambda: isinstance(app.screen, Choose), "the choice")
        assert {b.id for b in app.screen.query("Button")} == {"turn", "job", "no"}
        await pilot.press("t")
        await wait_for(lambda: app.screen is main, "the dialog gone")

        ended_job = await job_end(engine, job.id)
        assert ended_job is not None and ended_job.status == "failed"
        assert ended_job.attempts == 1  # not retried as a crash
        assert OPERATOR_INTERRUPTED in (ended_job.failure_reason or "")


async def test_f8_on_a_job_s_agent_can_cancel_the_job(tmp_path: Path, runtime_dir: Path) -> None:
    engine = console_engine(tmp_path, runtime_dir, scripts=SLOW)
    app = SemoApp(InProcessEngine(engine))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(lambda: getattr(app.screen, "started", False), "the engine")
        main = app.screen
        job = await engine.create_job("FE", "build the login page")
        fe = next(s for s in engine.sessions() if s.role == "FE")
        await wait_for(lambda: main._job_of(fe.session_id) == job.id, "FE leased to the job")
        main.select(fe.session_id)
        main.query_one(SessionList).focus()
        await pilot.press("f8")
        await wait_for(lambda: isinstance(app.screen, Choose), "the choice")
        await pilot.press("j")
        ended_job = await job_end(engine, job.id)
        assert ended_job is not None and ended_job.status == "failed"
        assert "cancelled by the operator" in (ended_job.failure_reason or "")
