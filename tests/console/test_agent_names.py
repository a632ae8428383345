"""The console names sessions as semo.toml does, and an asking row says what it asks, on
either implementation of the engine interface (real engine, scripted agents, Pilot)."""

from __future__ import annotations

import json
from pathlib import Path

from semo.console.panel_text import asked_line, with_agent_name
from semo.console.screens.main import MainScreen
from semo.console.widgets.session_list import SessionList
from tests.console.console_snapshot_app import FOUR, console_engine
from tests.support.console_app import runtime_dir_fixture, waiter
from tests.support.console_engines import console_on, engine_kind_fixture

runtime_dir = runtime_dir_fixture("semo-names-")
engine_kind = engine_kind_fixture()
wait_for = waiter(30.0)

SCRIPTS = {
    "FE": [{"match": "go", "text": f"[ASK_USER]\n{json.dumps(FOUR)}\n[/ASK_USER]"}],
    "BE": [{"match": "go", "text": "done"}],
}


def last_lines(main: MainScreen) -> dict[str, str]:
    return {row.role: row.last_line for row in main.query_one(SessionList).rows_shown}


async def test_agent_names_and_what_an_asking_session_asks(
    tmp_path: Path, runtime_dir: Path, engine_kind: str
) -> None:
    engine = console_engine(tmp_path, runtime_dir, scripts=SCRIPTS, control=engine_kind == "client")
    named = [
        a.model_copy(update={"name": "Ada"}) if a.role == "FE" else a for a in engine.config.agents
    ]
    engine.config = engine.config.model_copy(update={"agents": named})
    async with console_on(engine_kind, engine) as app, app.run_test(size=(160, 40)):
        await wait_for(lambda: getattr(app.screen, "started", False), "the engine")
        main = app.screen
        assert isinstance(main, MainScreen)
        await wait_for(lambda: len(main.panes) == 2, "two sessions")
        fe = next(s for s in engine.sessions() if s.role == "FE")
        be = next(s for s in engine.sessions() if s.role == "BE")
        await wait_for(lambda: main.panes[fe.session_id].border_title is not None, "titles")
        await wait_for(lambda: "FE #1 Ada · " in str(main.panes[fe.session_id].border_title), "")
        assert str(main.panes[be.session_id].border_title).startswith("BE #1 · ")  # no name
        assert main._who(fe.session_id) == "FE #1 Ada"

        engine.send_prompt(fe.session_id, "go")
        await wait_for(
            lambda: last_lines(main).get("FE", "").startswith("asks: Which database"),
            "FE's row saying its question",
        )
        assert "{" not in last_lines(main)["FE"]  # not a fragment of the JSON block


def test_an_agents_question_and_a_configured_name_arrive_inert_on_one_line() -> None:
    hostile = "Drop [bold red]it[/]?\x1b]0;pwned\x07\x1b[2J\nsecond line\r\n\u202eevil"
    line = asked_line(hostile)
    assert line.startswith("asks: Drop [bold red]it[/]?")  # markup stays text (Rich Text)
    assert "\x1b" not in line and "\x07" not in line and "\n" not in line and "\r" not in line
    assert "\u202e" not in line  # no bidi override reaches the terminal
    assert "second line" in line
    named = with_agent_name("#1", "FE", "Ada\x1b[31m\nBob")
    assert named == "#1 Ada\\x1b[31m\\nBob"  # escapes made visible, one line
    assert with_agent_name("#2", "FE", "FE") == "#2"  # a name that is the role adds nothing
    assert with_agent_name("#1", "FE", "") == "#1"
