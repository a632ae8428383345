"""The footer (console/widgets/key_bar.py) says what the keys do where the focus is, detach
included, whatever the width: at 80x24 the most important keys stay and no word is cut; at 200
columns every key of the focus is there. A focused pane's border says keys go to the agent.
Real engine, scripted agents, Textual's Pilot."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from semo.console.app import SemoApp
from semo.console.screens.jobs import JobsScreen
from semo.console.widgets.key_bar import KeyBar, fit
from semo.console.widgets.session_list import SessionList
from semo.console.widgets.terminal_pane import TerminalPane
from tests.support.console_keys import PREFIX, ready, started_app, wait_for
from tests.support.temp_dirs import short_temp_dir


@pytest.fixture
def runtime_dir() -> Iterator[Path]:
    with short_temp_dir("semo-bar-") as path:  # short: Unix socket paths
        yield path


def bar(app: SemoApp) -> str:
    return app.screen.query_one(KeyBar).text.plain


async def shows(app: SemoApp, *words: str) -> str:
    await wait_for(lambda: all(w in bar(app) for w in words), f"the footer showing {words}")
    return bar(app)


async def test_the_footer_follows_the_focus_at_80x24(tmp_path: Path, runtime_dir: Path) -> None:
    app = started_app(tmp_path, runtime_dir)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await ready(app)
        width = screen.query_one(KeyBar).size.width
        seen = []

        seen.append(await shows(app, "^q Detach", "F1 Keys", "Enter type in pane", "^p Palette"))
        await pilot.press(PREFIX)  # outside a pane: the footer says what the next key does
        seen.append(await shows(app, "next key: d detach ? keys Esc nothing z zoom"))
        await pilot.press("escape")
        await wait_for(lambda: isinstance(app.focused, SessionList), "back on the list")
        await pilot.press("f4")
        await wait_for(lambda: app.focused is not None and app.focused.id == "question-list", "")
        await pilot.pause()
        seen.append(await shows(app, "^q Detach"))
        assert "answer" not in bar(app)  # no question: no keys to answer one
        fe = next(s for s in app.engine.sessions() if s.role == "FE")
        app.engine.send_prompt(fe.session_id, "go")  # FE asks its 4-option question
        seen.append(await shows(app, "^q Detach", "1-4 answer"))
        await pilot.press("f6")
        seen.append(await shows(app, "Enter send", "Esc close"))
        await pilot.press("escape", "enter")  # into the selected session's pane
        assert isinstance(app.focused, TerminalPane)
        text = await shows(app, "ctrl+] then d detach", "? keys", "z zoom")
        assert "F2" not in text and "^q" not in text  # those keys are the agent's here
        assert app.focused.border_subtitle == "keys go to the agent; ctrl+] ? keys"
        seen.append(text)
        await pilot.press(PREFIX)
        seen.append(await shows(app, "next key: d detach"))
        await pilot.press("left_square_bracket")
        seen.append(await shows(app, "scrollback:", "q live view"))
        await pilot.press("q", PREFIX, "o", "f5")
        await wait_for(lambda: isinstance(app.screen, JobsScreen), "the jobs view")
        seen.append(await shows(app, "^q Detach", "esc Back", "c Create job"))
        for text in seen:
            assert len(text) <= width, text


async def test_a_wide_footer_shows_every_key(tmp_path: Path, runtime_dir: Path) -> None:
    app = started_app(tmp_path, runtime_dir)
    async with app.run_test(size=(200, 50)) as pilot:
        await ready(app)
        keys = ("F1 Keys", "F2 Layout", "F3 Zoom", "F4 Questions", "F5 Jobs", "F6 Prompt")
        await shows(app, *keys, "F8 Cancel", "^q Detach", "^p Palette")
        await pilot.press("enter")
        await shows(app, "n/p next/prev", "q questions", ": palette", "[ scroll", "o out", "j jobs")
        await asyncio.sleep(0.6)  # nothing changes: the bar is not rewritten
        before = app.screen.query_one(KeyBar).text
        await asyncio.sleep(0.6)
        assert app.screen.query_one(KeyBar).text is before


def test_fit_keeps_the_important_keys_in_their_order() -> None:
    from semo.console.widgets.key_bar import Hint

    hints = [Hint("F1", "Keys", 1), Hint("F3", "Zoom", 8), Hint("^q", "Detach", 0)]
    assert fit(hints, 80).plain == "F1 Keys F3 Zoom ^q Detach"
    assert fit(hints, 17).plain == "F1 Keys ^q Detach"  # zoom left out, not cut
    assert fit(hints, 12).plain == "^q Detach"


async def test_the_prefix_and_its_key_typed_together_outside_a_pane(
    tmp_path: Path, runtime_dir: Path
) -> None:
    """Typed fast (one read: SSH, tmux send-keys), the key after the prefix is its command: the
    prefix moves the focus at once (a priority binding), not after the keys already queued."""
    from textual import events

    app = started_app(tmp_path, runtime_dir)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await ready(app)
        await pilot.press("f4")
        app.post_message(events.Key(PREFIX, None))
        app.post_message(events.Key("z", "z"))
        await wait_for(lambda: screen.maximized is not None, "zoomed by the prefix then z")
        await pilot.press(PREFIX, "z", PREFIX, "o")
        assert screen.maximized is None and isinstance(app.focused, SessionList)
        app.post_message(events.Key(PREFIX, None))
        app.post_message(events.Key(PREFIX, None))
        await wait_for(lambda: isinstance(app.focused, TerminalPane), "the prefix twice: the pane")
