"""The jobs view at 80x24: the timeline keeps most of the width, and a running job whose agent
waits for the operator reads `asks you` (real engine, scripted agents, Textual's Pilot)."""

from __future__ import annotations

import json
from pathlib import Path

from textual.widgets import DataTable

from semo.console.app import SemoApp
from semo.console.screens.jobs import JobsScreen
from semo.engine.in_process import InProcessEngine
from tests.console.console_snapshot_app import FOUR, console_engine
from tests.support.console_app import runtime_dir_fixture, waiter

SCRIPTS = {"FE": [{"match": "login page", "text": f"[ASK_USER]\n{json.dumps(FOUR)}\n[/ASK_USER]"}]}
runtime_dir = runtime_dir_fixture("semo-jobask-")
wait_for = waiter(20.0)


def states(screen: JobsScreen) -> list[str]:
    table = screen.query_one("#job-list", DataTable)
    return [str(table.get_row_at(i)[0]) for i in range(table.row_count)]


async def test_a_job_waiting_for_an_answer_says_so_at_80x24(
    tmp_path: Path, runtime_dir: Path
) -> None:
    engine = console_engine(tmp_path, runtime_dir, scripts=SCRIPTS)
    app = SemoApp(InProcessEngine(engine))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(lambda: getattr(app.screen, "started", False), "the engine")
        job = await engine.create_job("FE", "Build the login page")
        await pilot.press("f5")
        await wait_for(lambda: isinstance(app.screen, JobsScreen), "the jobs view")
        jobs = app.screen
        assert isinstance(jobs, JobsScreen)
        await wait_for(lambda: states(jobs) == ["asks you"], "the job asking")
        assert (await engine.job_timeline(job.id)).job.status == "running"  # in the store
        timeline = jobs.query_one("#job-timeline-box")
        assert timeline.size.width >= 45  # it had 31 columns of 80
        (question,) = await engine.pending_questions()
        await engine.answer(question.id, option=1)
        await wait_for(lambda: states(jobs) == ["running"], "answered: running again")
