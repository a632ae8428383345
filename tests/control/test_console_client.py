"""The console app on an `EngineClient` (pilot tests; a real engine with bash agents serves the
socket in the same process).

- The panes are the engine's sessions, drawn from the mirrored screens; a key typed in a pane
  reaches the agent through the socket.
- "Stop the office" asks first: No leaves the engine running, Yes stops it.
- ctrl+q detaches: the app exits and the engine and its agents keep running.
- The engine's connection dropping (as after a SIGKILL) is shown ("Engine gone"); a prompt then
  is refused with a message saying nothing was delivered.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from textual.geometry import Region

from semo.console.app import SemoApp
from semo.console.confirm import Confirm
from semo.console.widgets.session_list import SessionList
from semo.console.widgets.terminal_pane import TerminalPane
from semo.engine.control.client import EngineClient
from semo.engine.engine import Engine
from tests.control.office import engine_in_process
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Engine]:
    async with engine_in_process(tmp_path, monkeypatch) as engine:
        assert engine.control is not None
        # `stop` would SIGTERM this process (the test runner): stop the engine object instead
        engine.control._request_stop = lambda: asyncio.ensure_future(engine.stop("stopped"))
        yield engine


def notes(app: SemoApp) -> str:
    """The notifications on screen, as text."""
    return " | ".join(f"{n.title}: {n.message}" for n in app._notifications)


def app_on(engine: Engine) -> SemoApp:
    assert engine.control is not None
    return SemoApp(EngineClient(engine.control.paths))


async def test_panes_show_the_engines_sessions_and_keys_reach_them(engine: Engine) -> None:
    app = app_on(engine)
    async with app.run_test(size=(140, 40)) as pilot:
        await eventually(lambda: len(app.screen.query(TerminalPane)) == 2, 20)
        pane = app.screen.query(TerminalPane).first()
        await eventually(lambda: "$" in pane.terminal_screen.row_line(0).text, 20)
        pane.focus()
        await pilot.press(*"echo through-the-socket", "enter")
        session = next(s for s in engine.sessions() if s.session_id == pane.session_id)  # type: ignore[attr-defined]
        await eventually(
            lambda: "through-the-socket" in "\n".join(session.terminal.screen.text_rows()), 20
        )
        await eventually(
            lambda: "through-the-socket" in "\n".join(pane.terminal_screen.text_rows()), 20
        )


async def test_stop_the_office_asks_first(engine: Engine) -> None:
    app = app_on(engine)
    async with app.run_test(size=(140, 40)) as pilot:
        await eventually(lambda: len(app.screen.query(TerminalPane)) == 2, 20)
        app.action_stop_office()
        await pilot.pause()
        assert isinstance(app.screen, Confirm)
        await pilot.press("n")
        await pilot.pause(0.3)
        assert not isinstance(app.screen, Confirm)
        assert engine.manager is not None and not engine._stopped
        app.action_stop_office()
        await pilot.pause()
        await pilot.press("y")
        await eventually(lambda: engine._stopped, 20)
        await eventually(lambda: "Engine gone" in notes(app), 20)
        assert "stopped" in notes(app)


async def test_ctrl_q_detaches_and_the_agents_run_on(engine: Engine) -> None:
    app = app_on(engine)
    async with app.run_test(size=(140, 40)) as pilot:
        await eventually(lambda: len(app.screen.query(TerminalPane)) == 2, 20)
        await pilot.press("ctrl+q")
        await eventually(lambda: not app.is_running, 10)
    assert app.exit_reason == "detached"
    assert not engine._stopped
    assert all(not s.ended for s in engine.sessions())
    assert engine.control is not None
    await eventually(lambda: engine.control.consoles == 0, 10)  # type: ignore[union-attr]


async def test_the_engine_going_away_is_shown_and_prompts_are_refused(engine: Engine) -> None:
    app = app_on(engine)
    async with app.run_test(size=(140, 40)) as pilot:
        await eventually(lambda: len(app.screen.query(TerminalPane)) == 2, 20)
        control = engine.control
        assert control is not None and control._server is not None
        control._server.close()  # as a SIGKILL looks from the console: the connection drops
        for connection in list(control._connections):
            connection.writer.transport.abort()
        await eventually(lambda: "Engine gone" in notes(app), 20)
        main = app.screen
        session_list = main.query_one(SessionList)
        await eventually(
            lambda: [row.state for row in session_list.rows_shown] == ["lost", "lost"], 10
        )  # not the last states seen ("ready"), which would say the agents still run
        assert all("lost" in str(pane.border_title) for pane in main.panes.values())  # type: ignore[attr-defined]
        await pilot.press("f6")
        await pilot.press(*"hello", "enter")
        await eventually(lambda: "Prompt not sent" in notes(app), 10)
        assert "nothing was delivered" in notes(app)


async def test_a_second_console_leaves_the_sessions_it_hides_alone(engine: Engine) -> None:
    """With one large pane, a console alone gives the sessions it hides its pane's size; one
    that joins another console does not resize, under that console, every session it hides
    (the PTYs then flipped size at each attach, and each flip reflowed the agents' screens)."""
    assert engine.control is not None
    screen_b = next(s for s in engine.sessions() if s.role == "B").terminal.screen
    other = EngineClient(engine.control.paths)
    await other.start()
    terminal_b = next(s for s in other.sessions() if s.role == "B").terminal
    terminal_b.add_listener(lambda _chunk: None)
    terminal_b.resize(61, 13)
    await eventually(lambda: (screen_b.columns, screen_b.lines) == (61, 13), 10)

    app = app_on(engine)
    async with app.run_test(size=(140, 40)) as pilot:
        await eventually(lambda: len(app.screen.query(TerminalPane)) == 2, 20)
        main = app.screen
        pane_a = main.panes[main.selected]  # type: ignore[attr-defined]
        screen_a = next(s for s in engine.sessions() if s.role == "A").terminal.screen
        assert pane_a.display and screen_a is not screen_b
        await eventually(lambda: (screen_a.columns, screen_a.lines) == tuple(pane_a.size), 20)
        await pilot.pause(0.5)
        assert (screen_b.columns, screen_b.lines) == (61, 13)
    await other.close()

    alone = app_on(engine)
    async with alone.run_test(size=(140, 40)):
        await eventually(lambda: len(alone.screen.query(TerminalPane)) == 2, 20)
        pane = alone.screen.panes[alone.screen.selected]  # type: ignore[attr-defined]
        await eventually(lambda: (screen_b.columns, screen_b.lines) == tuple(pane.size), 20)


async def test_a_pane_taller_than_its_session_shows_no_rows_below_it(engine: Engine) -> None:
    """Another console made the session's PTY smaller than this console's pane: the pane shows
    the session's screen and blank rows below it, not the rows it drew at the larger size
    (an old "line-40" stayed there, and could have been an old question)."""
    assert engine.control is not None
    session = next(s for s in engine.sessions() if s.role == "A")
    app = app_on(engine)
    async with app.run_test(size=(140, 40)) as pilot:
        await eventually(lambda: len(app.screen.query(TerminalPane)) == 2, 20)
        pane = app.screen.panes[session.session_id]  # type: ignore[attr-defined]
        assert pane.display
        session.terminal.write("clear; for i in $(seq 1 60); do echo line-$i; done\r")

        def pane_rows() -> list[str]:  # as drawn: the lines Textual keeps for the pane
            strips = pane.render_lines(Region(0, 0, *pane.outer_size))
            return [strip.text.rstrip(" │") for strip in strips]

        await eventually(lambda: any("line-60" in row for row in pane_rows()), 20)
        other = EngineClient(engine.control.paths)
        await other.start()
        terminal = next(s for s in other.sessions() if s.role == "A").terminal
        terminal.add_listener(lambda _chunk: None)
        terminal.resize(40, 10)
        await eventually(lambda: pane.terminal_screen.lines == 10, 20)
        await pilot.pause(0.3)
        below = pane_rows()[12:-1]  # under the 10 rows (the border and title above them)
        assert below and not any("line-" in row for row in below), below
        await other.close()
