"""A job's work in the console's jobs view, over a real engine whose agents work in worktrees of
a real repository (scripted agents in real PTYs): FE's job changes two files, one of them
hostile (escape sequences, markup, wide characters);

- the job's panel shows its branch, base, commits and diffstat;
- `d` opens the diff view on the job's files (n pages), nothing unsafe reaches the terminal,
  Escape comes back;
- Enter on the job goes to its agent's pane, focused;
- the palette's "Job diff" opens the newest job's diff.
"""

from __future__ import annotations

from pathlib import Path

from semo.console.app import SemoApp
from semo.console.screens.job_diff import JobDiffScreen
from semo.console.screens.jobs import JobsScreen
from semo.console.screens.main import MainScreen
from semo.console.widgets.terminal_pane import TerminalPane
from semo.engine.in_process import InProcessEngine
from tests.console.console_snapshot_app import console_engine
from tests.support.console_app import runtime_dir_fixture, waiter
from tests.support.console_jobs import create, job_in, run_palette
from tests.support.git_repo import make_repo
from tests.support.hostile_display import UNSAFE_OUTPUT, terminal_output

HOSTILE = "x = '\x1b]52;c;aGFja2Vk\x07 [bold red]loud[/] 名前\u202eab'\n"
FILES = {"web/login.html": "<form>\n  <input name=user>\n</form>\n", "web/evil.py": HOSTILE}
SCRIPTS = {
    "FE": [{"match": "login page", "files": FILES, "text": "[SEMO:DONE] the login page works"}],
    "BE": [],
}

runtime_dir = runtime_dir_fixture("semo-jobwork-")
wait_for = waiter(30.0)


async def test_a_jobs_branch_diff_and_pane_from_the_jobs_view(
    tmp_path: Path, runtime_dir: Path
) -> None:
    repo = make_repo(tmp_path / "repo", {"README": "shop\n"})
    engine = console_engine(tmp_path, runtime_dir, scripts=SCRIPTS, repository=repo)
    app = SemoApp(InProcessEngine(engine))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(lambda: getattr(app.screen, "started", False), "the engine")
        await pilot.press("f5")
        await wait_for(lambda: isinstance(app.screen, JobsScreen), "the jobs view")
        jobs = app.screen
        assert isinstance(jobs, JobsScreen)
        await pilot.press("c")
        await create(app, pilot, "FE", "Build the login page")
        done = await job_in(engine, "done")
        await wait_for(lambda: "files: 2 file(s)" in jobs.timeline_text, "the job's work")
        text = jobs.timeline_text
        assert f"branch: semo/job/{done.id}" in text and "base: main at " in text
        assert "commits (1):" in text and "web/login.html  +3 -0" in text
        assert "web/evil.py  +1 -0" in text

        await pilot.press("d")
        await wait_for(lambda: isinstance(app.screen, JobDiffScreen), "the diff view")
        diff = app.screen
        assert isinstance(diff, JobDiffScreen)
        assert diff.heading_text == "1/2  A web/evil.py  +1 -0"
        output = terminal_output(app)
        assert UNSAFE_OUTPUT.search(output) is None
        assert "\\x1b]52;c;aGFja2Vk\\x07 [bold red]loud[/] 名前\\u202eab" in output
        await pilot.press("n")
        assert diff.heading_text == "2/2  A web/login.html  +3 -0"
        await pilot.press("escape")
        await wait_for(lambda: app.screen is jobs, "back in the jobs view")

        await pilot.press("enter")  # the job's agent's pane
        await wait_for(lambda: isinstance(app.screen, MainScreen), "the sessions")
        main = app.screen
        assert isinstance(main, MainScreen)
        await wait_for(lambda: main.selected == done.session_id, "the job's session selected")
        await wait_for(lambda: isinstance(main.focused, TerminalPane), "its pane focused")

        main.query_one("#sessions").focus()
        await run_palette(app, pilot, "Job diff")
        await wait_for(lambda: isinstance(app.screen, JobDiffScreen), "the palette's diff")
