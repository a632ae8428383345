"""Text with SGRs in it drawn in one call (`TerminalScreen.draw_styled`), Ink's frame erase
(`CSI 2K CSI 1A` repeated) applied in one call (`erase_rows_up`), and the stream's parts that
feed them: each must leave the screen exactly as the calls it stands for, one by one, on
hostile input (wide characters at the margin, joiners, combining marks, flags, autowrap off,
insert mode, DEC graphics, margins, rows kept back or deferred, reads cut anywhere) and as
tmux 3.3a shows it."""

from __future__ import annotations

import gc
import random
import re
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from semo.engine.terminal.screen import STYLED_SPLIT, TerminalScreen
from semo.engine.terminal.stream import make_screen_and_stream
from tests.support import tmux_fuzz as fuzz
from tests.support.random_stream import random_stream

_TEXTS = [
    *"ab Z~é│●⏺中文ｱ한✅🚀",
    "\u200d",
    "\ufe0f",
    "\u0301",
    "🇩🇪",
    "👨‍💻",
    "⚠️",
    "e\u0301",
    "  ",
    "x" * 9,
    "中文字符",
]
_SEPARATORS = ["", "0", "1", "22", "2", "31", "39", "7", "38;5;208", "48;2;1;2;3",
               "38:2::1:2:3", "4:3", "1;31", ";", "99999999"]  # fmt: skip
_SEPARATORS = [f"\x1b[{params}m" for params in _SEPARATORS] + ["\r\n"] * 4 + ["\r"] * 2
_SEPARATORS += ["\x1b[G", "\x1b[0G", "\x1b[3G", "\x1b[99999G", "\x1b[C", "\x1b[0C", "\x1b[4C",
                "\x1b[B", "\x1b[2B", "\x1b[0B", "\x1b[77777B"]  # fmt: skip
_text = st.lists(st.sampled_from(_TEXTS), max_size=4).map("".join)
# a stream's text part: text, then separators (SGRs, CR LFs) each followed by text
tmux_cells = st.lists(st.tuples(st.sampled_from(_SEPARATORS), _text), max_size=10).flatmap(
    lambda pairs: _text.map(lambda first: first + "".join(a + b for a, b in pairs))
)
_SETUPS = [
    "", "\x1b[?7l", "\x1b[4h", "\x1b(0", "a\u200d", "\x1b[1m", "\x1b[7;33m", "中文字符中文字符",
    "\x1b[2;4r", "x\r\n" * 8, "\x1b[?1049h", "ab\x1b[G中", "\x1b[5G✅\x1b[3G",
]  # fmt: skip


def _state(screen: TerminalScreen) -> tuple:
    buffer = screen.buffer
    cells = tuple(
        tuple(buffer[y][x] for x in range(screen.columns + 1)) for y in range(screen.lines)
    )
    wrapped = tuple(getattr(buffer[y], "wrapped", False) for y in range(screen.lines))
    cursor = screen.cursor
    return (
        cells,
        wrapped,
        (cursor.x, cursor.y, cursor.attrs),
        tuple(screen.scrollback),
        screen.last_graphic,
        screen._pending_zwj,
        frozenset(screen.dirty),
    )


def _screen(columns: int, setup: str, column: int) -> TerminalScreen:
    screen, stream = make_screen_and_stream(columns, 4, scrollback=20)
    stream.feed(setup)
    stream.feed(f"\x1b[{column}G")
    return screen


def _one_by_one(screen: TerminalScreen, text: str, bottom: int) -> int:
    """What `draw_styled` stands for: each piece of `text` with its own call; stops at a CR LF
    met on row `bottom` and returns its offset (else 0)."""
    offset = 0
    moves = {"G": screen.cursor_to_column, "C": screen.cursor_forward, "B": screen.cursor_down}
    for piece in re.findall(r"\x1b\[[0-9;:]*[mGCB]|\r\n?|[^\x1b\r]+", text):
        if piece[0] == "\r":
            if screen.cursor.y == bottom:
                return offset
            screen.crlf() if piece == "\r\n" else screen.carriage_return()
        elif piece[-1] == "m":
            screen.sgr(piece[2:-1])
        elif piece[0] == "\x1b":
            moves[piece[-1]](min(int(piece[2:-1] or 0), 65535))
        else:
            screen.draw(piece)
        offset += len(piece)
    return 0


