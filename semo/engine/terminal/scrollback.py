"""Bounded scrollback kept as compact lines (text + style runs), not as dicts of cells.

pyte's HistoryScreen keeps every scrolled row as a dict of Char objects and wraps every screen
method call; here a scrolled row costs one string and a short tuple of style runs.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from itertools import repeat
from operator import itemgetter
from typing import Any, NamedTuple

from semo.engine.terminal.cell import BLANK, Cell

DEFAULT_SCROLLBACK_LINES = 10_000


class StyleRun(NamedTuple):
    """Cells [start, end) of a line's text share `style` (a Cell whose `data` is ignored)."""

    start: int
    end: int
    style: Cell


class Line(NamedTuple):
    """One terminal row: its text (wide characters once, no padding) and its style runs."""

    text: str
    runs: tuple[StyleRun, ...] = ()
    wrapped: bool = False  # the text continues on the next line (the terminal auto-wrapped)


def _same_style(a: Cell, b: Cell) -> bool:
    return a is b or a[1:] == b[1:]


_STYLE = itemgetter(slice(1, None))
EMPTY_LINE = Line("")


class WrappedSegments(list[tuple[Cell, str]]):
    """Segments of a row the terminal auto-wrapped (its text continues on the next row)."""


def is_wrapped(row: object) -> bool:
    """Rows carry a `wrapped` attribute once the cursor auto-wrapped off their end."""
    return isinstance(row, WrappedSegments) or getattr(row, "wrapped", False)


def line_from_row(row: Mapping[int, Cell], columns: int, blank: Cell = BLANK) -> Line:
    """Compact a screen row; trailing default blanks are dropped, except on a row the
    terminal wrapped: there they were written up to the margin (a reflow must tell them from
    the cell a wrapping wide character left empty, which a row does not hold)."""
    if is_wrapped(row):
        return _compact_row(row, columns, blank, trim=False)._replace(wrapped=True)
    return _compact_row(row, columns, blank)


def _compact_row(row: Mapping[int, Cell], columns: int, blank: Cell, trim: bool = True) -> Line:
    if not row:
        return EMPTY_LINE
    width = min(columns, max(row) + 1)
    cells = list(map(row.get, range(width), repeat(blank, width)))
    blank_style = blank[1:]
    while trim and width and cells[width - 1].data == " " and cells[width - 1][1:] == blank_style:
        width -= 1
    if not width:
        return EMPTY_LINE
    del cells[width:]
    text = "".join([cell.data for cell in cells])
    styles = list(map(_STYLE, cells))
    first = styles[0]
    if styles.count(first) == width:  # one style for the whole row: no per-cell loop
        if first == blank_style:
            return Line(text)
        return Line(text, (StyleRun(0, len(text), cells[0]._replace(data=" ")),))
    runs: list[StyleRun] = []
    run_start = pos = 0
    run_style: tuple[object, ...] | None = None
    run_cell = blank
    for cell, style in zip(cells, styles, strict=True):
        if not cell.data:  # right half of a wide character
            continue
        if style != run_style:
            if run_style is not None:
                runs.append(StyleRun(run_start, pos, run_cell._replace(data=" ")))
            run_start, run_style, run_cell = pos, style, cell
        pos += len(cell.data)
    runs.append(StyleRun(run_start, pos, run_cell._replace(data=" ")))
    if len(runs) == 1 and runs[0].style[1:] == blank_style:
        return Line(text)
    return Line(text, tuple(runs))


def line_from_segments(segments: Sequence[tuple[Cell, str]], blank: Cell = BLANK) -> Line:
    """The Line that `line_from_row` would give for a row holding `segments` from column 0."""
    if is_wrapped(segments):
        return _compact_segments(segments, blank, trim=False)._replace(wrapped=True)
    return _compact_segments(segments, blank)


def _compact_segments(segments: Sequence[tuple[Cell, str]], blank: Cell, trim: bool = True) -> Line:
    if len(segments) == 1:  # the common case: one style for the whole line
        attrs, text = segments[0]
        if _same_style(attrs, blank):
            return Line(text.rstrip(" ") if trim else text)
        if text:
            return Line(text, (StyleRun(0, len(text), attrs._replace(data=" ")),))
    runs: list[StyleRun] = []
    texts: list[str] = []
    pos = 0
    for attrs, text in segments:
        if not text:
            continue
        style = attrs if attrs.data == " " else attrs._replace(data=" ")
        if runs and _same_style(runs[-1].style, style):
            runs[-1] = runs[-1]._replace(end=pos + len(text))
        else:
            runs.append(StyleRun(pos, pos + len(text), style))
        texts.append(text)
        pos += len(text)
    text = "".join(texts)
    while trim and runs and _same_style(runs[-1].style, blank):
        last = runs[-1]
        kept = text[last.start : last.end].rstrip(" ")
        text = text[: last.start + len(kept)]
        if kept:
            runs[-1] = last._replace(end=len(text))
            break
        runs.pop()
    if len(runs) == 1 and _same_style(runs[0].style, blank):
        runs = []
    return Line(text, tuple(runs))


