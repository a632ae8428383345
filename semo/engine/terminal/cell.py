"""The character cell stored in the screen buffer: pyte's Char fields plus `dim`."""

from __future__ import annotations

from typing import NamedTuple


class Cell(NamedTuple):
    """One screen cell. `data` is "" for the right half of a wide character.

    Field order and names follow `pyte.screens.Char` so pyte's own Screen methods keep working
    (they only use `_replace` on these fields); `dim` (SGR 2) is the one pyte lacks.
    """

    data: str
    fg: str = "default"
    bg: str = "default"
    bold: bool = False
    italics: bool = False
    underscore: bool = False
    strikethrough: bool = False
    reverse: bool = False
    blink: bool = False
    dim: bool = False


BLANK = Cell(" ")
