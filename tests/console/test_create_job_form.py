"""The create-job form at the keyboard: labelled fields, the role first (typed in any case,
completed from the office's roles), refused with the roles listed when no agent has it."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Input, Label

from semo.console.app import SemoApp
from semo.console.screens.jobs import CreateJob, JobsScreen
from semo.engine.in_process import InProcessEngine
from tests.console.console_snapshot_app import console_engine
from tests.support.console_app import runtime_dir_fixture, waiter

SCRIPTS = {
    "FE": [{"match": "login page", "text": "built it\n[SEMO:DONE] the login page works"}],
    "BE": [],
}
runtime_dir = runtime_dir_fixture("semo-form-")
wait_for = waiter(20.0)


def toasts(app: SemoApp) -> list[str]:
    return [n.message for n in app._notifications]


async def test_the_role_comes_first_and_is_checked(tmp_path: Path, runtime_dir: Path) -> None:
    engine = console_engine(tmp_path, runtime_dir, scripts=SCRIPTS)
    app = SemoApp(InProcessEngine(engine))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(lambda: getattr(app.screen, "started", False), "the engine")
        await pilot.press("f5")
        await wait_for(lambda: isinstance(app.screen, JobsScreen), "the jobs view")
        await pilot.press("c")
        await wait_for(lambda: isinstance(app.screen, CreateJob), "the job form")
        form = app.screen
        labels = [str(label.render()) for label in form.query(Label)]
        assert labels == ["Role", "Task (Enter creates the job)"]
        role, task = form.query_one("#job-role", Input), form.query_one("#job-task", Input)
        assert role.has_focus and role.value == ""  # nothing pre-filled, typing lands here

        await pilot.press("enter")  # no role yet
        await wait_for(lambda: any("a job needs a role" in t for t in toasts(app)), "why")
        assert role.has_focus and app.screen is form
        await pilot.press(*"zz", "enter")
        await wait_for(lambda: any("no agent has the role 'zz'" in t for t in toasts(app)), "zz")
        assert any("(roles: BE, FE)" in t for t in toasts(app)) and role.has_focus

        role.value = ""
        await pilot.press("f")  # completed from the roles, in any case
        await wait_for(lambda: role._suggestion.casefold() == "fe", "the suggestion")
        await pilot.press("right", "enter")
        assert role.value.casefold() == "fe" and task.has_focus
        await pilot.press("enter")  # no task yet: the form stays
        await wait_for(lambda: any("a job needs a task" in t for t in toasts(app)), "no task")
        assert app.screen is form
        await pilot.press(*"build the login page", "enter")
        await wait_for(lambda: isinstance(app.screen, JobsScreen), "back in the view")
        jobs = await engine.list_jobs()
        assert [(job.role, job.task) for job in jobs] == [("FE", "build the login page")]

        await pilot.press("c")  # typed in another case, not completed: the configured role
        await wait_for(lambda: isinstance(app.screen, CreateJob), "the form again")
        await pilot.press("b", "e", "enter", *"wait", "enter")
        await wait_for(lambda: isinstance(app.screen, JobsScreen), "back again")
        jobs = await engine.list_jobs()
        assert sorted((job.role, job.task) for job in jobs) == [
            ("BE", "wait"),
            ("FE", "build the login page"),
        ]
