"""Regenerate the console screenshots in screenshots/ (SVG), shown in the README.

    .venv/bin/python scripts/screenshots.py

Views: the demo office with FE's question pending (160x48 and 80x24), an office of six scripted
agents with a 4-option question pending (120x40), twenty of them in the 4-pane grid (160x48),
the jobs view with a finished job's timeline (120x40), and a zoomed pane of the real Claude Code CLI
answering a prompt (offline, against the tests' scripted Messages API; skipped with a message
when `claude` is not installed). Everything runs in temporary folders: the user's
store and state are not touched.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from semo.console.app import SemoApp  # noqa: E402
from semo.console.widgets.questions_panel import QuestionsPanel  # noqa: E402
from semo.engine.config import AgentConfig, OfficeConfig, PoolConfig, SemoConfig  # noqa: E402
from semo.engine.engine import Engine  # noqa: E402
from semo.engine.in_process import InProcessEngine  # noqa: E402
from tests.support.temp_dirs import short_temp_dir  # noqa: E402
from tests.support.waiting import eventually  # noqa: E402

OUT = REPO / "screenshots"


async def save_screenshot(app: SemoApp, name: str, settle: float) -> None:
    """`settle` seconds for the screen to draw, then the notifications cleared and the screen
    saved as OUT/name."""
    await asyncio.sleep(settle)
    app.clear_notifications()
    await asyncio.sleep(0.3)
    app.save_screenshot(name, str(OUT))


async def demo_view(size: tuple[int, int], name: str) -> None:
    from semo.engine.demo.office import demo_config, prepare_demo_repository

    prepare_demo_repository()
    app = SemoApp(InProcessEngine(Engine(demo_config())), demo_task=True)
    async with app.run_test(size=size):
        await eventually(lambda: getattr(app.screen, "started", False), 30)
        panel = app.screen.query_one(QuestionsPanel)
        await eventually(lambda: bool(panel.questions), 60)
        await save_screenshot(app, name, 1.5)
    print(f"wrote {OUT / name}")


async def office_view(
    size: tuple[int, int], name: str, folder: Path, sessions: int = 6, layout_presses: int = 0
) -> None:
    from tests.console.console_snapshot_app import console_engine, office_scripts, settle_office

    office = folder / f"office-{sessions}-{layout_presses}"
    office.mkdir()
    with short_temp_dir("semo-shot-") as runtime:
        engine = console_engine(
            office, runtime, scripts=office_scripts(sessions), max_sessions=sessions
        )
        app = SemoApp(InProcessEngine(engine))
        async with app.run_test(size=size) as pilot:
            await settle_office(app, sessions)
            for _ in range(layout_presses):  # F2: 1 -> 2 -> 4 -> 6 panes
                await pilot.press("f2")
            await save_screenshot(app, name, 1.0 if layout_presses else 0)
    print(f"wrote {OUT / name}")


async def jobs_view(size: tuple[int, int], name: str, folder: Path) -> None:
    """The jobs view (F5): FE's finished job and its timeline, BE's job still running."""
    from semo.console.screens.jobs import JobsScreen
    from tests.console.console_snapshot_app import console_engine

    scripts = {
        "FE": [{"match": "login page", "text": "built it\n[SEMO:DONE] the login page works"}],
        "BE": [],
    }
    office = folder / "jobs"
    office.mkdir()
    with short_temp_dir("semo-shot-") as runtime:
        engine = console_engine(office, runtime, scripts=scripts)
        app = SemoApp(InProcessEngine(engine))
        async with app.run_test(size=size) as pilot:
            await eventually(lambda: getattr(app.screen, "started", False), 30)
            await engine.create_job("BE", "Add a GET /health endpoint")
            done = await engine.create_job("FE", "Build the login page\nwith a form")
            await pilot.press("f5")
            await eventually(lambda: isinstance(app.screen, JobsScreen), 30)
            jobs = app.screen
            await eventually(lambda: jobs.selected == done.id, 30)  # type: ignore[attr-defined]
            await eventually(lambda: "  done" in jobs.timeline_text, 60)  # type: ignore[attr-defined]
            await save_screenshot(app, name, 0.5)
    print(f"wrote {OUT / name}")


async def claude_view(size: tuple[int, int], name: str, folder: Path) -> None:
    if shutil.which("claude") is None:
        print("skipped the Claude Code view: `claude` is not installed (scripts/test installs it)")
        return
    from tests.support.claude_home import claude_env
    from tests.support.scripted_api import ScriptedMessagesAPI

    reply = (
        "I added the endpoint.\n\n- `GET /health` returns `200 OK`\n- a test covers it\n\n"
        "[STEP_COMPLETE] /health endpoint added"
    )
    with ScriptedMessagesAPI(replies=[reply]) as api, short_temp_dir("semo-shot-") as runtime:
        work = folder / "work"
        work.mkdir()
        config = SemoConfig(
            office=OfficeConfig(name="screenshots", workspace_root=folder / "ws"),
            store={"backend": "sqlite", "sqlite_path": folder / "semo.db"},
            pool=PoolConfig(max_sessions=2, warm_roles=["BE"]),
            agents=[AgentConfig(role="BE", prompt="You build the HTTP API.")],
        )
        engine = Engine(
            config,
            agent_env=claude_env(folder / "elsewhere", folder / "home", api),
            runtime_dir=runtime,
            folder_for=lambda _agent, _task: work,
        )
        app = SemoApp(InProcessEngine(engine))
        async with app.run_test(size=size) as pilot:
            await eventually(lambda: getattr(app.screen, "started", False), 60)
            (session,) = engine.sessions()
            await session.execute("Add a GET /health endpoint", timeout=60)
            await pilot.press("f3")
            await save_screenshot(app, name, 1.0)
    print(f"wrote {OUT / name}")


async def main() -> None:
    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="semo-screens-") as tmp:
        folder = Path(tmp)
        os.environ["XDG_STATE_HOME"] = str(folder / "state")
        os.environ["SEMO_SQLITE_PATH"] = str(folder / "demo.db")
        os.environ.pop("SEMO_STORE", None)
        await demo_view((160, 48), "demo-160x48.svg")
        await demo_view((80, 24), "demo-80x24.svg")
        await office_view((120, 40), "office-120x40.svg", folder)
        await office_view((160, 48), "office-grid-160x48.svg", folder, 20, layout_presses=2)
        await jobs_view((120, 40), "jobs-120x40.svg", folder)
        await claude_view((120, 36), "claude-zoomed.svg", folder)


if __name__ == "__main__":
    asyncio.run(main())
