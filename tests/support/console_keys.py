"""A console over three scripted agents, started and ready, for the key tests."""

from __future__ import annotations

import asyncio
from pathlib import Path

from semo.console.app import SemoApp
from semo.console.screens.main import MainScreen
from semo.console.widgets.terminal_pane import TerminalPane
from semo.engine.in_process import InProcessEngine
from tests.console.console_snapshot_app import console_engine, office_scripts
from tests.support.console_app import waiter

TIMEOUT = 20.0
PREFIX = TerminalPane.PREFIX_KEY
wait_for = waiter(TIMEOUT)


def started_app(tmp_path: Path, runtime_dir: Path, *, max_sessions: int = 3) -> SemoApp:
    engine = console_engine(
        tmp_path, runtime_dir, scripts=office_scripts(3), max_sessions=max_sessions
    )
    return SemoApp(InProcessEngine(engine))


async def ready(app: SemoApp) -> MainScreen:
    await wait_for(lambda: getattr(app.screen, "started", False), "the engine")
    screen = app.screen
    assert isinstance(screen, MainScreen)
    await wait_for(lambda: len(screen.order) == 3, "three sessions")
    await wait_for(
        lambda: all(s.state.value == "ready" for s in app.engine.sessions()), "agents ready"
    )
    await asyncio.sleep(0.3)
    return screen