Record = str | tuple[str, tuple[int | tuple[object, ...], ...], bool]
"""A Line as the scrollback stores it: its text alone when it has no styles and did not wrap,
else an exact tuple of text, its runs as one flat tuple (start, end, style fields, start, end,
style fields...) and the wrap flag. Flat: a stored line is two tuples, not two plus one per run
(each new container counts toward the collector's next young pass: SGR-heavy output scrolled
through runs ~1.3x faster)."""


def pack_line(line: Line) -> Record:
    return _pack(line)


def _pack(line: Line) -> Record:
    """Only str, int, bool and exact tuples of them: CPython's collector stops tracking such
    tuples after one pass, so ten thousand lines of scrollback add nothing to its full
    collections (NamedTuples stay tracked, and a full collection walks every one of them)."""
    if not line.runs and not line.wrapped:
        return line.text
    return (
        line.text,
        tuple([x for run in line.runs for x in (run.start, run.end, _fields(run.style))]),
        line.wrapped,
    )


_FIELDS: dict[Cell, tuple[object, ...]] = {}


def _fields(style: Cell) -> tuple[object, ...]:
    """One shared plain tuple per style (lines of one colour share it)."""
    fields = _FIELDS.get(style)
    if fields is None:
        if len(_FIELDS) >= 4096:
            _FIELDS.clear()
        fields = _FIELDS[style] = tuple(style)
    return fields


FIELDS_BY_ID: dict[int, tuple[Cell, tuple[object, ...]]] = {}


def style_fields(cell: Cell) -> tuple[object, ...]:
    """`_fields` of `cell` as a style (data " "), looked up by identity first: cells come from
    the screen's interned attributes, so the same few objects recur."""
    hit = FIELDS_BY_ID.get(id(cell))
    if hit is not None and hit[0] is cell:
        return hit[1]
    fields = _fields(cell if cell.data == " " else cell._replace(data=" "))
    if len(FIELDS_BY_ID) >= 4096:
        FIELDS_BY_ID.clear()
    FIELDS_BY_ID[id(cell)] = (cell, fields)
    return fields


def pack_segments(segments: Sequence[tuple[Cell, str]], blank: Cell = BLANK) -> Record:
    """`_pack(line_from_segments(segments, blank))`, without building the Line."""
    if len(segments) == 1 and segments[0][1]:  # the common case: one style for the row
        attrs, text = segments[0]
        wrapped = isinstance(segments, WrappedSegments)
        if attrs is blank or _same_style(attrs, blank):
            return (text, (), True) if wrapped else text.rstrip(" ")
        return (text, (0, len(text), style_fields(attrs)), wrapped)
    runs: list[list[Any]] = []  # [start, end, cell, style fields]
    texts: list[str] = []
    pos = 0
    last: tuple[object, ...] | None = None
    by_id = FIELDS_BY_ID.get
    for attrs, text in segments:
        if not text:
            continue
        hit = by_id(id(attrs))
        fields = hit[1] if hit is not None and hit[0] is attrs else style_fields(attrs)
        size = len(text)
        if fields is last or fields == last:
            runs[-1][1] = pos + size
        else:
            runs.append([pos, pos + size, attrs, fields])
            last = fields
        texts.append(text)
        pos += size
    return finish_record("".join(texts), runs, is_wrapped(segments), blank)


def finish_record(text: str, runs: list[list[Any]], wrapped: bool, blank: Cell) -> Record:
    """The Record of `text` with `runs` ([start, end, cell, style fields], adjacent runs of
    different styles): trailing default blanks dropped (not on a wrapped row), as
    `line_from_segments` does."""
    while not wrapped and runs and _same_style(runs[-1][2], blank):
        start, end = runs[-1][:2]
        kept = text[start:end].rstrip(" ")
        text = text[: start + len(kept)]
        if kept:
            runs[-1][1] = len(text)
            break
        runs.pop()
    if len(runs) == 1 and _same_style(runs[0][2], blank):
        runs = []
    if not runs and not wrapped:
        return text
    flat: list[Any] = []
    for run in runs:
        flat += (run[0], run[1], run[3])
    return (text, tuple(flat), wrapped)


