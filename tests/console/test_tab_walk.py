"""Tab and shift+Tab on the main screen walk the sidebar's widgets and never into an agent's
pane (Enter opens the selected session's pane, as before); on both engine interfaces."""

from __future__ import annotations

from pathlib import Path

from semo.console.screens.main import MainScreen
from semo.console.widgets.session_list import SessionList
from semo.console.widgets.terminal_pane import TerminalPane
from tests.console.console_snapshot_app import console_engine
from tests.support.console_app import runtime_dir_fixture, waiter
from tests.support.console_engines import console_on, engine_kind_fixture

runtime_dir = runtime_dir_fixture("semo-tab-")
engine_kind = engine_kind_fixture()
wait_for = waiter(20.0)


async def test_tab_walks_the_sidebar_never_into_a_pane(
    tmp_path: Path, runtime_dir: Path, engine_kind: str
) -> None:
    engine = console_engine(
        tmp_path, runtime_dir, scripts={"FE": [], "BE": []}, control=engine_kind == "client"
    )
    async with console_on(engine_kind, engine) as app, app.run_test(size=(120, 40)) as pilot:
        await wait_for(lambda: getattr(app.screen, "started", False), "the engine")
        main = app.screen
        assert isinstance(main, MainScreen)
        await wait_for(lambda: len(main.panes) == 2, "the panes")
        await pilot.press("f4")  # a layout of two panes shows both: still none is walked into
        await pilot.press("escape", "f2")
        await wait_for(lambda: isinstance(main.focused, SessionList), "the list focused")
        for key in ("tab", "shift+tab"):
            seen = []
            for _ in range(6):
                await pilot.press(key)
                await pilot.pause()
                assert not isinstance(main.focused, TerminalPane), key
                seen.append(main.focused)
            assert len({id(w) for w in seen}) >= 2, f"{key} moves the focus"
            assert any(isinstance(w, SessionList) for w in seen), f"{key} comes back round"
        main.query_one(SessionList).focus()
        await wait_for(lambda: isinstance(main.focused, SessionList), "back on the list")
        await pilot.press("enter")
        await wait_for(lambda: isinstance(main.focused, TerminalPane), "Enter opens the pane")
