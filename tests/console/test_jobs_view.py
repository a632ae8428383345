"""The console's jobs view over a real engine (scripted agents in real PTYs, the sqlite store,
Textual's Pilot at the keyboard).

- F5 opens the jobs view; c asks for a role and a task and creates the job; the list shows it
  (state, role, the task's first line) and follows it to `done` from the engine's job events;
  the timeline shows its steps and its outcome. Escape goes back to the sessions.
- The palette's "Create job" opens the same form; "Cancel job" asks first: No leaves the job
  running; x in the view and Yes cancel it: the job fails with the console's reason.
- The prefix then j opens the view too.
- Ages tick: the age cells follow the clock in place (no rebuild, the cursor kept).

The first runs on both implementations of the engine interface: an in-process engine and the
control client attached to its socket (tests/support/console_engines.py).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from textual.widgets import DataTable

from semo.console.app import SemoApp
from semo.console.confirm import Confirm
from semo.console.screens.jobs import JobsScreen
from semo.console.screens.main import MainScreen
from semo.engine.in_process import InProcessEngine
from tests.console.console_snapshot_app import console_engine
from tests.support.console_app import runtime_dir_fixture, waiter
from tests.support.console_engines import console_on, engine_kind_fixture
from tests.support.console_jobs import create, job_in, run_palette

TIMEOUT = 20.0
SCRIPTS = {
    "FE": [{"match": "login page", "text": "built it\n[SEMO:DONE] the login page works"}],
    "BE": [],  # never ends a job: it stays running until cancelled
}


runtime_dir = runtime_dir_fixture("semo-jobs-")
engine_kind = engine_kind_fixture()


wait_for = waiter(TIMEOUT)


def rows(screen: JobsScreen) -> list[list[str]]:
    table = screen.query_one("#job-list", DataTable)
    return [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]


async def test_create_follow_and_cancel_jobs_from_the_keyboard(
    tmp_path: Path, runtime_dir: Path, engine_kind: str
) -> None:
    engine = console_engine(tmp_path, runtime_dir, scripts=SCRIPTS, control=engine_kind == "client")
    async with console_on(engine_kind, engine) as app, app.run_test(size=(120, 40)) as pilot:
        await wait_for(lambda: getattr(app.screen, "started", False), "the engine")
        main = app.screen
        await pilot.press("f5")
        await wait_for(lambda: isinstance(app.screen, JobsScreen), "the jobs view")
        jobs = app.screen
        assert isinstance(jobs, JobsScreen)
        await wait_for(lambda: "no jobs yet" in jobs.timeline_text, "the empty view")

        await pilot.press("c")
        await create(app, pilot, "FE", "Build the login page\nwith a form")
        done = await job_in(engine, "done")
        await wait_for(lambda: rows(jobs) and rows(jobs)[0][0] == "done", "the job done")
        assert rows(jobs)[0][:3] == ["done", "FE", "Build the login page"]
        await wait_for(lambda: "done" in jobs.timeline_text.splitlines()[0], "the timeline")
        assert f"job {done.id[:8]}" in jobs.timeline_text
        steps = jobs.timeline_text.split("steps:")[1]
        for step in ("created", "started", "delivered", "done"):
            assert f"  {step}" in steps, step

        # the palette's Create job: BE never finishes, the job stays running
        await pilot.press("escape")
        await wait_for(lambda: isinstance(app.screen, MainScreen), "back to the sessions")
        assert app.screen is main
        await run_palette(app, pilot, "Create job")
        await create(app, pilot, "BE", "Wait for the API")
        running = await job_in(engine, "running")
        jobs = app.screen
        assert isinstance(jobs, JobsScreen)
        await wait_for(lambda: rows(jobs)[0][:2] == ["running", "BE"], "BE's job listed")

        # the palette's Cancel job asks first: No leaves it running
        await pilot.press("escape")
        await run_palette(app, pilot, "Cancel job")
        await wait_for(lambda: isinstance(app.screen, Confirm), "the confirmation")
        await pilot.press("n")
        await wait_for(lambda: isinstance(app.screen, JobsScreen), "back in the view")
        assert (await engine.job_timeline(running.id)).job.status == "running"

        # x and Yes cancel it
        jobs = app.screen
        assert isinstance(jobs, JobsScreen)
        await wait_for(lambda: jobs.selected == running.id, "the running job selected")
        await pilot.press("x")
        await wait_for(lambda: isinstance(app.screen, Confirm), "the confirmation")
        await pilot.press("y")
        failed = await job_in(engine, "failed")
        assert failed.id == running.id
        assert "cancelled in the console" in (failed.failure_reason or "")
        await wait_for(lambda: rows(jobs)[0][0] == "failed", "the list updated")
        await wait_for(lambda: "cancelled in the console" in jobs.timeline_text, "the reason")
        await pilot.press("x")  # an ended job: said at once, nothing asked
        assert isinstance(app.screen, JobsScreen)
        assert any("failed: nothing to cancel" in n.message for n in app._notifications)

        # the prefix then j
        await pilot.press("escape")
        await wait_for(lambda: isinstance(app.screen, MainScreen), "back to the sessions")
        main.run_prefixed("j")
        await wait_for(lambda: isinstance(app.screen, JobsScreen), "the jobs view again")
        again = app.screen
        assert isinstance(again, JobsScreen)
        await wait_for(lambda: "cancelled in the console" in again.timeline_text, "its timeline")
        await pilot.press("escape")
        await wait_for(lambda: isinstance(app.screen, MainScreen), "back to the sessions")


async def test_ages_tick_in_place(tmp_path: Path, runtime_dir: Path) -> None:
    """The age cells follow the clock without a job event, without rebuilding the list, and
    the cursor stays on the job the operator picked."""
    engine = console_engine(tmp_path, runtime_dir, scripts=SCRIPTS)
    app = SemoApp(InProcessEngine(engine))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(lambda: getattr(app.screen, "started", False), "the engine")
        for task in ("first", "second"):
            await engine.create_job("BE", task)
        await job_in(engine, "running")
        await pilot.press("f5")
        await wait_for(lambda: isinstance(app.screen, JobsScreen), "the jobs view")
        jobs = app.screen
        assert isinstance(jobs, JobsScreen)
        await wait_for(lambda: len(rows(jobs)) == 2, "both jobs listed")
        await pilot.press("down")
        await wait_for(lambda: jobs.selected == jobs.jobs[1].id, "the older job selected")
        assert [row[3] for row in rows(jobs)] == ["<1m", "<1m"]
        rebuilds = jobs.rebuilds
        later = jobs.jobs[0].created_at + timedelta(minutes=5, seconds=30)
        jobs.tick_ages(later)
        assert [row[3] for row in rows(jobs)] == ["5m", "5m"]
        assert [row[1:3] for row in rows(jobs)] == [["BE", "second"], ["BE", "first"]]
        assert jobs.rebuilds == rebuilds
        assert jobs.query_one("#job-list", DataTable).cursor_row == 1
        assert jobs.selected == jobs.jobs[1].id
