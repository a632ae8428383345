"""Every key of the console's key model and every palette action, at the keyboard (Textual's
Pilot) over a real engine: scripted agents in real PTYs, the sqlite store.

Outside a pane: n/p and up/down pick a session, Enter opens its pane, F1 and ? the keys help
(Escape closes it; the panes keep their size), F2 layouts 1/2/4/6, F3 zoom (the whole
terminal), F4 the inbox, F6 the prompt line (Escape closes it; Enter sends to the selected
session), F8 cancel (says so), ctrl+p the palette, ctrl+q detach.
In a pane: ctrl+p, ctrl+q and F-keys go to the agent; the prefix then z, n, p, q, :, [, o, ?,
an unknown key (a warning) and d.
The palette: every semo action by its name, destructive ones after a confirmation.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from unittest.mock import patch

import pytest
from textual import events
from textual.command import CommandList, CommandPalette, SearchIcon
from textual.widgets import Input

from semo.console.app import SemoApp
from semo.console.confirm import Confirm
from semo.console.keys_help import KeysHelp
from semo.console.screens.main import MainScreen
from semo.console.widgets.key_bar import KeyBar
from semo.console.widgets.session_list import SessionList
from semo.console.widgets.terminal_pane import TerminalPane
from semo.engine.in_process import InProcessEngine
from semo.engine.interface import SessionHandle
from tests.console.console_snapshot_app import console_engine, office_scripts
from tests.support.console_app import runtime_dir_fixture, waiter
from tests.support.console_keys import ready, started_app
from tests.support.script_agent import logged_prompts

TIMEOUT = 20.0
PREFIX = TerminalPane.PREFIX_KEY


runtime_dir = runtime_dir_fixture("semo-keys-")


wait_for = waiter(TIMEOUT)


def prompts(folder: Path, role: str) -> list[str]:
    return logged_prompts(folder / f"{role}.log")


def session(screen: MainScreen, session_id: str | None) -> SessionHandle:
    """A live session of the screen's engine."""
    found = screen.engine.session(session_id or "")
    assert found is not None, session_id
    return found


def toasts(app: SemoApp) -> list[str]:
    return [n.message for n in app._notifications]


def bar(app: SemoApp) -> str:
    """The key bar of the screen in front (a dialog has its own over the main screen's)."""
    return app.screen.query_one(KeyBar).text.plain


def shown(screen: MainScreen) -> list[str]:
    return [sid for sid, pane in screen.panes.items() if pane.display]


async def test_keys_outside_a_pane(tmp_path: Path, runtime_dir: Path) -> None:
    app = started_app(tmp_path, runtime_dir)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await ready(app)
        order = screen.order
        assert isinstance(app.focused, SessionList) and screen.selected == order[0]
        assert shown(screen) == [order[0]]  # one large pane: the selected session's

        await pilot.press("n")
        assert screen.selected == order[1] and shown(screen) == [order[1]]
        await pilot.press("p")
        assert screen.selected == order[0]
        with patch.object(screen, "select", wraps=screen.select) as select:
            for key in "np":  # typed faster than the console takes them
                app._driver.send_message(events.Key(key, key))  # type: ignore[union-attr]
            await wait_for(lambda: select.call_count >= 2, "n and p")
            await asyncio.sleep(0.3)
            # the list's echo of the first move is not taken for a pick (it was, and the
            # selection bounced between the two sessions hundreds of times a second for ever)
            assert select.call_count == 2 and screen.selected == order[0]
        await pilot.press("down")
        await wait_for(lambda: screen.selected == order[1], "down to pick the next session")
        session_list = screen.query_one(SessionList)
        rebuilds = session_list.rebuilds
        await asyncio.sleep(1.6)  # three panel refreshes: the cursor stays, nothing is rebuilt
        assert session_list.cursor_row == 1 and session_list.rebuilds == rebuilds
        await pilot.press("up")
        await wait_for(lambda: screen.selected == order[0], "up")

        sizes = {sid: pane.size for sid, pane in screen.panes.items() if pane.display}
        for key in ("f1", "question_mark"):
            await pilot.press(key)
            assert isinstance(app.screen, KeysHelp) and not app.screen.in_pane
            assert "Close" in bar(app) and "Layout" not in bar(app)  # the dialog's keys
            await pilot.press("escape")
            assert app.screen is screen
        assert {s: p.size for s, p in screen.panes.items() if p.display} == sizes

        for size in (2, 4, 6, 1):
            await pilot.press("f2")
            assert screen.layout_size == size
            assert len(shown(screen)) == min(size, 3)
            assert f"{size} pane{'s' if size > 1 else ''} " in f"{screen.sub_title} "

        await pilot.press("f3")
        pane = screen.panes[order[0]]
        assert screen.maximized is pane and pane.has_focus
        await pilot.press(PREFIX, "z")  # in the pane, F3 is the agent's: the prefix unzooms
        assert screen.maximized is None

        await pilot.press(PREFIX, "o", "f4")
        assert app.focused is not None and app.focused.id == "question-list"

        await pilot.press("f6")
        field = screen.query_one("#prompt-input", Input)
        assert field.display and field.has_focus
        await pilot.press(*"draft", "escape")
        assert not field.display and field.value == ""
        await pilot.press("n", "f6", *"hello", "enter")  # to the session selected: order[1]
        role = session(screen, order[1]).role
        await wait_for(lambda: "hello" in prompts(tmp_path, role), f"{role} getting the prompt")
        assert not field.display

        await wait_for(lambda: session(screen, order[1]).state.value == "ready", "idle")
        await pilot.press("f8")  # no turn running, no job: no dialog about a turn, it says so
        assert app.screen is screen and not any("cancelled" in t for t in toasts(app))
        await wait_for(lambda: any("no turn to cancel" in t for t in toasts(app)), "the reason")

        await pilot.press("enter")  # opens the selected session's pane
        assert app.focused is screen.panes[order[1]]
        await pilot.press(PREFIX, "o")
        assert isinstance(app.focused, SessionList)

        await pilot.press("ctrl+p")
        assert isinstance(app.screen, CommandPalette)
        assert "Enter run" in bar(app) and "Esc close" in bar(app)
        assert str(app.screen.query_one(SearchIcon).render()) == ">"  # not a 2-cell emoji
        await pilot.press("escape")
        await wait_for(lambda: app.screen is screen, "the palette closing")

        # the prefix works outside a pane too: then z zooms, the prefix twice enters the pane
        await pilot.press(PREFIX, "z")
        assert screen.maximized is not None
        await pilot.press(PREFIX, "z", PREFIX, "o", PREFIX, PREFIX)
        assert screen.maximized is None and isinstance(app.focused, TerminalPane)
        await pilot.press(PREFIX, "o")

        await pilot.press("f8", "y")  # still no turn running: nothing is cancelled
        assert app.screen is screen and not any("cancelled" in t for t in toasts(app))

        await pilot.press("ctrl+q")
        await wait_for(lambda: not app.is_running, "detaching")
    assert app.exit_reason == "detached"


