"""A console over six scripted agents of which some ask questions, for the inbox tests."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from semo.console.app import SemoApp
from semo.console.widgets.questions_panel import QuestionsPanel
from semo.engine.in_process import InProcessEngine
from tests.console.console_snapshot_app import FOUR, LONG, ROLES, console_engine
from tests.support.console_app import waiter

TIMEOUT = 30.0
wait_for = waiter(TIMEOUT)


def ask(question: dict[str, object]) -> list[dict[str, str]]:
    return [{"match": "go", "text": f"[ASK_USER]\n{json.dumps(question)}\n[/ASK_USER]"}]


def inbox_scripts(sessions: int, asking: int) -> dict[str, object]:
    """`sessions` agents; the first `asking` ask when told "go": FE the long question, the
    others FOUR (81 characters, 4 options); the rest say one line."""
    scripts: dict[str, object] = {}
    for index, role in enumerate(ROLES[:sessions]):
        if index == 0:
            scripts[role] = ask(LONG) if asking else []
        elif index < asking:
            scripts[role] = ask(FOUR)
        else:
            scripts[role] = [{"match": "go", "text": f"{role.lower()}: done"}]
    return scripts


def inbox_app(folder: Path, runtime_dir: Path, asking: int) -> SemoApp:
    """The console over six sessions (inbox_scripts), the first `asking` of them asking."""
    return SemoApp(
        InProcessEngine(
            console_engine(folder, runtime_dir, scripts=inbox_scripts(6, asking), max_sessions=6)
        )
    )


async def asked(app: SemoApp, count: int) -> QuestionsPanel:
    """Every agent told "go"; `count` questions in the inbox, the inbox focused (F4)."""
    await wait_for(lambda: getattr(app.screen, "started", False), "the engine")
    engine = app.engine
    await wait_for(lambda: len(engine.sessions()) == 6, "six sessions")
    await wait_for(
        lambda: all(s.terminal.screen.columns != 60 for s in engine.sessions()), "pane sizes"
    )
    await asyncio.sleep(1.0)  # no resize while the agents print (semo reads the screen)
    for session in engine.sessions():
        engine.send_prompt(session.session_id, "go")
    panel = app.screen.query_one(QuestionsPanel)
    await wait_for(lambda: len(panel.questions) == count, f"{count} questions")
    await asyncio.sleep(0.3)
    return panel
