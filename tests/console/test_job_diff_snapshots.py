"""Snapshots of a job's work at 80x24 and 120x40: the jobs view with FE's finished job selected
(its branch, base, commit and diffstat under the task) and the diff view (`d`) of its first
file. The agents work in worktrees of a real repository; the job's id, commit hashes, times
and ages are fixed for the picture. Regenerate with `--snapshot-update` after a deliberate
change and look at the SVGs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable

import semo.console.job_text
import semo.console.screens.jobs
from semo.console.app import SemoApp
from semo.console.job_text import timeline_lines
from semo.console.job_work_text import review_lines
from semo.console.screens.job_diff import JobDiffScreen
from semo.console.screens.jobs import JobsScreen
from semo.engine.in_process import InProcessEngine
from semo.engine.protocol.state import AgentState
from tests.console.console_snapshot_app import console_engine
from tests.support.console_app import runtime_dir_fixture
from tests.support.console_jobs import create, job_in
from tests.support.git_repo import make_repo
from tests.support.waiting import eventually

FILES = {
    "web/login.html": '<form action="/login">\n  <input name="user">\n  <button>Log in</button>\n'
    "</form>\n",
    "api/login.py": "def login(user: str) -> bool:\n\treturn bool(user)  # 名前 \x1b[2J\n",
}
SCRIPTS = {
    "FE": [{"match": "login page", "files": FILES, "text": "[SEMO:DONE] the login page works"}],
    "BE": [],
}
WORKTREE = re.compile(r"/tmp/t/ws/agent/(\w+)/\S+")
HEX = re.compile(r"\b[0-9a-f]{7,40}\b")

runtime_dir = runtime_dir_fixture("semo-jdsnap-")


@pytest.fixture(autouse=True)
def fixed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(semo.console.job_text, "clock", lambda _at: "12:00:00")
    monkeypatch.setattr(semo.console.job_text, "age", lambda _since, _now=None: "3s")
    monkeypatch.setattr(semo.console.job_text, "job_label", lambda _id: "job-0001")
    monkeypatch.setattr(semo.console.screens.jobs, "job_label", lambda _id: "job-0001")

    def fixed_review(review: Any) -> list[str]:
        return mask(review_lines(review), review.job.id, tmp_path)

    def fixed_timeline(timeline: Any, agents: Any) -> list[str]:
        return mask(timeline_lines(timeline, agents), timeline.job.id, tmp_path)

    monkeypatch.setattr(semo.console.screens.jobs, "review_lines", fixed_review)
    monkeypatch.setattr(semo.console.screens.jobs, "timeline_lines", fixed_timeline)


def mask(lines: list[str], job_id: str, folder: Path) -> list[str]:
    """The job's id, the test's folder and commit hashes (they change from run to run) made
    fixed."""
    lines = [
        line.replace(str(folder.resolve()), "/tmp/t").replace(str(folder), "/tmp/t")
        for line in lines
    ]
    lines = [line.replace(job_id, "0001").replace(job_id[:8], "0001") for line in lines]
    # the warm worktree, or a new one when the warm session was not ready yet
    lines = [WORKTREE.sub(r"/tmp/t/ws/agent/\1/wt", line) for line in lines]
    return [HEX.sub("1a2b3c4", line) for line in lines]


def settled_job(app: SemoApp, diff: bool) -> Any:
    async def settle(pilot: Any) -> None:
        await eventually(lambda: getattr(app.screen, "started", False), 20)
        # FE's warm session at its prompt: the job runs there, as an operator's would
        await eventually(
            lambda: any(
                s.role == "FE" and s.state == AgentState.READY
                for s in app.engine.sessions()  # type: ignore[union-attr]
            ),
            20,
        )
        await pilot.press("f5")
        await eventually(lambda: isinstance(app.screen, JobsScreen), 20)
        jobs = app.screen
        await pilot.press("c")
        await create(app, pilot, "FE", "Build the login page")
        await job_in(app.engine, "done")  # type: ignore[arg-type]
        text = lambda: jobs.timeline_text  # type: ignore[attr-defined]  # noqa: E731
        await eventually(lambda: "files: 2 file(s)" in text(), 20)
        # the job's status is written before its last timeline rows: wait for its done step
        await eventually(lambda: "  done [FE]" in text().split("steps:")[1], 20)
        rows = lambda: list(jobs._rows.values())  # type: ignore[attr-defined]  # noqa: E731
        await eventually(lambda: [row[0] for row in rows()] == ["done"], 20)
        # a DataTable measures new rows' columns when its message queue is idle (Textual's
        # _on_idle), which a loaded machine can put off past the picture: wait for it
        table = jobs.query_one("#job-list", DataTable)  # type: ignore[attr-defined]
        await eventually(lambda: not table._require_update_dimensions, 20)
        if diff:
            await pilot.press("d")
            await eventually(lambda: isinstance(app.screen, JobDiffScreen), 20)
        app.clear_notifications()
        await pilot.pause()

    return settle


@pytest.mark.parametrize("view", ["jobs", "diff"])
@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_a_jobs_work(
    snap_compare: Any, tmp_path: Path, runtime_dir: Path, size: tuple[int, int], view: str
) -> None:
    repo = make_repo(tmp_path / "repo", {"README": "shop\n"})
    engine = console_engine(tmp_path, runtime_dir, scripts=SCRIPTS, repository=repo)
    app = SemoApp(InProcessEngine(engine))
    assert snap_compare(app, terminal_size=size, run_before=settled_job(app, view == "diff"))
