"""The operator console: one Textual app around an in-process Engine.

The app starts the engine when it mounts (panes show a loading indicator meanwhile), listens
to the engine's event bus, and stops the engine when it exits. Everything it shows or does goes
through the Engine facade (engine/engine.py).
"""

from __future__ import annotations

from textual.app import App

from console.commands import SemoCommands
from console.screens.main import MainScreen
from engine.engine import Engine
from engine.heap import thaw_heap


class SemoApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "semo"
    COMMANDS = App.COMMANDS | {SemoCommands}

    def __init__(self, engine: Engine, *, demo_task: bool = False, start_engine: bool = True):
        super().__init__()
        self.engine = engine
        self.demo_task = demo_task
        self.start_engine = start_engine

    def on_mount(self) -> None:
        self.push_screen(MainScreen(self.engine, demo_task=self.demo_task))

    async def on_unmount(self) -> None:
        if self.start_engine:
            await self.engine.stop("console closed")
        thaw_heap()
