"""The console's copy of a session's screen, kept current from the engine's screen frames.

It has the attributes a terminal pane reads from a live `TerminalScreen` (rows as `Line`s,
cursor, modes, alternate flag, bells, scrollback with `total_pushed`, and the `dirty` set the
pane clears each frame), so the pane draws a remote session exactly like a local one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from semo.engine.control.wire import StyleBook
from semo.engine.terminal.scrollback import DEFAULT_SCROLLBACK_LINES, Line

_EMPTY = Line("")


@dataclass
class MirrorCursor:
    x: int = 0
    y: int = 0
    hidden: bool = False


@dataclass
class MirrorModes:
    application_cursor_keys: bool = False
    bracketed_paste: bool = False


class MirrorScrollback:
    """The scrollback lines received (the newest last); `total_pushed` is the engine's count of
    lines ever pushed, so a pane scrolled back keeps its place as lines arrive."""

    def __init__(self, limit: int = DEFAULT_SCROLLBACK_LINES) -> None:
        self._lines: deque[Line] = deque(maxlen=limit)
        self.total_pushed = 0

    def __len__(self) -> int:
        return len(self._lines)

    def __getitem__(self, index: int) -> Line:
        return self._lines[index]

    def __iter__(self) -> Iterator[Line]:
        return iter(self._lines)

    @property
    def available(self) -> int:
        """How many lines the engine may hold: what a pane can scroll back through once it
        asked for them (a console that shows the live screen gets only the count)."""
        return min(self.total_pushed, self._lines.maxlen or 0)

    def append(self, lines: list[Line]) -> None:
        self._lines.extend(lines)

    def prepend(self, lines: list[Line]) -> None:
        """Older lines (the history sent after the first screen), up to the limit."""
        room = (self._lines.maxlen or 0) - len(self._lines)
        if room <= 0:
            return
        self._lines.extendleft(reversed(lines[-room:]))

    def clear(self) -> None:
        self._lines.clear()


@dataclass
class MirrorScreen:
    columns: int = 80
    lines: int = 24
    cursor: MirrorCursor = field(default_factory=MirrorCursor)
    modes: MirrorModes = field(default_factory=MirrorModes)
    alternate: bool = False
    bells: int = 0
    title: str = ""
    scrollback: MirrorScrollback = field(default_factory=MirrorScrollback)
    dirty: set[int] = field(default_factory=set)
    rows: list[Line] = field(default_factory=list)
    #: a complete screen has arrived (until then the pane shows blank rows)
    complete: bool = False

    def row_line(self, y: int) -> Line:
        rows = self.rows
        return rows[y] if 0 <= y < len(rows) else _EMPTY

    def text_rows(self) -> list[str]:
        return [self.row_line(y).text for y in range(self.lines)]

    def apply(self, frame: dict[str, Any], styles: StyleBook) -> None:
        """One screen frame from the engine (see docs/CONSOLE.md, "screen")."""
        size = frame.get("size")
        if size is not None:
            shown = self.lines  # a pane taller than the new size repaints the rows it lost
            self.columns, self.lines = int(size[0]), int(size[1])
            self.rows = [_EMPTY] * self.lines
            self.dirty.update(range(max(shown, self.lines)))
        if frame.get("full"):
            self.complete = True
            self.dirty.update(range(self.lines))
        for key, value in (frame.get("rows") or {}).items():
            y = int(key)
            if 0 <= y < self.lines:
                self.rows[y] = styles.decode_line(value)
                self.dirty.add(y)
        cursor = frame.get("cursor")
        if cursor is not None:
            self.cursor.x, self.cursor.y, self.cursor.hidden = (
                int(cursor[0]),
                int(cursor[1]),
                bool(cursor[2]),
            )
        modes = frame.get("modes")
        if modes is not None:
            self.modes.application_cursor_keys = bool(modes[0])
            self.modes.bracketed_paste = bool(modes[1])
        if "alt" in frame:
            self.alternate = bool(frame["alt"])
        if "bells" in frame:
            self.bells = int(frame["bells"])
        scrollback = self.scrollback
        if frame.get("sb_reset"):
            scrollback.clear()
        if "sb" in frame:
            scrollback.append([styles.decode_line(v) for v in frame["sb"]])
        if "history" in frame:
            scrollback.prepend([styles.decode_line(v) for v in frame["history"]])
            self.dirty.update(range(self.lines))  # a pane scrolled back shows it at once
        if "pushed" in frame:
            scrollback.total_pushed = int(frame["pushed"])
