"""The session list: every live session of the office, one row each.

The selected one is shown large beside it.

A row is role, name (#1, #2... among the sessions of the role), state in words, age, current
job and the last line on the session's screen; the columns that do not fit the panel's width
are left out (last line first, then job, then name), so nothing is clipped and there is no
horizontal scrollbar. Rows are updated in place when they change (the cursor stays where the
operator put it); the table is rebuilt only when sessions come or go, keeping the cursor on its
session.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import events
from textual.widgets import DataTable

from semo.console.panel_text import SessionRow, session_columns, session_header, session_parts
from semo.console.widgets.cells import set_cell


def _cells(row: SessionRow, columns: tuple[str, ...], width: int) -> Text:
    return Text.assemble(
        *session_parts(row, columns, width), end="", no_wrap=True, overflow="ellipsis"
    )


class SessionList(DataTable[Text]):
    BORDER_TITLE = "Sessions"
    KEY_HINTS: ClassVar[list[tuple[str, str, float]]] = [("Enter", "type in pane", 2.5)]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", cell_padding=0, zebra_stripes=False)
        self.rows_shown: list[SessionRow] = []
        self._cells: dict[str, Text] = {}  # what each row shows now
        self._columns: tuple[str, ...] = ()
        self._subtitle = ""
        self._width = 0
        self._built = False
        self.rebuilds = 0
        """How often the table was built from scratch (sessions came or went, or a resize)."""

    @property
    def selected_session(self) -> str | None:
        if not self.rows_shown or self.cursor_row >= len(self.rows_shown):
            return None
        return self.rows_shown[self.cursor_row].session_id

    def select(self, session_id: str) -> None:
        for index, row in enumerate(self.rows_shown):
            if row.session_id == session_id:
                if self.cursor_row != index:
                    self.move_cursor(row=index)
                return

    def on_resize(self, event: events.Resize) -> None:
        width = max(self.scrollable_content_region.width, 1)
        if width != self._width:
            self._width = width
            self._rebuild(self.rows_shown)

    def show(self, rows: list[SessionRow], subtitle: str = "") -> None:
        if subtitle != self._subtitle:  # setting a border title repaints the whole widget
            self._subtitle = subtitle
            self.border_subtitle = subtitle
        ids = [r.session_id for r in rows]
        if not self._built or ids != [r.session_id for r in self.rows_shown]:
            self._rebuild(rows)
            return
        self.rows_shown = rows
        for row in rows:
            cells = _cells(row, self._columns, self._width)
            if cells != self._cells.get(row.session_id):
                self._cells[row.session_id] = cells
                set_cell(self, row.session_id, "row", cells)  # that row repainted, no other

    def _rebuild(self, rows: list[SessionRow]) -> None:
        if not self._width:
            self.rows_shown = rows
            return
        keep = self.selected_session if self._built else None
        self._built = True
        self.rebuilds += 1
        self.clear(columns=True)
        self._columns = session_columns(self._width)
        self.add_column(session_header(self._columns, self._width), width=self._width, key="row")
        self._cells = {row.session_id: _cells(row, self._columns, self._width) for row in rows}
        for row in rows:
            self.add_row(self._cells[row.session_id], key=row.session_id)
        self.rows_shown = rows
        ids = [r.session_id for r in rows]
        if keep in ids:
            self.move_cursor(row=ids.index(keep), animate=False)
