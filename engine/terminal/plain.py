"""Batch path for plain scrolling output: ASCII text, CR/LF and SGR while the cursor sits on
the bottom row of a full-screen scroll region.

Feeding such output line by line costs a scroll (every row shifted, the top row compacted into
scrollback) plus a cell per character. Here the whole run is split into lines first; rows that
scroll away within the run go straight to scrollback as compact `Line`s, and only the rows that
stay visible become cells. The result is identical to feeding the same text through the general
path (tests/terminal/test_plain_batch.py checks that with generated streams).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pyte.screens import StaticDefaultDict

from engine.terminal.cell import Cell
from engine.terminal.scrollback import Line, line_from_row, line_from_segments

if TYPE_CHECKING:
    from engine.terminal.screen import TerminalScreen

_SGR_SPLIT = re.compile(r"\x1b\[([0-9;:]*)m")
Segment = tuple[Cell, str]
Row = list[Segment] | Line  # a Line when the row is known to scroll away within the batch


class PlainBatch:
    def __init__(self, screen: TerminalScreen) -> None:
        self.screen = screen

    def feed(self, run: str) -> int:
        """Apply a prefix of `run` (which starts with CR or LF); return its length, 0 = declined."""
        pieces = run.split("\n")
        if len(pieces) < 3 or pieces[0].strip("\r"):
            return 0
        if not pieces[0] and self.screen.cursor.x != 0:
            return 0
        bodies = [piece.rstrip("\r") for piece in pieces]
        taken = self._valid_prefix(pieces, bodies)
        if taken < 2:
            return 0
        rows = self._layout(bodies[1 : taken + 1])
        self._apply(rows, ends_with_cr=bodies[taken] != pieces[taken])
        if taken == len(pieces) - 1:
            return len(run)
        return sum(len(p) for p in pieces[: taken + 1]) + taken

    @staticmethod
    def _valid_prefix(pieces: list[str], bodies: list[str]) -> int:
        """How many pieces after the first can be laid out as fresh rows starting at column 0."""
        last = len(pieces) - 1
        for index in range(1, last + 1):
            body = bodies[index]
            if "\r" in body:
                return index - 1
            if index < last and len(body) == len(pieces[index]):  # no CR: next row not at 0
                return index
        return last

    def _layout(self, bodies: list[str]) -> list[Row]:
        """Rows for the bodies (wrapping at the right margin), updating the cursor's attributes.

        Bodies early enough that later ones push them off screen become Lines at once.
        """
        screen = self.screen
        columns = screen.columns
        surely_scrolled = len(bodies) - screen.lines
        default = screen.default_char
        rows: list[Row] = []
        for index, body in enumerate(bodies):
            if "\x1b" not in body and len(body) <= columns:
                if not body:
                    rows.append([])
                    continue
                screen.last_graphic = body[-1]
                attrs = screen.cursor.attrs
                if index < surely_scrolled and attrs is default:
                    rows.append(Line(body.rstrip(" ")))
                else:
                    rows.append([(attrs, body)])
                continue
            segments = self._segments(body)
            if sum(len(text) for _, text in segments) <= columns:
                rows.append(segments)
            else:
                rows.extend(self._wrap(segments, columns))
        return rows

    @staticmethod
    def _wrap(segments: list[Segment], columns: int) -> list[Row]:
        rows: list[Row] = []
        row: list[Segment] = []
        room = columns
        for attrs, text in segments:
            while text:
                part, text = text[:room], text[room:]
                row.append((attrs, part))
                room -= len(part)
                if room == 0:
                    rows.append(row)
                    row, room = [], columns
        if row:
            rows.append(row)
        return rows

    def _segments(self, body: str) -> list[Segment]:
        screen = self.screen
        if "\x1b" not in body:
            if body:
                screen.last_graphic = body[-1]
            return [(screen.cursor.attrs, body)] if body else []
        parts = _SGR_SPLIT.split(body)
        segments: list[Segment] = []
        for index, part in enumerate(parts):
            if index % 2:
                screen.select_graphic_rendition(params=part)
            elif part:
                segments.append((screen.cursor.attrs, part))
                screen.last_graphic = part[-1]
        return segments

    def _apply(self, rows: list[Row], ends_with_cr: bool) -> None:
        screen = self.screen
        bottom = screen.lines - 1
        buffer = screen.buffer
        default = screen.default_char
        total = len(rows)
        old = [buffer.pop(y, None) for y in range(bottom + 1)]
        # everything = old rows 0..bottom, then the new rows; the screen keeps the last bottom+1
        if screen.keeps_scrollback():
            keep = min(total, screen.scrollback.limit)
            lines: list[Line] = []
            for index in range(total - keep, total):
                if index <= bottom:
                    lines.append(line_from_row(old[index] or {}, screen.columns, default))
                else:
                    lines.append(self._as_line(rows[index - bottom - 1], default))
            screen.scrollback.extend(lines, skipped=total - keep)
        for y in range(bottom + 1):
            index = total + y
            if index <= bottom:
                row = old[index]
                if row is not None:
                    buffer[y] = row
            else:
                buffer[y] = self._materialize(rows[index - bottom - 1], default)
        last = rows[-1]
        assert not isinstance(last, Line)  # the last row is always on screen
        screen.cursor.y = bottom
        screen.cursor.x = 0 if ends_with_cr else sum(len(text) for _, text in last)
        screen.dirty.update(range(bottom + 1))

    @staticmethod
    def _as_line(row: Row, default: Cell) -> Line:
        return row if isinstance(row, Line) else line_from_segments(row, default)

    def _materialize(self, row: Row, default: Cell) -> StaticDefaultDict[int, Cell]:
        assert not isinstance(row, Line), "rows that stay on screen keep their segments"
        cells: StaticDefaultDict[int, Cell] = StaticDefaultDict(default)
        x = 0
        screen = self.screen
        for attrs, text in row:
            glyph = screen.glyphs_for(attrs).__getitem__
            cells.update(zip(range(x, x + len(text)), map(glyph, text), strict=True))
            x += len(text)
        return cells