async def test_keys_in_a_pane(tmp_path: Path, runtime_dir: Path) -> None:
    app = started_app(tmp_path, runtime_dir)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await ready(app)
        order = screen.order
        pane = screen.panes[order[0]]
        role = session(screen, order[0]).role
        pane.focus()
        await pilot.pause()

        # ctrl+p, ctrl+q and F-keys are the agent's: no palette, no detach, no layout change
        await pilot.press("ctrl+p", "ctrl+q", "f2", "f3", *"typed", "enter")
        await wait_for(lambda: any("typed" in p for p in prompts(tmp_path, role)), "the line")
        line = next(p for p in prompts(tmp_path, role) if "typed" in p)
        assert "\x10" in line  # ctrl+p reached the agent
        assert app.is_running and app.screen is screen and pane.has_focus
        assert screen.layout_size == 1 and screen.maximized is None

        await pilot.press(PREFIX, "z")
        assert screen.maximized is pane
        await pilot.press(PREFIX, "z")
        assert screen.maximized is None and pane.has_focus

        await pilot.press(PREFIX, "n")
        assert screen.selected == order[1] and app.focused is screen.panes[order[1]]
        await pilot.press(PREFIX, "p")
        assert screen.selected == order[0] and app.focused is pane

        await pilot.press(PREFIX, "left_square_bracket")
        assert pane.scrolling
        await pilot.press("q")
        assert not pane.scrolling

        await pilot.press(PREFIX, "question_mark")
        assert isinstance(app.screen, KeysHelp) and app.screen.in_pane
        await pilot.press("escape")
        assert app.screen is screen and pane.has_focus

        await pilot.press(PREFIX, "colon")
        assert isinstance(app.screen, CommandPalette)
        await pilot.press("escape")
        await wait_for(lambda: app.screen is screen, "the palette closing")

        pane.focus()
        await pilot.press(PREFIX, "q")
        assert app.focused is not None and app.focused.id == "question-list"

        pane.focus()
        await pilot.press(PREFIX, "x")
        assert any("not a console key" in t for t in toasts(app))

        await pilot.press(PREFIX, "d")
        await wait_for(lambda: not app.is_running, "detaching")
    assert app.exit_reason == "detached"


async def run_palette(pilot: object, app: SemoApp, name: str) -> None:
    """Open the palette, search `name`, check it is the first hit and run it."""
    await pilot.press("ctrl+p", *name)  # type: ignore[attr-defined]
    palette = app.screen
    assert isinstance(palette, CommandPalette)
    hits = palette.query_one(CommandList)

    def first() -> str:
        return str(hits.get_option_at_index(0).prompt) if hits.option_count else ""

    await wait_for(lambda: first().startswith(name), f"the palette finding {name!r}")
    await pilot.press("enter")  # type: ignore[attr-defined]
    await wait_for(lambda: not isinstance(app.screen, CommandPalette), "the palette closing")


