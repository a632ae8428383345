"""The console reads the same office through either implementation of the engine interface
(engine/interface.py): an in-process engine, and the control client attached to its socket.

- The session list's header is the pool (sessions / max), the main header the office, the
  store's backend and how the engine hears about new rows.
- A session leased to a job shows the job in its row; F8 on it cancels the job (the pool's
  lease says which).
- A hidden pane's row still shows the session's last line.
"""

from __future__ import annotations

from pathlib import Path

from semo.console.confirm import Choose
from semo.console.screens.main import MainScreen
from semo.console.widgets.session_list import SessionList
from semo.engine.engine import Engine
from semo.engine.store.models import Job
from tests.console.console_snapshot_app import console_engine
from tests.support.console_app import runtime_dir_fixture, waiter
from tests.support.console_engines import console_on, engine_kind_fixture
from tests.support.waiting import eventually_value

runtime_dir = runtime_dir_fixture("semo-face-")
engine_kind = engine_kind_fixture()
wait_for = waiter(30.0)

#: FE answers "hello" at once; a job for BE runs until cancelled
SCRIPTS: dict[str, list[object]] = {"FE": [{"match": "hello", "text": "fe-said-hello"}], "BE": []}


def rows(main: MainScreen) -> dict[str, tuple[str, str | None, str]]:
    """Each row of the session list by role: its state, job and last line."""
    return {
        row.role: (row.state, row.job, row.last_line)
        for row in main.query_one(SessionList).rows_shown
    }


async def ended(engine: Engine, job_id: str) -> Job:
    async def value() -> Job | None:
        job = await engine.store.get_job(job_id)
        return job if job.status in ("done", "failed") else None

    return await eventually_value(value, "the job's end", 30.0)


async def test_pool_header_job_rows_and_f8_on_either_engine(
    tmp_path: Path, runtime_dir: Path, engine_kind: str
) -> None:
    engine = console_engine(tmp_path, runtime_dir, scripts=SCRIPTS, control=engine_kind == "client")
    async with console_on(engine_kind, engine) as app, app.run_test(size=(160, 40)) as pilot:
        await wait_for(lambda: getattr(app.screen, "started", False), "the engine")
        main = app.screen
        assert isinstance(main, MainScreen)
        listing = main.query_one(SessionList)
        await wait_for(lambda: str(listing.border_subtitle) == "2/4", "the pool in the header")
        await wait_for(
            lambda: main.sub_title == "console-test · sqlite · local · 1 pane", "the office"
        )
        assert sorted(app.engine.agents) == ["BE", "FE"]

        fe = next(s for s in engine.sessions() if s.role == "FE")
        be = next(s for s in engine.sessions() if s.role == "BE")
        main.select(be.session_id)  # FE's pane hidden: its row reads what the engine read
        engine.send_prompt(fe.session_id, "hello")
        await wait_for(lambda: rows(main)["FE"][2] == "fe-said-hello", "FE's last line")
        assert not main.panes[fe.session_id].display

        job = await engine.create_job("BE", "wait for the API")
        await wait_for(lambda: rows(main)["BE"][1] == job.id[:6], "BE's row naming its job")
        assert main._job_of(be.session_id) == job.id
        main.query_one(SessionList).focus()
        await pilot.press("f8")
        await wait_for(lambda: isinstance(app.screen, Choose), "the choice")
        await pilot.press("j")
        cancelled = await ended(engine, job.id)
        assert cancelled.status == "failed"
        assert "cancelled by the operator" in (cancelled.failure_reason or "")
        await wait_for(lambda: rows(main)["BE"][1] is None, "the lease gone from the row")
