"""Rich measures text with the terminal model's width table (semo/engine/terminal/width_table.py).

    import semo.console.widths  # semo/console/__init__.py does it: before anything is measured

Rich has its own table (Unicode's East Asian Width data), which differs from what terminals draw
for a few hundred code points: U+3164 HANGUL FILLER is 0 cells for Rich and 2 in tmux (glibc),
so a question holding it pushed the inbox's borders out of line, and a pane's row drawn by Rich
did not match the cells the terminal model gave it. The console replaces the table Rich loads
with the model's (one table for every code point the console draws), before any measurement is
cached. Rich reads its table only through `rich.cells.load_cell_table`, which this replaces.
"""

from __future__ import annotations

from functools import cache

import rich.cells
from rich._unicode_data import load
from rich.cells import CellTable

from semo.engine.terminal.width_table import WIDTHS


@cache
def cell_table(unicode_version: str = "auto") -> CellTable:
    """The model's widths as a Rich table (whatever version Rich asks for)."""
    return CellTable("semo", WIDTHS, load("latest").narrow_to_wide)


def install() -> None:
    """Make Rich measure with the model's table (idempotent; clears Rich's caches)."""
    rich.cells.load_cell_table = cell_table
    rich.cells.get_character_cell_size.cache_clear()
    rich.cells.cached_cell_len.cache_clear()


install()
