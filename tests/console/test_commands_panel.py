"""The commands panel keeps the operator's cursor on its command while newer ones come in
above it, and a changed status repaints that row only (no rebuild)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from textual.app import App, ComposeResult

from semo.console.widgets.commands_panel import CommandRow, CommandsPanel

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def row(key: str, minutes: int, status: str = "pending") -> CommandRow:
    return CommandRow(key, T0 + timedelta(minutes=minutes), "send_prompt", status)


class PanelApp(App[None]):
    def compose(self) -> ComposeResult:
        yield CommandsPanel(id="commands")


async def test_cursor_stays_on_its_command_and_status_changes_repaint_one_row() -> None:
    app = PanelApp()
    async with app.run_test(size=(60, 12)) as pilot:
        panel = app.query_one(CommandsPanel)
        panel.show([row("b", 2), row("a", 1)])
        await pilot.pause()
        panel.move_cursor(row=1)  # on "a"
        await pilot.pause()
        panel.show([row("c", 3), row("b", 2), row("a", 1)])  # a newer command on top
        await pilot.pause()
        assert (
            panel.cursor_row == 2
            and panel.coordinate_to_cell_key(panel.cursor_coordinate).row_key.value == "a"
        )

        repaints: list[object] = []
        original = panel.refresh

        def counted(*regions: object, **kwargs: object) -> object:
            repaints.append(regions)
            return original(*regions, **kwargs)  # type: ignore[arg-type]

        panel.refresh = counted  # type: ignore[method-assign]
        panel.show([row("c", 3), row("b", 2, "completed"), row("a", 1)])
        await pilot.pause()
        assert "completed" in str(panel.get_row("b")[0])
        assert repaints and all(regions for regions in repaints)  # regions: no whole repaint
        assert panel.cursor_row == 2