async def test_every_palette_action(tmp_path: Path, runtime_dir: Path) -> None:
    app = started_app(tmp_path, runtime_dir, max_sessions=4)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await ready(app)
        order = list(screen.order)
        engine = screen.engine

        await run_palette(pilot, app, "New session for QA")  # the pool's idle QA session
        await wait_for(lambda: any("QA session" in t for t in toasts(app)), "the QA session")
        assert session(screen, screen.selected).role == "QA"

        await run_palette(pilot, app, "Send a prompt to the selected session")
        assert screen.query_one("#prompt-input", Input).has_focus
        await pilot.press("escape")

        await run_palette(pilot, app, "Cancel the selected session's turn")
        # QA is idle: no dialog about a turn that is not running (test_cancel_job_agent.py)
        await wait_for(lambda: any("no turn to cancel" in t for t in toasts(app)), "the reason")
        assert app.screen is screen

        before = screen.selected
        index = screen.order.index(before)
        await run_palette(pilot, app, "Next session")
        assert screen.selected == screen.order[(index + 1) % len(screen.order)]
        await run_palette(pilot, app, "Previous session")
        assert screen.selected == before

        await run_palette(pilot, app, "Cycle the pane layout")
        assert screen.layout_size == 2
        await run_palette(pilot, app, "Zoom the selected pane")
        assert screen.maximized is not None
        await pilot.press(PREFIX, "z", PREFIX, "o")  # unzoomed, then out of the pane

        await run_palette(pilot, app, "Start recording the selected session")
        await wait_for(lambda: any(t.startswith("recording ") for t in toasts(app)), "recording")
        await run_palette(pilot, app, "Stop recording the selected session")
        await wait_for(lambda: any("recording of" in t for t in toasts(app)), "stopped")
        await run_palette(pilot, app, "Stop recording the selected session")  # nothing is
        await wait_for(lambda: any("is not being recorded" in t for t in toasts(app)), "none")

        await run_palette(pilot, app, "Keys")
        assert isinstance(app.screen, KeysHelp)
        await pilot.press("escape")

        engine.send_prompt(
            screen.order[
                screen.order.index(
                    next(sid for sid in screen.order if session(screen, sid).role == "FE")
                )
            ],
            "go",
        )
        await wait_for(lambda: screen.query_one("QuestionsPanel").questions, "FE's question")
        await run_palette(pilot, app, "Answer the oldest question")
        assert app.focused is not None and app.focused.id == "question-list"
        await pilot.press("4")
        await wait_for(
            lambda: any("none: keep them in memory" in p for p in prompts(tmp_path, "FE")),
            "FE's answer",
        )

        victim = screen.selected
        await run_palette(pilot, app, "Terminate the selected session")
        assert isinstance(app.screen, Confirm)
        await pilot.press("n")  # not confirmed: nothing ends
        assert victim in screen.order
        await run_palette(pilot, app, "Terminate the selected session")
        await pilot.press("y")
        await wait_for(lambda: victim not in screen.order, "the session terminated")

        await run_palette(pilot, app, "Stop the office")
        assert isinstance(app.screen, Confirm)
        await pilot.press("n")
        assert app.is_running and all(
            not s.ended for s in engine.sessions() if s.session_id in order[1:]
        )

        await run_palette(pilot, app, "Detach")
        await wait_for(lambda: not app.is_running, "detaching")
    assert app.exit_reason == "detached"


def test_the_prefix_is_configured_in_semo_toml(tmp_path: Path) -> None:
    from semo.console.keys import prefix_key
    from semo.engine.config import ConfigError, load_config

    base = '[office]\nname = "keys"\n'
    path = tmp_path / "semo.toml"
    path.write_text(base)
    assert load_config(path).console.prefix == "ctrl+]"  # the default
    path.write_text(base + '[console]\nprefix = "ctrl+b"\n')
    assert prefix_key(load_config(path).console.prefix) == "ctrl+b"
    assert prefix_key("ctrl+]") == TerminalPane.PREFIX_KEY
    for bad in ("b", "ctrl+shift+b", "alt+b", "ctrl+F1"):
        path.write_text(base + f'[console]\nprefix = "{bad}"\n')
        with pytest.raises(ConfigError, match="prefix"):
            load_config(path)


async def test_a_configured_prefix_drives_the_console(tmp_path: Path, runtime_dir: Path) -> None:
    engine = console_engine(tmp_path, runtime_dir, scripts=office_scripts(3), max_sessions=3)
    app = SemoApp(InProcessEngine(engine), prefix="ctrl+b")
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(app)
        pane = screen.panes[screen.selected]  # type: ignore[index]
        pane.focus()
        await pilot.press(PREFIX, "z")  # ctrl+] is now the agent's: nothing happens
        assert screen.maximized is None
        await pilot.press("ctrl+b", "z")
        assert screen.maximized is pane
