"""The stream's fast path (parts cut by one regex, sequences looked up whole in a table of ready
calls) must leave the screen exactly as the token-by-token path does (`fast=False`, the path
the tmux fidelity tests pinned down), whatever the input and wherever the reads are cut."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from semo.engine.terminal.screen import TerminalScreen
from semo.engine.terminal.stream import MAX_CALLS, TerminalStream, make_screen_and_stream
from tests.support.random_stream import random_stream

CORPUS = Path(__file__).resolve().parents[1] / "corpus"

_text = st.lists(
    st.sampled_from([*"ab Z~é│●⏺中文ｱ한✅🚀", "\u200d", "\ufe0f", "\u0301", "🇩🇪", "👨‍💻", "  "]),
    min_size=1,
    max_size=12,
).map("".join)
SEQUENCES = [
        "\r\n", "\n", "\r", "\t", "\x08", "\x07", "\x0b", "\x00", "\x7f", "\x85", "\x9b", "\x9c",
        "\x1b[m", "\x1b[0m", "\x1b[1m", "\x1b[22m", "\x1b[31m", "\x1b[38;5;208m", "\x1b[48;5;3m",
        "\x1b[38;2;10;200;30m", "\x1b[38:2::1:2:3m", "\x1b[4:3m", "\x1b[2;7m", "\x1b[1?2m",
        "\x1b[H", "\x1b[2;3H", "\x1b[;5H", "\x1b[9;99f", "\x1b[3A", "\x1b[B", "\x1b[2C", "\x1b[D",
        "\x1b[5G", "\x1b[2d", "\x1b[2E", "\x1b[F", "\x1b[K", "\x1b[1K", "\x1b[2K", "\x1b[J",
        "\x1b[1J", "\x1b[2J", "\x1b[3J", "\x1b[2X", "\x1b[P", "\x1b[2@", "\x1b[L", "\x1b[2M",
        "\x1b[S", "\x1b[2T", "\x1b[3b", "\x1b[I", "\x1b[Z", "\x1b[2;4r", "\x1b[r", "\x1b[4h",
        "\x1b[4l", "\x1b[20h", "\x1b[20l", "\x1b[?7l", "\x1b[?7h", "\x1b[?6h", "\x1b[?6l",
        "\x1b[?1049h", "\x1b[?1049l", "\x1b[?47h", "\x1b[?47l", "\x1b[?2026h", "\x1b[?2026l",
        "\x1b[?25l", "\x1b[?25h", "\x1b[>4;2m", "\x1b[>1u", "\x1b[<u", "\x1b[ q", "\x1b[!p",
        "\x1b[6n", "\x1b[?6n", "\x1b[c", "\x1b[>c", "\x1b[18t", "\x1b[?1$p", "\x1b[1 2m",
        "\x1b[99999999999999A", "\x1b[1;2;3;4;5T", "\x1b[s", "\x1b[u", "\x1b[3g", "\x1b[x",
        "\x1b7", "\x1b8", "\x1bM", "\x1bD", "\x1bE", "\x1bH", "\x1bc", "\x1b(0", "\x1b(B",
        "\x1b)0", "\x0e", "\x0f", "\x1b#8", "\x1b=", "\x1b>", "\x1b%G", "\x1b\\", "\x1b",
        "\x1b]0;title\x07", "\x1b]2;t\x1b\\", "\x1b]7;file://h/tmp\x07", "\x1b]11;?\x07",
        "\x1bP1$r\x1b\\", "\x1b_apc\x1b\\", "\x1b[12", "\x1b]0;unfinished",
]  # fmt: skip
_sequences = st.sampled_from(SEQUENCES)
_pieces = st.lists(st.one_of(_text, _sequences), max_size=60)


def _state(screen: TerminalScreen, stream: TerminalStream, answers: list[str]) -> tuple:
    cells = tuple(
        tuple(screen.buffer[y][x] for x in range(screen.columns)) for y in range(screen.lines)
    )
    wrapped = tuple(getattr(screen.buffer[y], "wrapped", False) for y in range(screen.lines))
    cursor = screen.cursor
    return (
        cells,
        wrapped,
        (cursor.x, cursor.y, cursor.attrs, cursor.hidden),
        tuple(screen.scrollback),
        screen.scrollback.total_pushed,
        screen.last_graphic,
        screen._pending_zwj,
        frozenset(screen.mode),
        frozenset(screen.modes.private),
        screen.margins,
        screen.alternate,
        len(screen.savepoints),
        screen.title,
        screen.cwd,
        tuple(screen.kitty_keyboard_flags),
        screen.modify_other_keys,
        screen.cursor_style,
        tuple(sorted(screen.tabstops)),
        stream.unknown_sequences,
        stream._pending,
        tuple(answers),
    )


def _run(chunks: list[str], *, fast: bool, batch: bool, columns: int, rows: int) -> tuple:
    answers: list[str] = []
    screen, stream = make_screen_and_stream(
        columns, rows, respond=answers.append, scrollback=50, batch=batch, fast=fast
    )
    for chunk in chunks:
        stream.feed(chunk)
    return _state(screen, stream, answers)


def _split(text: str, cuts: list[int]) -> list[str]:
    bounds = [0, *sorted(min(cut, len(text)) for cut in cuts), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@settings(max_examples=1500, deadline=None)
@example(pieces=["ab", "\x1b[1 2m", "cd", "\x1b"], cuts=[], columns=10, rows=3, batch=True)
@example(pieces=["x\r\n"] * 6 + ["\x1b[2K", "y\r\n", "\x1b]0;t\x07"], cuts=[7], columns=5, rows=2,
         batch=True)  # fmt: skip
@given(
    pieces=_pieces,
    cuts=st.lists(st.integers(min_value=0, max_value=300), max_size=5),
    columns=st.integers(min_value=3, max_value=14),
    rows=st.integers(min_value=1, max_value=6),
    batch=st.booleans(),
)
def test_fast_path_leaves_what_the_token_path_leaves(pieces, cuts, columns, rows, batch):
    chunks = _split("".join(pieces), cuts)
    fast = _run(chunks, fast=True, batch=batch, columns=columns, rows=rows)
    slow = _run(chunks, fast=False, batch=batch, columns=columns, rows=rows)
    assert fast == slow


def _random_stream(rng: random.Random, size: int) -> str:
    """Long streams (several of the fast path's windows) of the same vocabulary."""
    words = ["word", "中文字", "🚀✅", "e\u0301", "a\u200d🚀", "x" * 90, "│ ⏺ ●"]
    return random_stream(
        rng,
        size,
        [
            (0.45, lambda: rng.choice(words)),
            (0.6, lambda: "\r\n"),
            (1.0, lambda: rng.choice(SEQUENCES)),
        ],
    )


@pytest.mark.parametrize("seed", range(12))
def test_long_streams_at_random_read_boundaries(seed: int) -> None:
    rng = random.Random(seed)
    text = _random_stream(rng, 60_000)
    cuts = sorted(rng.randrange(len(text)) for _ in range(rng.randint(0, 40)))
    columns, rows = rng.choice([(80, 24), (20, 5), (120, 40)])
    fast = _run(_split(text, cuts), fast=True, batch=True, columns=columns, rows=rows)
    slow = _run([text], fast=False, batch=True, columns=columns, rows=rows)
    assert fast == slow


def _corpus_outputs() -> list[tuple[str, int, int, str]]:
    out = []
    for cast in sorted(CORPUS.glob("*.cast")):
        lines = cast.read_text(encoding="utf-8").splitlines()
        header = json.loads(lines[0])
        events = [json.loads(line) for line in lines[1:] if line.strip()]
        text = "".join(data for _, kind, data in events if kind == "o")
        out.append((cast.stem, header["width"], header["height"], text))
    return out


@pytest.mark.parametrize("name,columns,rows,text", _corpus_outputs(), ids=lambda v: str(v)[:30])
def test_recorded_claude_code_sessions(name: str, columns: int, rows: int, text: str) -> None:
    rng = random.Random(name)
    cuts = sorted(rng.randrange(len(text) + 1) for _ in range(30))
    fast = _run(_split(text, cuts), fast=True, batch=True, columns=columns, rows=rows)
    slow = _run([text], fast=False, batch=True, columns=columns, rows=rows)
    assert fast == slow


def test_the_table_of_calls_stays_bounded() -> None:
    screen, stream = make_screen_and_stream(80, 24)
    stream.feed("".join(f"\x1b[{n};{n % 80}H\x1b[38;5;{n % 256}m" for n in range(3 * MAX_CALLS)))
    assert len(stream._calls) <= MAX_CALLS
    stream.feed("\x1b[" + "1;" * 5000 + "m\x1b[" + "9" * 6000 + "A")  # too long to keep
    assert len(stream._calls) <= MAX_CALLS
    assert all(len(key) <= 64 for key in stream._calls)
    assert (screen.cursor.y, screen.cursor.attrs.fg) == (0, "default")


class Immediate(TerminalScreen):
    """Every draw and erase applied at once (nothing kept back), as before `_writes`."""

    def draw(self, data: str) -> None:
        super().draw(data)
        self._row(self.cursor.y)

    def erase_in_line(self, how: int = 0, private: bool = False) -> None:
        super().erase_in_line(how, private)
        self._row(self.cursor.y)


_redraws = st.sampled_from(
    ["\x1b[2K", "\x1b[K", "\x1b[1K", "\x1b[1A", "\x1b[G", "\x1b[5G", "\x1b[2;1H", "\x1b[H",
     "\x1b[31m", "\x1b[0m", "\x1b[44m", "\r\n", "\x1b[?7l", "\x1b[?7h", "\x1b[4h", "\x1b[4l",
     "\x1b[2P", "\x1b[@", "\x1b[2J", "\x1b[L", "\x1b[M", "\x1bM", "\x1b[1;3r", "\x1b[r"]
)  # fmt: skip


@settings(max_examples=1000, deadline=None)
@given(
    pieces=st.lists(st.one_of(_text, _redraws), max_size=80),
    columns=st.integers(min_value=3, max_value=12),
    rows=st.integers(min_value=1, max_value=5),
    reads=st.lists(st.integers(min_value=0, max_value=400), max_size=4),
    resize=st.one_of(st.none(), st.tuples(st.integers(2, 6), st.integers(3, 14))),
)
def test_kept_back_draws_give_what_immediate_draws_give(pieces, columns, rows, reads, resize):
    """Draws kept back per row (and dropped when the row is erased or covered) against the same
    screen applying each draw at once; the screen is read between reads, then resized."""
    text = "".join(pieces)
    states = []
    for screen_class in (TerminalScreen, Immediate):
        screen = screen_class(columns, rows, scrollback=20)
        stream = TerminalStream(screen)
        seen = []
        for chunk in _split(text, reads):
            stream.feed(chunk)
            seen.append(screen.row_line(screen.cursor.y))
        if resize is not None:
            screen.resize(*resize)
        seen.append(tuple(screen.row_line(y) for y in range(screen.lines)))
        states.append((seen, _state(screen, stream, [])))
    assert states[0] == states[1]


def test_a_row_nobody_reads_keeps_a_bounded_number_of_draws() -> None:
    screen, stream = make_screen_and_stream(80, 24)
    stream.feed("\x1b[5;1H" + "abc\x1b[3D" * 10_000)
    assert all(len(writes) <= 64 for writes in screen._writes.values())
    assert screen.text_rows()[4] == "abc"