@settings(max_examples=2000, deadline=None)
@example(text="中\x1b[1m文字", columns=4, column=2, setup="", read=False, bottom=-1)
@example(text="ab\x1b[31m\u200d🚀", columns=6, column=1, setup="", read=False, bottom=-1)
@example(text="x\x1b[1m🇩🇪", columns=6, column=5, setup="", read=True, bottom=-1)
# a scroll applies the kept writes, which replaces the screen's table of them
@example(text="0\r\n\r\n\r\n\r\n\x1b[1mx\x1b[0m\r\n", columns=5, column=1, setup="", read=False,
         bottom=-1)  # fmt: skip
@example(text="a\r\nb\x1b[1m\r\nc", columns=6, column=1, setup="x\r\n" * 8, read=False,
         bottom=3)  # fmt: skip
@given(
    text=tmux_cells,
    columns=st.integers(min_value=1, max_value=12),
    column=st.integers(min_value=1, max_value=13),
    setup=st.sampled_from(_SETUPS),
    read=st.booleans(),
    bottom=st.sampled_from([-1, 3, 1]),
)
def test_styled_text_draws_as_its_calls_one_by_one(text, columns, column, setup, read, bottom):
    fused = _screen(columns, setup, column)
    single = _screen(columns, setup, column)
    if read:  # rows already made into cells (else the setup's draws are still kept back)
        fused.buffer  # noqa: B018
        single.buffer  # noqa: B018
    stopped = fused.draw_styled(STYLED_SPLIT.split(text), bottom)
    assert stopped == _one_by_one(single, text, bottom)
    assert _state(fused) == _state(single)
    if stopped:
        assert text[stopped] == "\r"
        assert fused.cursor.y == bottom


def test_a_styled_row_covering_the_row_drops_the_earlier_writes_unapplied():
    screen, stream = make_screen_and_stream(6, 2)
    stream.feed("中文字\x1b[G")  # kept back, then covered from column 0 to the margin
    stream.feed("ab\x1b[1mcd\x1b[0mef\x1b[G")
    assert len(screen._writes[0]) == 3
    assert screen.text_rows()[0] == "abcdef"


@settings(max_examples=600, deadline=None)
@given(
    count=st.integers(min_value=0, max_value=9),
    row=st.integers(min_value=1, max_value=7),
    setup=st.sampled_from(["", "\x1b[2;5r", "\x1b[44m", "\x1b[?1049h", "\x1b[7m\x1b[2;3r"]),
    deferred=st.booleans(),
)
def test_ink_erase_is_its_calls_one_by_one(count, row, setup, deferred):
    def screen() -> TerminalScreen:
        screen, stream = make_screen_and_stream(5, 6)
        stream.feed("".join(f"r{y}\x1b[1mw\x1b[m\r\n" for y in range(9 if deferred else 5)))
        stream.feed(f"{setup}\x1b[{row}Hzz")
        return screen

    fused, single = screen(), screen()
    fused.erase_rows_up(count)
    for _ in range(count):
        single.erase_in_line(2)
        single.cursor_up(1)
    assert _state(fused) == _state(single)


def _ink_stream(rng: random.Random, size: int, columns: int) -> str:
    words = ["word", "中文字", "🚀✅", "e\u0301", "a\u200d🚀", "⚠️", "🇩🇪x", "│ ⏺ ●", "x" * columns]
    sgrs = ["\x1b[1m", "\x1b[22m", "\x1b[38;2;215;119;87m", "\x1b[39m", "\x1b[2m", "\x1b[0m",
            "\x1b[7;44m", "\x1b[m"]  # fmt: skip

    def erase() -> str:
        return "\x1b[2K\x1b[1A" * rng.randint(1, 12) + rng.choice(["\x1b[2K\x1b[G", "\x1b[2K", ""])

    return random_stream(
        rng,
        size,
        [
            (0.35, lambda: rng.choice(words)),
            (0.6, lambda: rng.choice(sgrs)),
            (0.7, lambda: rng.choice(["\r\n", "\r\n", "\x1b[K", "\x1b[G", "\x1b[3G", "\n"])),
            (0.78, erase),
            (0.83, lambda: rng.choice(["\x1b[?7l", "\x1b[?7h", "\x1b[4h", "\x1b[4l"])),
            (0.88, lambda: f"\x1b[{rng.randint(1, 9)};{rng.randint(1, columns + 2)}H"),
            (0.92, lambda: rng.choice(["\x1b(0", "\x1b(B", "\x1b[2;5r", "\x1b[r", "\x1b[?2026h"])),
            (1.0, lambda: rng.choice(["\x1b[", "\x1b", "\x1b[38;5", "\x1b[2K\x1b[", "\ufffd"])),
        ],
    )


