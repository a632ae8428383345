"""The batch path for plain scrolling output must give exactly what the general path gives."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semo.engine.terminal.cell import BLANK
from semo.engine.terminal.screen import TerminalScreen
from semo.engine.terminal.scrollback import (
    WrappedSegments,
    line_from_segments,
    pack_line,
    pack_segments,
)
from semo.engine.terminal.stream import TerminalStream, make_screen_and_stream

_words = st.text(
    alphabet=st.one_of(
        st.characters(min_codepoint=32, max_codepoint=126),
        st.sampled_from(list("│●⏺é中🚀\u0301\u200d\ufe0f\U0001f1e9")),  # narrow, wide, zero width
    ),
    max_size=50,
)
_sgr = st.sampled_from(
    ["\x1b[31m", "\x1b[0m", "\x1b[m", "\x1b[1;4m", "\x1b[38:2::1:2:3m", "\x1b[44m"]
)
_breaks = st.sampled_from(["\r\n", "\n", "\r", "\r\r\n", "\n\n"])
_pieces = st.lists(st.one_of(_words, _sgr, _breaks), max_size=60)


def _state(screen: TerminalScreen) -> tuple[object, ...]:
    lines_before_cells = [screen.row_line(y) for y in range(screen.lines)]  # from segments
    cells = tuple(
        tuple(screen.buffer[y][x] for x in range(screen.columns)) for y in range(screen.lines)
    )
    wrapped = tuple(getattr(screen.buffer[y], "wrapped", False) for y in range(screen.lines))
    lines_from_cells = [screen.row_line(y) for y in range(screen.lines)]
    assert lines_before_cells == lines_from_cells
    return (
        cells,
        wrapped,
        tuple(lines_from_cells),
        (screen.cursor.x, screen.cursor.y, screen.cursor.attrs),
        tuple(screen.scrollback),
        screen.scrollback.total_pushed,
        screen.last_graphic,
    )


def _split(text: str, cuts: list[int]) -> list[str]:
    bounds = [0, *sorted(min(cut, len(text)) for cut in cuts), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def _run(chunks: list[str], batch: bool, columns: int, rows: int, limit: int):
    screen, stream = make_screen_and_stream(columns, rows, scrollback=limit, batch=batch)
    for chunk in chunks:
        stream.feed(chunk)
    return screen, stream


@settings(max_examples=400, deadline=None)
@given(
    prefix=_pieces,
    body=_pieces,
    columns=st.integers(min_value=3, max_value=30),
    rows=st.integers(min_value=1, max_value=8),
    limit=st.sampled_from([0, 3, 100]),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=4),
)
def test_batch_matches_general_path(prefix, body, columns, rows, limit, cuts):
    text = "".join(prefix) + "".join(body)
    chunks = _split(text, cuts)
    fast, _ = _run(chunks, True, columns, rows, limit)
    slow, _ = _run(chunks, False, columns, rows, limit)
    assert _state(fast) == _state(slow)


_line = st.lists(st.one_of(_words, _sgr), max_size=4).map("".join)


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(_line, min_size=1, max_size=40),
    tail=st.sampled_from(["", "\r", "\r\n", "partial"]),
    columns=st.integers(min_value=3, max_value=30),
    rows=st.integers(min_value=1, max_value=8),
    limit=st.sampled_from([0, 5, 100]),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=4),
)
def test_batch_matches_general_path_on_crlf_lines(lines, tail, columns, rows, limit, cuts):
    text = "\r\n".join(lines) + tail
    chunks = _split(text, cuts)
    fast, _ = _run(chunks, True, columns, rows, limit)
    slow, _ = _run(chunks, False, columns, rows, limit)
    assert _state(fast) == _state(slow)


def test_batch_path_is_taken_for_plain_scrolling():
    screen, stream = make_screen_and_stream(10, 3)
    calls = []
    original = stream._batch.feed

    def spy(run: str) -> int:
        consumed = original(run)
        calls.append(consumed)
        return consumed

    stream._batch.feed = spy  # type: ignore[method-assign]
    stream.feed("".join(f"line {i}\r\n" for i in range(50)))
    assert any(calls), "plain scrolling output should go through the batch path"
    assert screen.text_rows() == ["line 48", "line 49", ""]
    assert screen.scrollback.text()[-1] == "line 47"


def test_stream_class_is_reusable():
    screen = TerminalScreen(5, 2)
    stream = TerminalStream(screen)
    stream.feed("ab\r\ncd\r\nef")
    assert screen.text_rows() == ["cd", "ef"]


@pytest.mark.parametrize("cut", range(1, 40))
def test_a_line_continued_across_reads_keeps_every_segment(cut):
    text = "".join(f"row {i}\r\n" for i in range(12)) + "x\x1b[31my z\x1b[0mw\x1b[1m!\r\nnext\r\n"
    cut = len(text) - cut
    fast, _ = _run([text[:cut], text[cut:]], True, 12, 4, 100)
    slow, _ = _run([text[:cut], text[cut:]], False, 12, 4, 100)
    assert _state(fast) == _state(slow)


@pytest.mark.parametrize("cut", range(1, 60))
def test_a_wrapping_line_continued_across_reads_stays_on_the_batch_path(cut):
    """A read that ends inside a line longer than the screen is wide: the next read continues
    that line past the margin. The batch wraps it (it used to hand the read to the slow path)."""
    text = "".join(f"row {i} " + "x\x1b[32my\x1b[0m" * (i % 9) + "\r\n" for i in range(14))
    text = "\x1b[0m" + text + "z" * 25 + "\r\nend"
    cut = len(text) - cut
    fast, stream = _run([text[:cut]], True, 7, 4, 100)
    declined = []
    original = stream._batch.feed

    def spy(run: str) -> int:
        consumed = original(run)
        if not consumed:
            declined.append(run)
        return consumed

    stream._batch.feed = spy  # type: ignore[method-assign]
    stream.feed(text[cut:])
    slow, _ = _run([text[:cut], text[cut:]], False, 7, 4, 100)
    assert _state(fast) == _state(slow)
    assert not declined


_cells = st.sampled_from(
    [BLANK, BLANK._replace(fg="red"), BLANK._replace(data="x", fg="red"), BLANK._replace(bold=True)]
)


@settings(max_examples=300, deadline=None)
@given(
    segments=st.lists(st.tuples(_cells, st.sampled_from(["", " ", "ab", "c  ", "  "])), max_size=6),
    wrapped=st.booleans(),
    blank=st.sampled_from([BLANK, BLANK._replace(bg="blue")]),
)
def test_packing_segments_directly_gives_the_packed_line(segments, wrapped, blank):
    rows = WrappedSegments(segments) if wrapped else segments
    assert pack_segments(rows, blank) == pack_line(line_from_segments(rows, blank))
