"""Batch path for plain scrolling output on the bottom row of a full-screen scroll region.

Plain output is ASCII text, CR/LF and SGR while the cursor sits on that row.

Feeding such output line by line costs a scroll (every row shifted, the top row compacted into
scrollback) plus a cell per character. Here the whole run is split into lines first; rows that
scroll away within the run go straight to scrollback as compact `Line`s, and only the rows that
stay visible become cells. The result is identical to feeding the same text through the general
path (tests/terminal/test_plain_batch.py checks that with generated streams).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, NamedTuple

from pyte.screens import StaticDefaultDict

from semo.engine.terminal.cell import Cell
from semo.engine.terminal.scrollback import (
    Line,
    Record,
    WrappedSegments,
    finish_flat,
    line_from_row,
    pack_line,
    pack_segments,
    style_fields,
)

if TYPE_CHECKING:
    from semo.engine.terminal.screen import TerminalScreen

_SGR_SPLIT = re.compile(r"\x1b\[([0-9;:]*)m")
Segment = tuple[Cell, str]


class _Packed(NamedTuple):
    """A row known to scroll away within the batch, already packed for the scrollback."""

    record: Record


Row = list[Segment] | Line | _Packed  # Line/_Packed: the row scrolls away within the batch


class _PackedSegments(list[Segment]):
    """Segments of a row that stays on screen for now, with its Record already packed (made in
    the same pass): if the row scrolls away unchanged, it is stored as it is. Never changed
    in place (a continued row becomes a new list)."""

    record: Record


_Style = tuple[Cell, tuple[object, ...], dict[str, Any]]
"""Attributes, their packed style fields, and the style each SGR parameter string leads to."""
MAX_STYLES = 1024
MAX_STEPS = 256


class PlainBatch:
    def __init__(self, screen: TerminalScreen) -> None:
        self.screen = screen
        self._styles: dict[int, _Style] = {}
        self._interned: object = None
        self._fields: dict[tuple[object, ...], tuple[object, ...]] = {}

    def feed(self, run: str) -> int:
        """Apply a prefix of `run`; return its length (0 = declined, nothing changed).

        The first piece (before the first LF) must be CRs only, or text that continues the
        bottom row while that row is still deferred (wrapping onto new rows at the margin);
        later pieces become fresh rows.
        """
        pieces = run.split("\n")
        bodies = [piece.rstrip("\r") for piece in pieces]
        overflow = self._continue_bottom_row(pieces[0], bodies[0])
        if overflow is None:
            return 0
        taken = 0
        if len(pieces) > 1 and self.screen.cursor.x == 0:  # else LF without CR: not at column 0
            taken = self._valid_prefix(pieces, bodies)
        rows = overflow + self._layout(bodies[1 : taken + 1])
        if rows:
            self._apply(rows, ends_with_cr=bodies[taken] != pieces[taken])
        if taken == len(pieces) - 1:
            return len(run)
        return sum(len(p) for p in pieces[: taken + 1]) + taken

    def _continue_bottom_row(self, piece: str, body: str) -> list[Row] | None:
        """Handle the text before the first LF: None (and no change) if the batch cannot, else
        the rows that text wrapped onto past the right margin (still to be scrolled in)."""
        screen = self.screen
        if "\r" in body:
            return None
        overflow: list[Row] = []
        if body:
            bottom = screen.lines - 1
            row = screen.deferred_rows.get(bottom)
            if row is None or screen.cursor.x != sum(len(text) for _, text in row):
                return None
            segments = self._segments(body)
            room = screen.columns - screen.cursor.x
            if sum(len(text) for _, text in segments) <= room:
                if type(row) is _PackedSegments:  # its Record would be stale
                    row = screen.deferred_rows[bottom] = list(row)
                row.extend(segments)
                screen.cursor.x += sum(len(text) for _, text in segments)
            else:
                head, tail = _split_segments(segments, room)
                screen.deferred_rows[bottom] = WrappedSegments([*row, *head])
                wrapped = self._wrap(tail, screen.columns)
                overflow.extend(wrapped)
                screen.cursor.x = sum(len(text) for _, text in wrapped[-1])
        if len(body) != len(piece):
            screen.cursor.x = 0
        return overflow

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
            if "\x1b" not in body:
                if len(body) > columns:  # it wraps
                    rows.extend(self._wrap(self._segments_of([body]), columns))
                    continue
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
            parts = _SGR_SPLIT.split(body)
            if index < surely_scrolled:  # scrolls away in this batch: straight to a Record
                record = self._pack_parts(parts, default, None, columns)
                if record is not None:
                    rows.append(_Packed(record))
                    continue
            else:  # stays on screen for now: segments, with the Record for later
                kept = _PackedSegments()
                record = self._pack_parts(parts, default, kept, columns)
                if record is not None:
                    kept.record = record
                    rows.append(kept)
                    continue
            rows.extend(self._wrap(self._segments_of(parts), columns))  # wider: it wraps
        return rows

    def _pack_parts(
        self, parts: list[str], blank: Cell, segments: list[Segment] | None, columns: int
    ) -> Record | None:
        """`pack_segments(self._segments_of(parts))` in one pass (the SGRs apply as well); the
        segments go into `segments` when it is given. None, and nothing applied, when the text
        is wider than `columns` (the row wraps).

        Each SGR is one dict lookup in the table of the style it leaves, which gives the
        next style and its packed fields at once; runs are built flat, as the Record holds
        them."""
        screen = self.screen
        cursor = screen.cursor
        styles = self._styles
        if len(styles) >= MAX_STYLES or self._interned is not screen._interned:
            styles.clear()  # between lines only, with the fields: see `_style`
            self._fields.clear()
            self._interned = screen._interned
        first = style = self._style(cursor.attrs)
        fields = style[1]
        flat: list[Any] = []
        last: tuple[object, ...] | None = None
        last_text = ""
        text = parts[0]
        pos = len(text)
        if pos:
            flat += (0, pos, fields)
            last = fields
            last_text = text
            if segments is not None:
                segments.append((style[0], text))
        step = self._step
        pairs = iter(parts)
        next(pairs)
        for params, text in zip(pairs, pairs, strict=True):
            style = style[2].get(params) or step(style, params)
            if text:
                fields = style[1]
                end = pos + len(text)
                if fields is last:
                    flat[-2] = end
                else:
                    flat += (pos, end, fields)
                    last = fields
                pos = end
                last_text = text
                if segments is not None:
                    segments.append((style[0], text))
        if pos > columns:
            cursor.attrs = first[0]  # (`_step` moves it)
            return None
        cursor.attrs = style[0]
        if last_text:
            screen.last_graphic = last_text[-1]
        return finish_flat("".join(parts[0::2]), flat, blank)

    def _style(self, attrs: Cell) -> _Style:
        """The `_Style` of `attrs` (the screen's interned attributes: few objects recur).

        The tables are emptied only between lines, both at once: every style reachable
        during a line then has its fields from `_fields`, so equal fields are one object and
        runs merge on identity."""
        hit = self._styles.get(id(attrs))
        if hit is not None and hit[0] is attrs:
            return hit
        fields = style_fields(attrs)
        style: _Style = (attrs, self._fields.setdefault(fields, fields), {})
        self._styles[id(attrs)] = style
        return style

    def _step(self, style: _Style, params: str) -> _Style:
        """The style after SGR `params` from `style`, remembered in `style`'s table."""
        screen = self.screen
        cursor = screen.cursor
        cursor.attrs = style[0]
        screen.sgr(params)
        after = self._style(cursor.attrs)
        if len(style[2]) < MAX_STEPS:
            style[2][params] = after
        return after

    @staticmethod
    def _wrap(segments: list[Segment], columns: int) -> list[list[Segment]]:
        rows: list[list[Segment]] = []
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
        # every row but the last wrapped into the next (a full last row waits at the margin)
        return [WrappedSegments(r) for r in rows[:-1]] + rows[-1:]

    def _segments(self, body: str) -> list[Segment]:
        screen = self.screen
        if "\x1b" not in body:
            if body:
                screen.last_graphic = body[-1]
            return [(screen.cursor.attrs, body)] if body else []
        return self._segments_of(_SGR_SPLIT.split(body))

    def _segments_of(self, parts: list[str]) -> list[Segment]:
        """Segments of a body split at its SGRs (text, params, text, ...); applies the SGRs."""
        screen = self.screen
        segments: list[Segment] = []
        cached = screen._sgr_cache.get
        cursor = screen.cursor
        attrs = cursor.attrs
        last = ""
        for index, part in enumerate(parts):
            if index % 2:
                hit = cached((id(attrs), part))  # select_graphic_rendition's own cache
                if hit is not None and hit[0] is attrs:
                    attrs = hit[1]
                else:
                    cursor.attrs = attrs
                    screen.select_graphic_rendition(params=part)
                    attrs = cursor.attrs
            elif part:
                segments.append((attrs, part))
                last = part
        cursor.attrs = attrs
        if last:
            screen.last_graphic = last[-1]
        return segments

    def _apply(self, rows: list[Row], ends_with_cr: bool) -> None:
        """Scroll the new rows in. Visible new rows stay segments (`screen.deferred_rows`) until
        someone reads `screen.buffer`, so a flood pays for cells only when it is looked at."""
        screen = self.screen
        bottom = screen.lines - 1
        if screen._writes:
            screen._apply_writes()
        buffer = screen._buffer
        deferred = screen.deferred_rows
        default = screen.default_char
        total = len(rows)
        old: list[Row | StaticDefaultDict[int, Cell] | None] = [
            deferred[y] if y in deferred else buffer.pop(y, None) for y in range(bottom + 1)
        ]
        # everything = old rows 0..bottom, then the new rows; the screen keeps the last bottom+1
        if screen.keeps_scrollback():
            keep = min(total, screen.scrollback.limit)
            records: list[Record] = []
            for index in range(total - keep, total):
                source = old[index] if index <= bottom else rows[index - bottom - 1]
                records.append(self._as_record(source, screen.columns, default))
            screen.scrollback.extend_packed(records, skipped=total - keep)
        visible: dict[int, list[Segment]] = {}
        for y in range(bottom + 1):
            index = total + y
            row = old[index] if index <= bottom else rows[index - bottom - 1]
            if isinstance(row, list):
                visible[y] = row
            elif row is not None:
                assert not isinstance(row, Line | _Packed), (
                    "rows that stay on screen keep their segments"
                )
                buffer[y] = row
        screen.deferred_rows = visible
        last = rows[-1]
        assert isinstance(last, list)  # the last row is always on screen: segments
        screen.cursor.y = bottom
        screen.cursor.x = 0 if ends_with_cr else sum(len(text) for _, text in last)
        screen.dirty.update(range(bottom + 1))

    @staticmethod
    def _as_record(
        row: Row | StaticDefaultDict[int, Cell] | None, columns: int, default: Cell
    ) -> Record:
        if type(row) is _PackedSegments:
            return row.record
        if isinstance(row, list):
            return pack_segments(row, default)
        if isinstance(row, _Packed):
            return row.record
        if isinstance(row, Line):
            return pack_line(row)
        return pack_line(line_from_row({} if row is None else row, columns, default))


def _split_segments(segments: list[Segment], cells: int) -> tuple[list[Segment], list[Segment]]:
    """The first `cells` characters of `segments`, and the rest."""
    head: list[Segment] = []
    for index, (attrs, text) in enumerate(segments):
        if len(text) >= cells:
            if cells:
                head.append((attrs, text[:cells]))
            rest = [(attrs, text[cells:])] if len(text) > cells else []
            return head, rest + segments[index + 1 :]
        head.append((attrs, text))
        cells -= len(text)
    return head, []
