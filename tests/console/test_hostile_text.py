"""Agent text in the console's own widgets stays plain text: a hostile agent (a real PTY,
tests/support/hostile_agent.py) prints a last line full of markup, bidi controls and escape
sequences; the session list's last-line column shows it literally (controls made visible), the
toast of its question too, and the terminal output the console writes holds none of it raw.
(tests/hostile/test_display.py covers the inbox, the commands panel and the palette.)"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from semo.console.app import SemoApp
from semo.console.widgets.session_list import SessionList
from semo.engine.in_process import InProcessEngine
from tests.console.console_snapshot_app import console_engine
from tests.support.hostile_display import CSI, UNSAFE_OUTPUT, terminal_output
from tests.support.waiting import eventually

MARKUP = "[/x] [@click=app.quit]click[/]"
RLO = "\u202e"
SHORT = "[/x][b]"  # the list's last-line column is ~36 cells wide at 200 columns
LINE = f"ok {SHORT}\x1b]52;c;aGFja2Vk\x07{RLO}ab"


@pytest.fixture
def runtime_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="semo-hostile-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def row_text(session_list: SessionList, session_id: str) -> str:
    return str(session_list.get_row(session_id)[0])


async def test_a_hostile_last_line_and_question_show_literally(
    tmp_path: Path, runtime_dir: Path
) -> None:
    scripts = {
        "FE": [{"match": "go", "raw": LINE + "\r\n", "prompt": False}],
        "BE": [{"match": "go", "text": f"[ASK_USER] {MARKUP}{RLO}?"}],
    }
    engine = console_engine(
        tmp_path, runtime_dir, scripts=scripts, agent="tests.support.hostile_agent"
    )
    app = SemoApp(InProcessEngine(engine))
    async with app.run_test(size=(200, 40), notifications=True):
        await eventually(lambda: getattr(app.screen, "started", False), 20)
        await eventually(
            lambda: all(s.terminal.screen.columns != 60 for s in engine.sessions()), 20
        )
        for session in engine.sessions():
            engine.send_prompt(session.session_id, "go")
        session_list = app.screen.query_one(SessionList)
        fe = next(s.session_id for s in engine.sessions() if s.role == "FE")
        await eventually(lambda: "ok " in row_text(session_list, fe), 20)
        shown = row_text(session_list, fe)
        assert SHORT in shown  # markup shown as typed, never interpreted
        assert "\\u202e" in shown and RLO not in shown  # the bidi control made visible
        await eventually(lambda: any("asks" in n.message for n in app._notifications), 20)
        toast = next(n for n in app._notifications if "asks" in n.message)
        assert toast.markup is False and MARKUP in toast.message and RLO not in toast.message
        await asyncio.sleep(0.6)
        screen = terminal_output(app)
        assert UNSAFE_OUTPUT.findall(screen) == []
        assert SHORT in CSI.sub("", screen) and MARKUP in CSI.sub("", screen)
