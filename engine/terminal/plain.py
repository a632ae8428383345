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


class PlainBatch:
    def __init__(self, screen: TerminalScreen) -> None:
        self.screen = screen

    def feed(self, run: str) -> int:
        """Apply a prefix of `run` (which starts with CR or LF); return its length, 0 = declined."""
        pieces = run.split("\n")
        if len(pieces) < 3 or pieces[0].strip("\r"):
            return 0
        screen = self.screen
        if not pieces[0] and screen.cursor.x != 0:
            return 0
        taken = self._valid_prefix(pieces)
        if taken < 2:
            return 0
        rows, ends_with_cr = self._layout(pieces[1 : taken + 1])
        self._apply(rows, ends_with_cr)
        if taken == len(pieces) - 1:
            return len(run)
        return sum(len(p) for p in pieces[: taken + 1]) + taken

    @staticmethod
    def _valid_prefix(pieces: list[str]) -> int:
        """How many pieces after the first can be laid out as fresh rows starting at column 0."""
        last = len(pieces) - 1
        for index in range(1, last + 1):
            piece = pieces[index]
            body = piece.rstrip("\r")
            if "\r" in body:
                return index - 1
            if index < last and body == piece:  # no CR: the next line would not start at 0
                return index
        return last

    def _layout(self, pieces: list[str]) -> tuple[list[list[Segment]], bool]:
        """Split pieces into screen rows (wrapping at the right margin), updating cursor attrs."""
        screen = self.screen
        columns = screen.columns
        rows: list[list[Segment]] = []
        ends_with_cr = False
        for piece in pieces:
            body = piece.rstrip("\r")
            ends_with_cr = body != piece
            if "\x1b" not in body and len(body) <= columns:
                if body:
                    screen.last_graphic = body[-1]
                    rows.append([(screen.cursor.attrs, body)])
                else:
                    rows.append([])
                continue
            segments = self._segments(body)
            width = sum(len(text) for _, text in segments)
            if width <= columns:
                rows.append(segments)
                continue
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
        return rows, ends_with_cr

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

    def _apply(self, rows: list[list[Segment]], ends_with_cr: bool) -> None:
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
                    lines.append(line_from_segments(rows[index - bottom - 1], default))
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
        screen.cursor.y = bottom
        screen.cursor.x = 0 if ends_with_cr else sum(len(text) for _, text in last)
        screen.dirty.update(range(bottom + 1))

    def _materialize(self, segments: list[Segment], default: Cell) -> StaticDefaultDict[int, Cell]:
        row: StaticDefaultDict[int, Cell] = StaticDefaultDict(default)
        x = 0
        screen = self.screen
        for attrs, text in segments:
            glyph = screen.glyphs_for(attrs).__getitem__
            row.update(zip(range(x, x + len(text)), map(glyph, text), strict=True))
            x += len(text)
        return row
