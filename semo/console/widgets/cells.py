"""Changing one DataTable cell and repainting only that cell.

`DataTable.update_cell` repaints the whole table: every row is written to the terminal again
for one changed age or last line (20 sessions: ~7 kB for a keystroke's echo in the list's
last-line column). `set_cell` stores the value and repaints the cell's region only.
"""

from __future__ import annotations

from typing import Any

from textual.coordinate import Coordinate
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey


def set_cell(table: DataTable[Any], row: str, column: str, value: object) -> None:
    """`value` in the cell at (`row`, `column`) (keys), repainting only that cell."""
    row_key, column_key = RowKey(row), ColumnKey(column)
    table._data[row_key][column_key] = value
    table._update_count += 1  # the table's render caches are keyed by it
    table.refresh_coordinate(
        Coordinate(table.get_row_index(row_key), table.get_column_index(column_key))
    )
