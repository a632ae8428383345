"""The console on 16 colours (the ANSI theme: red only for errors) and the selected pane's own
border in a grid, at the keyboard over a real engine (scripted agents in real PTYs)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.color import Color

from semo.console.app import SemoApp
from semo.console.colours import ANSI_THEME, theme_for
from semo.console.panel_text import KEY_STYLE, KEY_STYLE_16
from semo.console.screens.main import MainScreen
from semo.console.widgets.key_bar import KeyBar
from semo.console.widgets.session_list import SessionList
from semo.engine.in_process import InProcessEngine
from tests.console.console_snapshot_app import console_engine, office_scripts, settle_office
from tests.support.console_app import (
    fixed_times,  # noqa: F401 (autouse: the same picture every run)
    runtime_dir_fixture,
    waiter,
)

runtime_dir = runtime_dir_fixture("semo-colours-")
wait_for = waiter(20.0)


@pytest.mark.parametrize(
    ("colours", "detected", "theme"),
    [
        ("auto", "standard", ANSI_THEME),  # TERM=screen, xterm, linux
        ("auto", "windows", ANSI_THEME),
        ("auto", "256", None),
        ("auto", "truecolor", None),
        ("auto", None, None),  # not a terminal (tests, pipes): Textual's own
        ("16", "truecolor", ANSI_THEME),
        ("full", "standard", None),
    ],
)
def test_the_theme_follows_the_terminals_colours(
    colours: str, detected: str | None, theme: str | None
) -> None:
    assert theme_for(colours, detected) == theme  # type: ignore[arg-type]


def key_styles(app: SemoApp) -> set[str]:
    return {str(span.style) for span in app.screen.query_one(KeyBar).text.spans}


async def test_on_16_colours_keys_are_yellow_and_red_is_for_errors(
    tmp_path: Path, runtime_dir: Path
) -> None:
    engine = console_engine(tmp_path, runtime_dir, scripts=office_scripts(3), max_sessions=3)
    app = SemoApp(InProcessEngine(engine), colours="16")
    async with app.run_test(size=(80, 24)):
        await settle_office(app, 3)
        assert app.theme == ANSI_THEME and app.current_theme.ansi
        assert app.current_theme.error == "ansi_red"
        assert app.current_theme.accent != "ansi_red"  # focus borders are not error-red
        await wait_for(lambda: KEY_STYLE_16 in key_styles(app), "the key bar in 16 colours")
        assert KEY_STYLE not in key_styles(app)  # #ffa62b would come out bright red


async def test_full_colours_keep_the_default_theme(tmp_path: Path, runtime_dir: Path) -> None:
    engine = console_engine(tmp_path, runtime_dir, scripts=office_scripts(3), max_sessions=3)
    app = SemoApp(InProcessEngine(engine))
    async with app.run_test(size=(80, 24)):
        await settle_office(app, 3)
        assert app.theme != ANSI_THEME
        await wait_for(lambda: KEY_STYLE in key_styles(app), "the key bar")


def border(pane: object) -> tuple[str, Color]:
    top = pane.styles.border_top  # type: ignore[attr-defined]
    return top[0], top[1]


async def test_the_selected_pane_of_a_grid_has_a_border_of_its_own(
    tmp_path: Path, runtime_dir: Path
) -> None:
    engine = console_engine(tmp_path, runtime_dir, scripts=office_scripts(3), max_sessions=3)
    app = SemoApp(InProcessEngine(engine))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle_office(app, 3)
        screen = app.screen
        assert isinstance(screen, MainScreen)
        alone = screen.panes[screen.selected]
        assert border(alone)[0] == "round"  # one pane: nothing to tell apart
        await pilot.press("f2", "f2")  # four panes: the three sessions side by side
        await wait_for(lambda: sum(p.display for p in screen.panes.values()) == 3, "a grid")
        await wait_for(lambda: heavy(screen) == [screen.selected], "the selected pane's border")
        selected = screen.panes[screen.selected]
        others = [p for sid, p in screen.panes.items() if p.display and sid != screen.selected]
        assert all(border(p)[0] == "round" for p in others)
        assert all(border(p)[1] != border(selected)[1] for p in others)
        screen.query_one(SessionList).focus()
        await pilot.press("down")  # the selection moves: so does the border
        await wait_for(lambda: screen.panes[screen.selected] is not selected, "the next one")
        await wait_for(lambda: heavy(screen) == [screen.selected], "the border moving with it")
        assert border(selected)[0] == "round"


def heavy(screen: MainScreen) -> list[str]:
    """The displayed panes with a heavy border (the selected one in a grid)."""
    return [sid for sid, p in screen.panes.items() if p.display and border(p)[0] == "heavy"]


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_sixteen_colour_snapshot(
    snap_compare, tmp_path: Path, runtime_dir: Path, size: tuple[int, int]
) -> None:
    engine = console_engine(tmp_path, runtime_dir, scripts=office_scripts(3), max_sessions=3)
    app = SemoApp(InProcessEngine(engine), colours="16")

    async def settle(_pilot: object) -> None:
        await settle_office(app, 3)

    assert snap_compare(app, terminal_size=size, run_before=settle)


def test_grid_selection_snapshot(snap_compare, tmp_path: Path, runtime_dir: Path) -> None:
    engine = console_engine(tmp_path, runtime_dir, scripts=office_scripts(6), max_sessions=6)
    app = SemoApp(InProcessEngine(engine))

    async def settle(pilot: object) -> None:
        await settle_office(app, 6)
        app.screen.query_one(SessionList).focus()
        await pilot.press("f2", "f2", "down")  # type: ignore[attr-defined]
        await pilot.pause()  # type: ignore[attr-defined]

    assert snap_compare(app, terminal_size=(120, 40), run_before=settle)
