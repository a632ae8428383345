"""A session's history over the control socket, asked for when it is shown (docs/CONSOLE.md,
`history`): a real engine (bash agents in PTYs) and real clients.

- A console that shows the live screen gets only the count of lines pushed, not the lines,
  however much the session prints; asked for the history it gets the last `lines` lines at
  once, then new lines with each frame until it says it is live again.
- A pane scrolled back over a remote session shows the engine's history (the pane asks for it);
  back to the live view, the lines stop coming.
- A bad request is refused with a reason.
"""

from __future__ import annotations

import asyncio

import pytest
from textual.app import App, ComposeResult

from semo.console.widgets.terminal_pane import TerminalPane
from semo.engine.engine import Engine
from tests.support.control_engine import client_of, engine_screen
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(120)


def texts(scrollback) -> list[str]:  # type: ignore[no-untyped-def]
    return [line.text for line in scrollback]


async def test_history_comes_only_when_asked_for(engine: Engine) -> None:
    client = client_of(engine)
    screen = engine_screen(engine, "A")
    try:
        await client.start()
        terminal = next(s for s in client.sessions() if s.role == "A").terminal
        terminal.want_history(0)  # as a pane showing the live screen does
        terminal.add_listener(lambda _chunk: None)
        await eventually(lambda: terminal.screen.complete, 10)
        await client.request({"op": "ping"})
        attached_with = len(screen.scrollback)

        terminal.write("seq 1 400; echo first-done\r")
        await eventually(lambda: "first-done" in "\n".join(screen.text_rows()), 20)
        await eventually(lambda: terminal.screen.text_rows() == screen.text_rows(), 10)
        await eventually(
            lambda: terminal.screen.scrollback.total_pushed == screen.scrollback.total_pushed, 10
        )
        assert len(terminal.screen.scrollback) <= attached_with  # no line came
        assert terminal.screen.scrollback.available >= 300

        terminal.want_history(100)
        await eventually(
            lambda: texts(terminal.screen.scrollback) == texts(screen.scrollback)[-100:], 10
        )
        terminal.write("seq 1000 1300; echo second-done\r")
        await eventually(lambda: "second-done" in "\n".join(screen.text_rows()), 20)
        await eventually(  # streamed while asked for: the copy grows with the engine's
            lambda: (
                texts(terminal.screen.scrollback)
                == texts(screen.scrollback)[-len(terminal.screen.scrollback) :]
                and len(terminal.screen.scrollback) > 300
            ),
            10,
        )

        terminal.want_history(0)
        await client.request({"op": "ping"})
        kept = len(terminal.screen.scrollback)
        terminal.write("seq 2000 2300; echo third-done\r")
        await eventually(lambda: "third-done" in "\n".join(terminal.screen.text_rows()), 20)
        assert len(terminal.screen.scrollback) == kept
    finally:
        await client.close()


async def test_bad_history_requests_are_refused(engine: Engine) -> None:
    client = client_of(engine)
    try:
        await client.start()
        session = next(s for s in client.sessions() if s.role == "A")
        with pytest.raises(RuntimeError, match="not attached"):
            await client.request({"op": "history", "session": session.session_id, "on": True})
        session.terminal.add_listener(lambda _chunk: None)
        await eventually(lambda: session.terminal.screen.complete, 10)
        with pytest.raises(RuntimeError, match="count of lines"):
            await client.request(
                {"op": "history", "session": session.session_id, "on": True, "lines": "all"}
            )
    finally:
        await client.close()


class _PaneApp(App[None]):
    def __init__(self, source: object) -> None:
        super().__init__()
        self.source = source

    def compose(self) -> ComposeResult:
        yield TerminalPane(self.source)  # type: ignore[arg-type]


def _rendered(pane: TerminalPane) -> list[str]:
    return [pane.render_line(y).text.rstrip() for y in range(pane.size.height)]


async def test_a_pane_scrolled_back_over_a_remote_session_shows_its_history(
    engine: Engine,
) -> None:
    client = client_of(engine)
    screen = engine_screen(engine, "B")
    try:
        await client.start()
        terminal = next(s for s in client.sessions() if s.role == "B").terminal
        app = _PaneApp(terminal)
        async with app.run_test(size=(80, 24)) as pilot:
            pane = app.query_one(TerminalPane)
            await eventually(lambda: terminal.screen.complete, 10)
            assert terminal.history is False  # the live view: no lines asked for
            # the output's marker is not the typed command's text (its echo shows at once)
            terminal.write("seq 1 3000; echo flood-$((1+1))-done\r")
            await eventually(lambda: "flood-2-done" in "\n".join(screen.text_rows()), 30)
            await eventually(lambda: any("flood-2-done" in row for row in _rendered(pane)), 10)
            assert len(terminal.screen.scrollback) < 100  # the flood's lines did not come

            pane.scroll_mode()
            await eventually(lambda: terminal.history, 5)
            height = pane.size.height
            # one page back: the engine's lines just above its screen, once they arrive
            expected = texts(screen.scrollback)[-(height - 1) :][:height]
            await eventually(lambda: _rendered(pane)[: len(expected)] == expected, 10)
            for _ in range(3):
                await pilot.press("home")
            await pilot.pause()
            assert pane.view_offset > 2000  # further than the first answer: more was asked for
            await eventually(lambda: len(terminal.screen.scrollback) >= pane.view_offset, 10)

            await pilot.press("q")
            await pilot.pause()
            assert pane.view_offset == 0 and terminal.history is False
            await asyncio.sleep(0)
    finally:
        await client.close()
