"""Reflow of the primary screen and its scrollback on a resize, as tmux 3.3a does it.

How it works: docs/TERMINAL.md, "Reflow, row by row".
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

from semo.engine.terminal.cell import BLANK, Cell
from semo.engine.terminal.scrollback import (
    Line,
    Record,
    StyleRun,
    flat_runs,
    pack_line,
    style_fields,
)
from semo.engine.terminal.width import ZWJ, char_width

Fields = tuple[object, ...]
Run = tuple[int, int, Fields]  # text [start, end) and a Cell's fields (its data ignored)
Item = Record | Line  # a history record or a screen row, as received or rebuilt
_END = -1  # cursor offset: at (or past) the end of its logical line


def cell_starts(text: str) -> list[tuple[int, int]]:
    """(index in `text`, width) of each cell of a row's text: a character of width 1 or 2
    starts a cell; zero-width characters, and anything a ZWJ joins, belong to the cell before."""
    cells: list[tuple[int, int]] = []
    joined = False
    for index, char in enumerate(text):
        if joined:
            joined = char == ZWJ
            continue
        if char == ZWJ:
            joined = bool(cells)
            continue
        width = char_width(char)
        if width <= 0 and cells:
            continue
        cells.append((index, max(width, 1)))
    return cells


class _Widths(dict[str, int]):
    """char -> cells (0 for zero-width and control characters), looked up at C speed."""

    def __missing__(self, char: str) -> int:
        if len(self) >= 65536:
            self.clear()
        width = self[char] = max(char_width(char), 0)
        return width


_WIDTHS = _Widths()
_width_of = _WIDTHS.__getitem__


def text_width(text: str) -> int:
    if text.isascii():
        return len(text)
    if ZWJ in text:
        return sum(_char_widths(text))
    return sum(map(_width_of, text))


def _char_widths(text: str) -> list[int]:
    """Cells each character of a row's text adds: zero-width characters and what a ZWJ joins
    add none (they belong to the cell before, as `cell_starts` groups them)."""
    widths = list(map(_width_of, text))
    joiner = text.find(ZWJ)
    while joiner != -1 and joiner + 1 < len(text):
        widths[joiner + 1] = 0
        joiner = text.find(ZWJ, joiner + 2)
    return widths


@dataclass
class Reflowed:
    history: list[Record]
    rows: list[Line]  # exactly `lines` of them
    cursor_x: int
    cursor_y: int
    scrolled: int  # history lines a taller screen may pull back (tmux's hscrolled)


def _text_wrapped(item: Item) -> tuple[str, bool]:
    if isinstance(item, str):
        return item, False
    return item[0], bool(item[2])


def _runs(item: Item) -> list[Run]:
    if isinstance(item, str):
        return []
    if type(item) is Line:
        return [(run.start, run.end, style_fields(run.style)) for run in item.runs]
    return list(flat_runs(item[1]))


def reflow(
    history: Sequence[Record],
    rows: Sequence[Line],
    *,
    cursor: tuple[int, int],
    old_size: tuple[int, int],
    new_size: tuple[int, int],
    keep_history: bool,
    scrolled: int | None = None,
    cursor_cells: int | None = None,
    blank: Cell = BLANK,
) -> Reflowed:
    """The primary screen resized from `old_size` to `new_size` (columns, lines).

    `cursor_cells`: how many cells of the cursor's row were ever written (the row's last cell
    in use; None: up to the cursor). Blanks up to the cursor within them count as text (a
    prompt's "$ "), as tmux's cellused; a cursor further right is at the end of its line.

    `scrolled`: how many of the oldest history lines scrolled there (tmux's hscrolled; all of
    them when None). Only those come back when the screen grows taller; tmux moves that mark
    with the content it reflows, so rows a narrower screen pushed into the history stay there."""
    old_columns, old_lines = old_size
    columns, lines = new_size
    items: list[Item] = list(history) if keep_history else []
    base = len(items)
    items.extend(rows)
    cx, cy = cursor
    cursor_at = base + cy
    mark = base if scrolled is None else max(0, min(scrolled, base))
    if lines < old_lines:  # tmux: rows below the cursor go first, then the top into history
        below = min(old_lines - lines, max(0, old_lines - 1 - cy))
        if below:
            del items[len(items) - below :]
        top = max(0, old_lines - below - lines)
        if keep_history:
            mark += top
        else:
            del items[:top]
            cursor_at -= top
    elif lines > old_lines:  # pull rows back from the history, then blank rows at the bottom
        pulled = min(mark, lines - old_lines)
        mark -= pulled
        items.extend([Line("")] * (lines - old_lines - pulled))
    if columns != old_columns:
        pad = cx if cursor_cells is None else min(cx, cursor_cells)
        items, cursor_at, cx, mark = _rewrap(
            items, cursor_at, cx, pad, mark, old_columns, columns, blank
        )
    if len(items) < lines:
        items.extend([Line("")] * (lines - len(items)))
    hsize = len(items) - lines
    cursor_y = cursor_at - hsize
    if cursor_y < 0:
        cx, cursor_y = 0, 0
    return Reflowed(
        [_record(item) for item in items[:hsize]] if keep_history else [],
        [_line(item) for item in items[hsize:]],
        min(cx, columns),
        cursor_y,
        min(mark, hsize) if keep_history else 0,
    )


def _rewrap(
    items: list[Item],
    cursor_at: int,
    cx: int,
    cursor_pad: int,
    mark: int,
    old_columns: int,
    columns: int,
    blank: Cell,
) -> tuple[list[Item], int, int, int]:
    """Every logical line wrapped at `columns`; the cursor's new row and column, and `mark`
    (tmux's hscrolled) after the fixups tmux's grid_reflow makes to it.

    The cursor is placed as tmux's grid_wrap_position/grid_unwrap_position do: by the index of
    its logical line and its cell offset in it (or "at the end"), counted again after the
    reflow. A wrapped line that ends in an empty row can lose its wrap flag in the reflow (see
    `_wrap_chain`), which makes one logical line more, and tmux then puts a cursor below it
    one logical line higher; so does this."""
    count = len(items)
    cursor_line, offset = _cursor_in_line(items, cursor_at, cx)
    out: list[Item] = []
    used: list[int] = []  # cells of each output row (-1: its text's width, when needed)
    wider = columns > old_columns
    i = 0
    while i < count:
        item = items[i]
        text, wrapped = _text_wrapped(item)
        if not wrapped and i != cursor_at and (wider or _fits(text, columns)):
            out.append(item)  # a logical line of one row that fits: kept as it is
            used.append(-1)
            i += 1
            continue
        end = i
        while end < count - 1 and _text_wrapped(items[end])[1]:
            end += 1
        pad = cursor_pad if i <= cursor_at <= end else 0  # blanks written up to the cursor
        chain = items[i : end + 1]
        last_text = _text_wrapped(items[end])[0]
        last_empty = end > i and not last_text and not (cursor_at == end and pad > 0)
        if last_empty:  # tmux leaves an empty row that ends a wrapped line on its own
            chain = chain[:-1]
        cursor_row = cursor_at - i if i <= cursor_at < i + len(chain) else None
        lines, pieces, ranges, joined_last = _wrap_chain(chain, cursor_row, pad, columns, blank)
        final_wrapped = last_empty or _text_wrapped(chain[-1])[1]
        mark = _hscrolled(mark, i, len(out), ranges, final_wrapped, pieces, columns)
        if last_empty:
            # tmux's grid_reflow_join drops the flag when it took the last row with text
            # whole into a row that still has room; else the empty row stays part of the line
            keep = not (joined_last and pieces[-1][2] < columns)
            lines[-1] = _with_wrapped(lines[-1], keep)
        out.extend(lines)
        used.extend(piece[2] for piece in pieces)
        if last_empty:
            out.append(items[end])
            used.append(0)
        i = end + 1
    row, x = _cursor_from_line(out, used, cursor_line, offset)
    return out, row, x, mark


def _fits(text: str, columns: int) -> bool:
    return len(text) <= columns if text.isascii() else text_width(text) <= columns


def _cursor_in_line(items: Sequence[Item], cursor_at: int, cx: int) -> tuple[int, int]:
    """(index of the cursor's logical line, its cell offset in it or _END): grid_wrap_position."""
    if cursor_at >= len(items):
        return sum(1 for item in items if not _text_wrapped(item)[1]), _END
    start = cursor_at
    while start > 0 and _text_wrapped(items[start - 1])[1]:
        start -= 1
    line = sum(1 for item in items[:start] if not _text_wrapped(item)[1])
    # each row holds its text's width in cells (tmux's cellused): a wrapped row keeps its
    # trailing blanks, so a row one cell short because a wide character wrapped stays short
    before = sum(text_width(_text_wrapped(items[j])[0]) for j in range(start, cursor_at))
    here = text_width(_text_wrapped(items[cursor_at])[0])
    return line, (before + cx if cx < here else _END)


def _cursor_from_line(out: list[Item], used: list[int], line: int, offset: int) -> tuple[int, int]:
    """The row and column of cell `offset` of logical line `line`: grid_unwrap_position."""
    row = 0
    seen = 0
    while row < len(out) - 1 and seen != line:
        if not _text_wrapped(out[row])[1]:
            seen += 1
        row += 1

    def cells(r: int) -> int:
        return used[r] if used[r] >= 0 else text_width(_text_wrapped(out[r])[0])

    if not out:
        return 0, 0
    if offset == _END:
        while row < len(out) - 1 and _text_wrapped(out[row])[1]:
            row += 1
        return row, cells(row)
    while row < len(out) - 1 and _text_wrapped(out[row])[1] and offset >= cells(row):
        offset -= cells(row)
        row += 1
    return row, offset


def _wrap_chain(
    chain: Sequence[Item],
    cursor_row: int | None,
    cx: int,
    columns: int,
    blank: Cell,
) -> tuple[list[Record], list[tuple[int, int, int]], list[tuple[int, int]], bool]:
    """One logical line (rows all wrapped but the last) wrapped at `columns`: its rows, their
    (start, stop, cells), the cells each row of the chain held, and whether its last row
    was joined onto the row before it (it does not start a row of its own)."""
    texts: list[str] = []
    runs: list[Run] = []
    pos = 0  # in the joined text
    cells_before = 0
    starts: list[int] = []  # each row's first cell in the logical line
    rows = [_text_wrapped(item) for item in chain]
    last = len(chain) - 1
    for index, item in enumerate(chain):
        starts.append(cells_before)
        text = rows[index][0]
        width = len(text) if text.isascii() else text_width(text)
        used = width
        if index == cursor_row and index == last:
            used = max(used, cx)  # blanks written up to the cursor (a prompt's space)
        if not isinstance(item, str):
            runs.extend((start + pos, stop + pos, fields) for start, stop, fields in _runs(item))
        if used > width:
            text += " " * (used - width)
        texts.append(text)
        pos += len(text)
        cells_before += used
    joined = "".join(texts)
    final_wrapped = rows[last][1]
    pieces = _breaks(joined, columns)
    style = blank[1:]
    final = len(pieces) - 1
    if not runs:
        lines: list[Record] = [(joined[a:b], (), True) for a, b, _cells in pieces]
        if not final_wrapped:
            lines[-1] = lines[-1][0].rstrip(" ")
    else:
        runs = _merged(runs)
        lines = []
        first = 0
        for n, (start, stop, _cells) in enumerate(pieces):
            while runs[first][1] <= start and first < len(runs) - 1:
                first += 1  # runs are in order: those before this row are done
            window = []
            for run in runs[first:]:
                if run[0] >= stop:
                    break
                window.append(run)
            lines.append(_slice(joined, window, start, stop, n < final or final_wrapped, style))
    row, column = _locate(pieces, starts[last])
    joined_last = last > 0 and column > 0 and row == len(pieces) - 1
    if last > 0 and column == 0 and row > 0 and not final_wrapped:
        # tmux's grid_reflow_join stops when the last row's first character (a wide one)
        # does not fit in the one column left, and then takes the wrap flag off the row it
        # was filling if that row had taken the row before whole: the line becomes two
        before_row, before_column = _locate(pieces, starts[last - 1])
        if (
            pieces[row - 1][2] == columns - 1
            and before_row == row - 1
            and before_column > 0
            and _first_width(rows[last][0]) == 2
        ):
            lines[row - 1] = _with_wrapped(lines[row - 1], False)
    ranges = [
        (start, stop) for start, stop in zip(starts, [*starts[1:], cells_before], strict=True)
    ]
    return lines, pieces, ranges, joined_last


def _hscrolled(
    mark: int,
    first_row: int,
    first_piece: int,
    ranges: list[tuple[int, int]],
    last_wrapped: bool,
    pieces: list[tuple[int, int, int]],
    columns: int,
) -> int:
    """tmux's hscrolled after grid_reflow went through one logical line: its rows `ranges`
    (cells in the line) are numbered from `first_row`, the rows made from them from
    `first_piece`. tmux moves the mark by each split (`if yy <= hscrolled: += lines - 1`,
    yy a row before the reflow) and each join (rows taken whole before the mark take it up,
    `to` a row after it): the two numberings are mixed as tmux mixes them."""
    bounds = []
    position = 0
    for _start, _stop, cells in pieces:
        bounds.append((position, position + cells))
        position += cells
    count, row, piece = len(ranges), 0, 0
    at = ranges[0][0]
    while row < count and piece < len(bounds):
        end = ranges[row][1]
        wrapped = row < count - 1 or last_wrapped
        width = end - at
        if width > columns:  # split into the rows that start inside this one
            last = piece
            while last + 1 < len(bounds) and bounds[last + 1][0] < end:
                last += 1
            if first_row + row <= mark:
                mark += last - piece
            piece = last
            if not (wrapped and end - bounds[piece][0] < columns):
                piece, row = piece + 1, row + 1
                at = ranges[row][0] if row < count else 0
                continue
        elif width == columns or not wrapped:  # moved
            piece, row = piece + 1, row + 1
            at = ranges[row][0] if row < count else 0
            continue
        stop = bounds[piece][1]  # joined: the rows after it that this row takes whole
        taken = row + 1
        while taken < count and ranges[taken][1] <= stop:
            taken += 1
        whole, to = taken - row - 1, first_piece + piece
        if whole and mark > to + whole:
            mark -= whole
        elif whole and mark > to:
            mark = to
        piece, row = piece + 1, taken
        at = (
            stop
            if row < count and ranges[row][0] < stop
            else (ranges[row][0] if row < count else 0)
        )
    return mark


def _locate(pieces: list[tuple[int, int, int]], offset: int) -> tuple[int, int]:
    """(row, column) of the cell `offset` cells into a logical line (tmux's unwrap_position)."""
    row = 0
    while row < len(pieces) - 1 and offset >= pieces[row][2]:
        offset -= pieces[row][2]
        row += 1
    return row, offset


def _first_width(text: str) -> int:
    return char_width(text[0]) if text else 0


def _breaks(text: str, columns: int) -> list[tuple[int, int, int]]:
    """Rows of `text` at `columns`: (start, stop) in the text and the cells each uses. Greedy;
    a wide character that does not fit starts the next row (alone on a row it may overflow)."""
    if not text:
        return [(0, 0, 0)]
    if text.isascii():
        return [
            (start, min(start + columns, len(text)), min(columns, len(text) - start))
            for start in range(0, len(text), columns)
        ]
    return _cut(_char_widths(text), columns)


def _cut(widths: list[int], columns: int) -> list[tuple[int, int, int]]:
    """`_breaks` by prefix sums of the characters' `widths` (`_char_widths`): a row ends
    before the first character that does not fit; zero-width ones stay with the character
    before them (equal sums)."""
    ends = list(accumulate(widths, initial=0))  # ends[i]: cells of the first i characters
    pieces: list[tuple[int, int, int]] = []
    start, count = 0, len(widths)
    while start < count:
        stop = bisect_right(ends, ends[start] + columns, start + 1) - 1
        if stop == start:  # a wide character alone wider than the row, and what joins it
            stop = bisect_right(ends, ends[start + 1], start + 1) - 1
        pieces.append((start, stop, ends[stop] - ends[start]))
        start = stop
    return pieces


def _slice(
    text: str, runs: list[Run], start: int, stop: int, wrapped: bool, style: Fields
) -> Record:
    """Characters [start, stop) of a logical line as a packed row: runs clipped, trailing
    default blanks dropped (as `line_from_row` does) except on a wrapped row, where they tell a
    blank written in the last column from the gap a wide character left when it wrapped."""
    piece = text[start:stop]
    if not runs:
        return (piece, (), True) if wrapped else piece.rstrip(" ")
    if len(runs) == 1 and runs[0][0] <= start and runs[0][1] >= stop:  # one style: common
        fields = runs[0][2]
        if fields[1:] == style:
            return (piece, (), True) if wrapped else piece.rstrip(" ")
        return (piece, (0, len(piece), fields), wrapped)
    clipped: list[Run] = []
    for run_start, run_stop, fields in runs:
        if run_stop > start and run_start < stop:
            clipped.append((max(run_start, start) - start, min(run_stop, stop) - start, fields))
    kept = len(piece) if wrapped else len(piece.rstrip(" "))
    if kept < len(piece):  # trailing blanks: keep the styled ones
        for _start, run_stop, fields in reversed(clipped):
            if run_stop <= kept:
                break
            if fields[1:] != style:
                kept = max(kept, run_stop)
                break
        piece = piece[:kept]
        clipped = [(a, min(b, kept), f) for a, b, f in clipped if a < kept]
    if all(fields[1:] == style for _a, _b, fields in clipped):
        return (piece, (), True) if wrapped else piece
    flat: list[int | Fields] = []
    for a, b, fields in clipped:  # merged per logical line already
        flat += (a, b, fields)
    return (piece, tuple(flat), wrapped)


def _with_wrapped(record: Record, wrapped: bool) -> Record:
    if isinstance(record, str):
        return (record, (), True) if wrapped else record
    text, flat, _old = record
    return text if not flat and not wrapped else (text, flat, wrapped)


def _same(a: Fields, b: Fields) -> bool:
    return a is b or a[1:] == b[1:]  # style fields are shared tuples: mostly the same object


def _merged(runs: list[Run]) -> list[Run]:
    out: list[Run] = []
    for run in runs:
        if out and out[-1][1] == run[0] and _same(out[-1][2], run[2]):
            out[-1] = (out[-1][0], run[1], out[-1][2])
        else:
            out.append(run)
    return out


def _record(item: Item) -> Record:
    if not isinstance(item, Line):
        return item
    return pack_line(item)


def _line(item: Item) -> Line:
    if type(item) is Line:
        return item
    if isinstance(item, str):
        return Line(item)
    return Line(item[0], tuple(StyleRun(a, b, Cell._make(f)) for a, b, f in _runs(item)), item[2])


def row_cells(line: Line, blank: Cell = BLANK) -> dict[int, Cell]:
    """The cells of a screen row holding `line` from column 0 (a wide character's right half is
    a cell with data "")."""
    text = line.text
    styles: list[Cell] = []
    if line.runs:
        styles = [blank] * len(text)
        for run in line.runs:
            styles[run.start : run.end] = [run.style] * (run.end - run.start)
    cells: dict[int, Cell] = {}
    if text.isascii():
        if styles:
            for x, (char, style) in enumerate(zip(text, styles, strict=True)):
                cells[x] = style._replace(data=char)
        else:
            for x, char in enumerate(text):
                cells[x] = blank._replace(data=char)
        return cells
    starts = cell_starts(text)
    x = 0
    for n, (index, width) in enumerate(starts):
        stop = starts[n + 1][0] if n + 1 < len(starts) else len(text)
        style = styles[index] if styles else blank
        cells[x] = style._replace(data=text[index:stop])
        if width == 2:
            cells[x + 1] = style._replace(data="")
        x += width
    return cells