def finish_flat(text: str, flat: list[Any], blank: Cell) -> Record:
    """`finish_record` for a row that did not wrap, with its runs already flat (start, end,
    style fields, ...; adjacent runs of different styles)."""
    blank_style = blank[1:]
    while flat and flat[-1][1:] == blank_style:
        start = flat[-3]
        kept = text[start : flat[-2]].rstrip(" ")
        text = text[: start + len(kept)]
        if kept:
            flat[-2] = len(text)
            break
        del flat[-3:]
    if not flat or (len(flat) == 3 and flat[2][1:] == blank_style):
        return text
    return (text, tuple(flat), False)


def flat_runs(
    flat: tuple[int | tuple[object, ...], ...],
) -> Iterator[tuple[int, int, tuple[object, ...]]]:
    """The (start, end, style fields) triples of a record's flat runs."""
    triples = iter(flat)
    # the flat tuple repeats int, int, fields: a pattern its type cannot say
    return zip(triples, triples, triples, strict=True)  # type: ignore[arg-type]


def _unpack(record: Record) -> Line:
    if isinstance(record, str):
        return Line(record)
    text, flat, wrapped = record
    runs = flat_runs(flat)
    return Line(
        text, tuple(StyleRun(start, end, Cell._make(style)) for start, end, style in runs), wrapped
    )


class Scrollback:
    """The most recent `limit` lines that scrolled off the top of the primary screen."""

    def __init__(self, limit: int = DEFAULT_SCROLLBACK_LINES) -> None:
        if limit < 0:
            raise ValueError(f"scrollback limit must be >= 0, got {limit}")
        self.limit = limit
        self._lines: deque[Record] = deque(maxlen=limit)
        self.total_pushed = 0
        self.rewrites = 0  # times the lines were replaced (a reflow): copies must be re-read
        self.scrolled = 0  # the oldest lines that scrolled here (tmux's hscrolled, see reflow)

    def push(self, line: Line) -> None:
        self._lines.append(_pack(line))
        self.total_pushed += 1
        self.scrolled = min(self.scrolled + 1, len(self._lines))

    def extend(self, lines: list[Line], *, skipped: int = 0) -> None:
        """Append `lines`; `skipped` counts older lines that would have been evicted at once."""
        self._lines.extend(map(_pack, lines))
        self.total_pushed += len(lines) + skipped
        self.scrolled = min(self.scrolled + len(lines), len(self._lines))

    def extend_packed(self, records: list[Record], *, skipped: int = 0) -> None:
        """`extend` for lines already packed (`pack_segments`, `pack_line`)."""
        self._lines.extend(records)
        self.total_pushed += len(records) + skipped
        self.scrolled = min(self.scrolled + len(records), len(self._lines))

    def clear(self) -> None:
        self._lines.clear()
        self.scrolled = 0

    def records(self) -> deque[Record]:
        """The packed lines, oldest first (read only: `replace` to change them)."""
        return self._lines

    def replace(self, records: list[Record], *, total_pushed: int, scrolled: int) -> None:
        """Put `records` (the newest `limit` of them) in place of every line: a reflow.
        `total_pushed` keeps absolute positions (`total_pushed` + cursor row) meaningful."""
        evicted = max(0, len(records) - self.limit)
        self._lines = deque(records, maxlen=self.limit)
        self.total_pushed = max(total_pushed, len(self._lines))
        self.scrolled = max(0, min(scrolled - evicted, len(self._lines)))
        self.rewrites += 1

    def unwrap_last(self, blank: Cell = BLANK) -> None:
        """The newest line no longer continues on the next one (tmux takes the wrap flag off
        the history's last line when the screen's top row is cleared whole or lines move to or
        from it). Its trailing default blanks go, as on any line that did not wrap."""
        lines = self._lines
        if not lines:
            return
        record = lines[-1]
        if isinstance(record, str) or not record[2]:
            return
        text, flat, _ = record
        if not flat:
            lines[-1] = text.rstrip(" ")
            return
        triples = iter(flat)
        runs = [
            [start, end, fields, fields]
            for start, end, fields in zip(triples, triples, triples, strict=True)
        ]
        lines[-1] = finish_record(text, runs, False, blank)

    def __len__(self) -> int:
        return len(self._lines)

    def __getitem__(self, index: int) -> Line:
        return _unpack(self._lines[index])

    def text_at(self, index: int) -> tuple[str, bool]:
        """(text, wrapped) of line `index`, without building its style runs."""
        record = self._lines[index]
        if isinstance(record, str):
            return record, False
        return record[0], record[2]

    def __iter__(self) -> Iterator[Line]:
        return map(_unpack, self._lines)

    def text(self) -> list[str]:
        return [record if isinstance(record, str) else record[0] for record in self._lines]
