"""The pool view (F9): the pool's sessions, roles without one, breakers, requests waiting.

How it works: docs/CONSOLE.md, "The pool view"."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Header, Static

from semo.console.attention import Attention, header_title
from semo.console.pool_text import (
    POOL_COLUMNS,
    ROLE_ROW,
    PoolRow,
    pool_notes,
    pool_rows,
    pool_summary,
)
from semo.console.widgets.cells import set_cell
from semo.console.widgets.key_bar import KeyBar
from semo.engine.plain_text import plain

if TYPE_CHECKING:
    from semo.engine.interface import EngineInterface

REFRESH_SECONDS = 1.0


class PoolScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
        Binding("s", "start", "Start session"),
        Binding("r", "reload", "Reload", show=False),
    ]
    DEFAULT_CSS = """
    PoolScreen #pool-summary { height: 1; padding: 0 1; }
    PoolScreen #pool-list { height: 1fr; overflow-x: hidden; }
    PoolScreen #pool-notes { height: auto; max-height: 8; padding: 0 1;
        border-top: solid $accent; }
    """
    base_title = "semo · pool"

    def __init__(
        self, engine: EngineInterface, names: Callable[[], Mapping[str, str]] | None = None
    ) -> None:
        """`names`: the session names the main screen shows (#1, #2 Ada), by session id."""
        super().__init__()
        self.engine = engine
        self.names = names or dict
        self.rows: list[PoolRow] = []
        self.notes_text = ""

    def compose(self) -> ComposeResult:
        yield Header(icon="*")
        yield Static(id="pool-summary", markup=False)
        yield DataTable(id="pool-list", cursor_type="row", zebra_stripes=True)
        yield Static(id="pool-notes", markup=False)
        yield KeyBar()

    def on_mount(self) -> None:
        self.title = header_title(self.base_title, getattr(self.app, "attention", Attention()))
        table = self.query_one("#pool-list", DataTable)
        for column in POOL_COLUMNS:
            table.add_column(column, key=column)
        self.reload()
        self.set_interval(REFRESH_SECONDS, self.reload)
        table.focus()

    def reload(self) -> None:
        """The pool as the engine has it now: new rows when sessions came or went, else only
        the changed cells (the cursor stays)."""
        status = self.engine.pool_status()
        rows = pool_rows(status, self.engine.agents, self.names())
        table = self.query_one("#pool-list", DataTable)
        if [r.key for r in rows] != [r.key for r in self.rows]:
            selected = self.selected_key()
            table.clear()
            for row in rows:
                table.add_row(*row.cells, key=row.key)
            keys = [r.key for r in rows]
            if selected in keys:
                table.move_cursor(row=keys.index(selected))
        else:
            widths = {
                c: max(len(r.cells[i]) for r in self.rows) for i, c in enumerate(POOL_COLUMNS)
            }
            for old, new in zip(self.rows, rows, strict=True):
                for column, before, after in zip(POOL_COLUMNS, old.cells, new.cells, strict=True):
                    if before == after:
                        continue
                    if len(after) > max(widths[column], len(column)):  # the column widens
                        table.update_cell(new.key, column, after, update_width=True)
                    else:
                        set_cell(table, new.key, column, after)
        self.rows = rows
        self.query_one("#pool-summary", Static).update(pool_summary(status))
        notes = "\n".join(pool_notes(status))
        if notes != self.notes_text:
            self.notes_text = notes
            self.query_one("#pool-notes", Static).update(notes)

    def selected_key(self) -> str | None:
        table = self.query_one("#pool-list", DataTable)
        if not self.rows or table.cursor_row is None or table.cursor_row >= len(self.rows):
            return None
        return self.rows[table.cursor_row].key

    def action_back(self) -> None:
        self.dismiss()

    def action_reload(self) -> None:
        self.reload()

    @on(DataTable.RowSelected, "#pool-list")
    def _enter(self, _event: DataTable.RowSelected) -> None:
        key = self.selected_key()
        if key is not None and key.startswith(ROLE_ROW):
            self.action_start()

    def action_start(self) -> None:
        """A session for the selected row's role (a role without one: the row says so)."""
        key = self.selected_key()
        if key is None:
            return
        if not key.startswith(ROLE_ROW):
            self.notify("this role has a session: pick a row that says no session", timeout=4)
            return
        self._start(key.removeprefix(ROLE_ROW))

    @work(group="pool-start")
    async def _start(self, role: str) -> None:
        shown = plain(role, one_line=True)
        self.notify(f"starting a {shown} session…", timeout=3, markup=False)
        try:
            await self.engine.new_session(role)
        except Exception as error:
            self.notify(
                plain(str(error)), title=f"No {shown} session", severity="error", markup=False
            )
            return
        self.notify(f"{shown} session started", timeout=4, markup=False)
        self.reload()
