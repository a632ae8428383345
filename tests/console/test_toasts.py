"""Toasts on small terminals (issue 25, 5): one at a time (the newest), and never over the
pane that has the focus: over the panes while the focus is in the sidebar, over the sidebar's
bottom while a pane has it. A real engine with scripted agents in PTYs, at 80x24, 120x40 and
200x60."""

from __future__ import annotations

from pathlib import Path

from textual.widgets._toast import Toast

from semo.console.app import SemoApp
from semo.console.widgets.questions_panel import QuestionsPanel
from semo.console.widgets.session_list import SessionList
from semo.engine.in_process import InProcessEngine
from tests.console.console_snapshot_app import console_engine
from tests.support.console_app import at_three_sizes, runtime_dir_fixture, waiter

runtime_dir = runtime_dir_fixture("semo-toast-")
wait_for = waiter(20.0)


@at_three_sizes
async def test_one_toast_and_never_over_the_focused_pane(
    tmp_path: Path, runtime_dir: Path, size: tuple[int, int]
) -> None:
    app = SemoApp(
        InProcessEngine(console_engine(tmp_path, runtime_dir, scripts={"FE": [], "BE": []}))
    )
    async with app.run_test(size=size, notifications=True) as pilot:
        await wait_for(lambda: getattr(app.screen, "started", False), "the engine")
        main = app.screen
        app.clear_notifications()
        main.query_one(SessionList).focus()
        for number in range(3):
            main.tell(f"message {number}", timeout=30)
        await wait_for(lambda: main.query(Toast), "a toast")
        await pilot.pause()
        toasts = list(main.query(Toast))
        assert len(toasts) == 1 and "message 2" in str(toasts[0].render())
        inbox = main.query_one(QuestionsPanel).region
        assert not toasts[0].region.overlaps(inbox)  # focus on the left: toasts on the right

        pane = main.panes[main.selected]  # type: ignore[index]
        pane.focus()
        await pilot.pause()
        main.tell("message 3", timeout=30)
        await wait_for(
            lambda: any("message 3" in str(t.render()) for t in main.query(Toast)), "the new one"
        )
        await pilot.pause()
        toasts = list(main.query(Toast))
        assert len(toasts) == 1
        assert not toasts[0].region.overlaps(pane.region), (toasts[0].region, pane.region)
