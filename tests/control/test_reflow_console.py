"""Reflow seen from a console: a real engine (bash agents in PTYs) and real clients over the
control socket. After a resize the console's pane shows the reflowed screen; a console that
attaches later gets the reflowed history too."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from semo.engine.control.client import RemoteTerminal
from semo.engine.control.mirror import MirrorScreen
from semo.engine.engine import Engine
from semo.engine.terminal.screen import TerminalScreen
from tests.support.control_engine import attached, client_of, engine_screen
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(120)

#: the engine's screen of a session, or a console's mirror of it
Screen = TerminalScreen | MirrorScreen
LONG_LINES = "for i in $(seq 10 39); do printf 'line%s-%090d\\n' $i 0; done\r"


def rows_of(screen: Screen) -> list[str]:
    return [screen.row_line(y).text.rstrip(" ") for y in range(screen.lines)]


def history_of(screen: Screen) -> list[str]:
    return [line.text.rstrip(" ") for line in screen.scrollback]


async def resize(pane: RemoteTerminal, screen: Screen, cols: int, rows: int) -> None:
    """Resize the console's pane and wait until the engine's screen has that size."""
    pane.resize(cols, rows)
    await eventually(lambda: (screen.columns, screen.lines) == (cols, rows), 10)


@asynccontextmanager
async def long_lines_in(
    engine: Engine, role: str, cols: int, rows: int
) -> AsyncIterator[tuple[RemoteTerminal, Screen]]:
    """A console attached to `role`'s session, its pane resized to `cols` x `rows` and
    LONG_LINES typed in it, once the engine's screen shows the last one: the pane and the
    engine's screen. The console is closed after."""
    client = client_of(engine)
    screen = engine_screen(engine, role)
    try:
        pane = await attached(client, role)
        await resize(pane, screen, cols, rows)
        pane.write(LONG_LINES)
        await eventually(lambda: any(r.startswith("line39-") for r in rows_of(screen)), 10)
        yield pane, screen
    finally:
        await client.close()


async def test_an_attached_console_shows_the_reflowed_screen(engine: Engine) -> None:
    async with long_lines_in(engine, "A", 60, 20) as (pane, screen):
        wrapped = rows_of(screen)
        assert "line39-" + "0" * 53 in wrapped  # 96 characters: two rows at 60 columns

        await resize(pane, screen, 120, 20)
        await eventually(lambda: rows_of(pane.screen) == rows_of(screen), 10)
        assert "line39-" + "0" * 90 in rows_of(pane.screen)  # one row again
        assert [pane.screen.row_line(y) for y in range(screen.lines)] == [
            screen.row_line(y) for y in range(screen.lines)
        ]
        assert (pane.screen.cursor.x, pane.screen.cursor.y) == (screen.cursor.x, screen.cursor.y)


async def test_a_console_attaching_after_a_resize_gets_the_reflowed_history(
    engine: Engine,
) -> None:
    two = client_of(engine)
    try:
        async with long_lines_in(engine, "B", 50, 12) as (first, screen):
            await resize(first, screen, 110, 12)
            history = history_of(screen)
            assert "line20-" + "0" * 90 in history  # rejoined in the history, not only on screen

        # the first console closed, the second alone: its size (the default) must not win
        late = await attached(two, "B")
        late.resize(110, 12)
        await eventually(lambda: history_of(late.screen)[-len(history) :] == history, 10)
        assert rows_of(late.screen) == rows_of(screen)
    finally:
        await two.close()


async def test_an_attached_console_gets_the_reflowed_history(engine: Engine) -> None:
    async with long_lines_in(engine, "A", 50, 12) as (pane, screen):
        await eventually(lambda: len(pane.screen.scrollback) == len(screen.scrollback), 10)
        await resize(pane, screen, 110, 12)
        history = history_of(screen)
        await eventually(lambda: history_of(pane.screen)[-len(history) :] == history, 5)
