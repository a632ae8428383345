"""Character widths and cell clusters as tmux 3.3a counts them (no pyte: the console imports it).

How it works: docs/TERMINAL.md, "Character widths".
"""

from __future__ import annotations

import re
from bisect import bisect_right
from functools import lru_cache

from semo.engine.terminal.width_table import WIDTHS

ZWJ = "\u200d"
_REGIONAL_INDICATORS = range(0x1F1E6, 0x1F200)
_STARTS = [first for first, _last, _width in WIDTHS]


@lru_cache(maxsize=4096)
def char_width(char: str) -> int:
    """Cells for one character, as tmux 3.3a (glibc's wcwidth) counts them: 0, 1 or 2, and -1
    for a control character (C0, DEL, C1; NUL is 0), as the `wcwidth` package says."""
    code = ord(char)
    if code < 0xA0:
        if 0x20 <= code < 0x7F:
            return 1
        return 0 if code == 0 else -1
    index = bisect_right(_STARTS, code) - 1
    if index >= 0:
        _first, last, width = WIDTHS[index]
        if code <= last:
            return width
    return 1


class _Kinds(dict[int, str]):
    """code point -> its kind for `str.translate`: "1" narrow, "2" wide, "0" zero width, "Z" the
    joiner, "-" anything else (controls: not drawn by the run path)."""

    def __missing__(self, code: int) -> str:
        if len(self) >= 8192:
            self.clear()
        char = chr(code)
        width = char_width(char)
        kind = "Z" if char == ZWJ else "-" if width < 0 else str(min(width, 2))
        self[code] = kind
        return kind


_kinds = _Kinds()
# A cell of more than one character (a base with what joins it), or a joiner that is dropped
# (before a narrow character: "Z" at the start, at the end and "ZZ" are left to the slow path).
_JOINED = re.compile(r"[12](?:0|Z[02])+|Z")
_HARD = re.compile(r"^[0Z]|-|ZZ|Z$")  # what the run path leaves to the per-character path
MAX_CLUSTER_CHARS = 32  # tmux's limit on one cell's text; past it additions are dropped


def clusters(text: str) -> tuple[list[str], int] | None:
    """`text` cut into the strings of its cells, with the cells they take (a wide one two), or
    None when it needs the per-character path: it starts with a joiner or a zero-width
    character (they join a cell drawn before it), ends with a joiner (it waits for the next
    character), holds controls, repeated joiners, or a cell longer than tmux keeps."""
    kinds = text.translate(_kinds)
    if _HARD.search(kinds):
        return None
    cells = list(text)
    for match in reversed(list(_JOINED.finditer(kinds))):
        start, end = match.span()
        if end - start > MAX_CLUSTER_CHARS:
            return None
        cells[start:end] = [text[start:end]] if end - start > 1 else []
    return cells, kinds.count("1") + 2 * (kinds.count("2") - kinds.count("Z2"))
