"""The plain-output batch packs SGR-coloured rows straight into scrollback records (rows that
stay on screen carry their record until they scroll away): the stored records must be exactly
the ones the general path stores, whatever the read boundaries, reads of the screen between
feeds, and however often the style tables are emptied."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from semo.engine.terminal import plain
from semo.engine.terminal.cell import Cell
from semo.engine.terminal.screen import TerminalScreen
from semo.engine.terminal.stream import make_screen_and_stream

# equal styles reached by different parameters (31 and 38;5;1 are both "red"), resets, blanks
_sgr = st.sampled_from(
    [
        "\x1b[31m",
        "\x1b[38;5;1m",
        "\x1b[0m",
        "\x1b[m",
        "\x1b[1;34m",
        "\x1b[22m",
        "\x1b[38;2;10;200;30m",
        "\x1b[44m",
        "\x1b[49m",
    ]
)
_text = st.text(alphabet=st.sampled_from(list("ab -")), max_size=12)
_line = st.lists(st.one_of(_text, _sgr), max_size=12).map("".join)


def _records(screen: TerminalScreen) -> list[object]:
    return list(screen.scrollback.records())


def _feed(chunks: list[str], batch: bool, columns: int, rows: int, read_between: bool):
    screen, stream = make_screen_and_stream(columns, rows, scrollback=200, batch=batch)
    seen = []
    for chunk in chunks:
        stream.feed(chunk)
        if read_between:
            seen.append([screen.row_line(y) for y in range(screen.lines)])
    seen.append(screen.text_rows())
    return screen, seen


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(_line, min_size=1, max_size=60),
    tail=st.sampled_from(["", "\r\n", "\x1b[32mpartial"]),
    columns=st.integers(min_value=8, max_value=60),
    rows=st.integers(min_value=1, max_value=10),
    cuts=st.lists(st.integers(min_value=0, max_value=1500), max_size=6),
    read_between=st.booleans(),
)
def test_packed_records_equal_the_general_paths(lines, tail, columns, rows, cuts, read_between):
    text = "\r\n".join(lines) + tail
    bounds = [0, *sorted(min(cut, len(text)) for cut in cuts), len(text)]
    chunks = [text[a:b] for a, b in itertools.pairwise(bounds)]
    fast, fast_seen = _feed(chunks, True, columns, rows, read_between)
    slow, slow_seen = _feed(chunks, False, columns, rows, read_between)
    assert _records(fast) == _records(slow)
    assert fast_seen == slow_seen
    assert fast.cursor.attrs == slow.cursor.attrs
    assert (fast.cursor.x, fast.cursor.y) == (slow.cursor.x, slow.cursor.y)


def test_a_continued_bottom_row_is_stored_with_its_continuation():
    screen, stream = make_screen_and_stream(40, 3)
    lines = "".join(f"l{i}\r\n" for i in range(5))
    stream.feed(lines + "\x1b[31mred\x1b[0m start")  # the bottom row stays on screen, packed
    stream.feed(" \x1b[32mgreen\x1b[0m end\r\n" + lines)
    assert screen.scrollback.text()[:6] == ["l0", "l1", "l2", "l3", "l4", "red start green end"]
    line = screen.scrollback[5]
    assert line.text == "red start green end"
    assert [(run.start, run.end, run.style.fg) for run in line.runs] == [
        (0, 3, "red"),
        (3, 10, "default"),
        (10, 15, "green"),
        (15, 19, "default"),
    ]


def test_style_tables_emptied_mid_stream_change_nothing(monkeypatch):
    monkeypatch.setattr(plain, "MAX_STYLES", 3)
    monkeypatch.setattr(plain, "MAX_STEPS", 2)
    # equal attributes as distinct objects, fields as distinct tuples (the screen's and the
    # scrollback's tables emptied): runs of equal styles must still merge
    shared_fields = plain.style_fields
    monkeypatch.setattr(plain, "style_fields", lambda cell: tuple(list(shared_fields(cell))))
    interned_sgr = TerminalScreen.sgr

    def sgr(screen: TerminalScreen, params: str) -> None:
        interned_sgr(screen, params)
        screen.cursor.attrs = Cell(*screen.cursor.attrs)

    monkeypatch.setattr(TerminalScreen, "sgr", sgr)
    colours = [f"\x1b[38;2;{i};{i * 7 % 256};9m" for i in range(40)]
    # "w" and "x" share a colour, with other colours set between them (no text in between)
    words = "{0}w{2}\x1b[0m{1}\x1b[0m{0}x "
    lines = [
        "".join(words.format(colours[(i * 5 + j) % 40], colours[j], j) for j in range(6))
        for i in range(300)
    ]
    text = "\r\n".join(lines) + "\r\n"
    chunks = [text[a : a + 777] for a in range(0, len(text), 777)]
    fast, _ = _feed(chunks, True, 80, 6, False)
    slow, _ = _feed(chunks, False, 80, 6, False)
    assert len(_records(fast)) == 200
    assert _records(fast) == _records(slow)
