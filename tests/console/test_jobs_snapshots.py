"""Snapshots of the jobs view at 80x24 and 120x40: FE's finished job selected, its timeline
(created, started, session, delivered, done with FE's words). Times, ages and the job's id
are fixed for the picture. Regenerate with `scripts/test tests/console --snapshot-update` after
a deliberate change, and look at the SVGs (rsvg-convert -w 1400 X.svg -o X.png)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from textual.widgets import DataTable, Input

import semo.console.job_text
from semo.console.app import SemoApp
from semo.console.job_text import age as real_age
from semo.console.screens.jobs import CreateJob, JobsScreen
from semo.engine.in_process import InProcessEngine
from tests.console.console_snapshot_app import console_engine
from tests.support.waiting import eventually

SCRIPTS = {
    "FE": [{"match": "login page", "text": "built it\n[SEMO:DONE] the login page works"}],
    "BE": [],
}


@pytest.fixture(autouse=True)
def fixed_times(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(semo.console.job_text, "clock", lambda _at: "12:00:00")
    monkeypatch.setattr(semo.console.job_text, "age", lambda _since, _now=None: "3s")
    monkeypatch.setattr(semo.console.job_text, "job_label", lambda _id: "job-0001")


@pytest.fixture
def runtime_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="semo-jsnap-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_jobs_view(snap_compare, tmp_path: Path, runtime_dir: Path, size: tuple[int, int]) -> None:
    engine = console_engine(tmp_path, runtime_dir, scripts=SCRIPTS)
    app = SemoApp(InProcessEngine(engine))

    async def settle(pilot: object) -> None:
        await eventually(lambda: getattr(app.screen, "started", False), 20)
        await pilot.press("f5")  # type: ignore[attr-defined]
        await eventually(lambda: isinstance(app.screen, JobsScreen), 20)
        await pilot.press("c")  # type: ignore[attr-defined]
        await eventually(lambda: isinstance(app.screen, CreateJob), 20)
        form = app.screen
        form.query_one("#job-role", Input).value = "FE"
        form.query_one("#job-task", Input).value = "Build the login page\nwith a form"
        form.query_one("#job-task", Input).focus()
        await pilot.press("enter")  # type: ignore[attr-defined]
        jobs = app.screen
        assert isinstance(jobs, JobsScreen)
        await eventually(lambda: "job-0001  done" in jobs.timeline_text, 20)
        await eventually(lambda: "  done" in jobs.timeline_text.split("steps:")[1], 20)
        # a DataTable measures new rows' columns when its message queue is idle (Textual's
        # _on_idle), which a loaded machine can put off past the picture: wait for it
        table = jobs.query_one("#job-list", DataTable)
        await eventually(lambda: not table._require_update_dimensions, 20)
        app.clear_notifications()
        await pilot.pause()  # type: ignore[attr-defined]

    assert snap_compare(app, terminal_size=size, run_before=settle)


def test_ages_read_as_a_person_says_them() -> None:
    now = datetime(2026, 1, 2, 12, 0, 0).astimezone()
    for seconds, shown in ((5, "<1m"), (90, "1m"), (7200, "2h"), (200000, "2d")):
        since = now.fromtimestamp(now.timestamp() - seconds, now.tzinfo)
        assert real_age(since, now) == shown


def test_a_timeline_names_the_agents_of_its_questions_invocations_and_results() -> None:
    from semo.engine.office.job_ops import JobTimeline, JobView
    from semo.engine.store.models import Agent, AgentInvocation, AgentResult, JobEntry, UserQuestion

    fe = Agent(office_id="o", role="FE", name="fe")
    be = Agent(office_id="o", role="BE", name="be")
    agents = {fe.id: fe, be.id: be}
    job = JobView(
        office_id="o",
        agent_id=fe.id,
        task="Build\nit",
        status="failed",
        failure_reason="cancelled: \x1b]52;c;eA==\x07 no",
        role="FE",
    )
    timeline = JobTimeline(
        job=job,
        entries=[JobEntry(job_id=job.id, office_id="o", step="failed", agent_id=fe.id, detail="x")],
        questions=[UserQuestion(office_id="o", agent_id=fe.id, question="Which DB?", answer="pg")],
        invocations=[
            AgentInvocation(
                office_id="o", caller_agent_id=fe.id, target_agent_id=be.id, task="API\nmore"
            )
        ],
        results=[
            AgentResult(
                office_id="o",
                sender_agent_id=be.id,
                recipient_agent_id=fe.id,
                summary="cancelled",
                status="cancelled",
                cancel_reason="job failed",
            )
        ],
    )
    text = "\n".join(semo.console.job_text.timeline_lines(timeline, agents))
    assert "job job-0001  failed  FE  attempts 0" in text
    assert "  12:00:00  failed [FE]: x" in text
    assert "  FE asked: Which DB?\n    answer: pg" in text
    assert "  FE -> BE pending: API" in text
    assert "  BE -> FE cancelled (job failed): cancelled" in text
    # the reason is shown as typed; console/text.py makes its control characters visible
    assert "reason: cancelled: \x1b]52" in text