@pytest.mark.parametrize("seed", range(40))
def test_ink_frames_fed_fast_leave_what_the_token_path_leaves(seed: int):
    rng = random.Random(seed)
    columns = rng.randint(3, 16)
    text = _ink_stream(rng, 4000, columns)
    cuts = sorted(rng.randrange(len(text)) for _ in range(rng.randint(0, 40)))
    chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    states = []
    for fast in (True, False):
        screen, stream = make_screen_and_stream(columns, 9, scrollback=30, fast=fast)
        for chunk in chunks:
            stream.feed(chunk)
        states.append((_state(screen), stream._pending, stream.unknown_sequences))
    assert states[0] == states[1]


def test_styled_split_cuts_at_sgrs_and_crlfs():
    assert STYLED_SPLIT.split("a\x1b[1;2mb\x1b[m\r\nc\r\x1b[2Bd\x1b[3Ge") == [
        "a", "\x1b[1;2m", "b", "\x1b[m", "", "\r\n", "c", "\r", "", "\x1b[2B", "d", "\x1b[3G", "e"
    ]  # fmt: skip
    screen, stream = make_screen_and_stream(10, 2)
    stream.feed("a\x1b[1?2mb\x1b[>4;2mc")  # not SGRs: tmux ignores them, nothing drawn
    assert screen.text_rows()[0] == "abc"
    assert not screen.cursor.attrs.bold


def _tmux_stream(rng: random.Random, size: int) -> str:
    """Ink frames at the fuzz test's size, without what tmux and semo are known to differ on
    (scroll margins, insert mode, DEC graphics)."""
    width = fuzz.COLUMNS
    words = ["word", "中文字", "🚀✅", "e\u0301", "⚠️", "│ ⏺ ●", "ｱｲ", "x" * (width - 3), "ab"]
    sgrs = ["\x1b[1m", "\x1b[22m", "\x1b[38;2;215;119;87m", "\x1b[39m", "\x1b[0m", "\x1b[7;44m"]

    def row() -> str:
        pieces = [rng.choice(sgrs) + rng.choice(words) for _ in range(rng.randint(1, 5))]
        return "".join(pieces) + rng.choice(["\r\n", "\x1b[K\r\n", ""])

    def frame() -> str:
        rows = rng.randint(1, fuzz.ROWS - 1)
        head = "\x1b[2K\x1b[1A" * rng.randint(0, rows) + "\x1b[2K\x1b[G"
        return head + "".join(row() for _ in range(rows))

    return random_stream(
        rng,
        size,
        [
            (0.7, frame),
            (0.85, lambda: f"\x1b[{rng.randint(1, fuzz.ROWS)};{rng.randint(1, width + 2)}H"),
            (1.0, lambda: rng.choice(["\x1b[?7l", "\x1b[?7h", "\x1b[?2026h\x1b[?25l", "\r\n"])),
        ],
    )


@pytest.mark.tmux
@pytest.mark.parametrize("seed", range(8))
def test_ink_frames_with_wide_text_render_as_in_tmux(seed: int, tmp_path: Path) -> None:
    rng = random.Random(1000 + seed)
    text = _tmux_stream(rng, 3000)
    path = tmp_path / "stream"
    path.write_bytes(text.encode())
    screen, stream = make_screen_and_stream(fuzz.COLUMNS, fuzz.ROWS)
    cuts = sorted(rng.randrange(len(text)) for _ in range(12))
    for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True):
        stream.feed(text[a:b])
    tmux_rows, tmux_cursor = fuzz.tmux_screen(path, escapes=False)
    assert screen.text_rows() == [row.rstrip(" ") for row in tmux_rows], f"seed {seed}: {text!r}"
    assert (min(screen.cursor.x, fuzz.COLUMNS - 1), screen.cursor.y) == tmux_cursor
    escaped, _ = fuzz.tmux_screen(path, escapes=True)
    assert fuzz.screen_cells(screen) == fuzz.tmux_cells(escaped)


def test_steps_between_many_attribute_sets_stay_bounded():
    """Each glyph cache remembers the SGRs taken from it; a program cycling through thousands
    of colours must not keep thousands of caches alive through those steps."""

    def glyph_caches() -> int:
        gc.collect()
        return sum(type(obj).__name__ == "_GlyphCache" for obj in gc.get_objects())

    before = glyph_caches()  # other tests' screens in this process keep theirs
    screen, stream = make_screen_and_stream(40, 5)
    for n in range(3000):
        stream.feed(f"a\x1b[38;2;{n % 256};{n // 256};7mb\x1b[1mc\x1b[0m\r\n")
    assert glyph_caches() - before < 1000
    assert screen.text_rows()[-2] == "abc"
