"""The commands panel: what the office was told to do, newest first.

How it works: docs/CONSOLE.md, "The commands panel".
"""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.widgets import DataTable

from semo.console.panel_text import CommandRow, command_parts
from semo.console.widgets.cells import set_cell


def _cells(row: CommandRow, width: int) -> Text:
    return Text.assemble(
        *command_parts(row, width, CommandsPanel.TIME_FORMAT), end="", no_wrap=True
    )


class CommandsPanel(DataTable[Text]):
    BORDER_TITLE = "Commands"
    TIME_FORMAT = "%H:%M:%S"  # local time (snapshot tests set a fixed text)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", cell_padding=0, show_header=False)
        self.rows_shown: list[CommandRow] = []
        self._width = 0

    def on_resize(self, event: events.Resize) -> None:
        width = max(self.scrollable_content_region.width, 1)
        if width != self._width:
            self._width = width
            self._rebuild(self.rows_shown)

    def show(self, rows: list[CommandRow]) -> None:
        if rows == self.rows_shown:
            return  # nothing changed: no rebuild, no repaint
        same_keys = [r.key for r in rows] == [r.key for r in self.rows_shown]
        if not same_keys or not self._width or not self.row_count:
            self._rebuild(rows)
            return
        for old, new in zip(self.rows_shown, rows, strict=True):
            if old != new:  # a status or a result changed: that row, repainted alone
                set_cell(self, new.key, "row", _cells(new, self._width))
        self.rows_shown = rows

    def _rebuild(self, rows: list[CommandRow]) -> None:
        shown = self.rows_shown
        self.rows_shown = rows
        if not self._width:
            return
        # on the newest row, not scrolled away: the newest it stays on
        following = not self.row_count or (self.cursor_row == 0 and self.scroll_y == 0)
        keep = shown[self.cursor_row].key if self.row_count and self.cursor_row < len(shown) else ""
        self.clear(columns=True)
        self.add_column("", width=self._width, key="row")
        for row in rows:
            self.add_row(_cells(row, self._width), key=row.key)
        keys = [row.key for row in rows]
        if rows and not following and keep in keys:  # the operator's command, wherever it went
            self.move_cursor(row=keys.index(keep), animate=False)
        elif rows:
            self.move_cursor(row=0, animate=False)
            self.scroll_home(animate=False, immediate=True)
