"""Reflow on resize without tmux: invariants, the batch path, bounds and hostile sizes.
The comparisons with tmux are in test_reflow_tmux.py."""

from __future__ import annotations

import random

from semo.engine.terminal.reflow import text_width
from semo.engine.terminal.screen import TerminalScreen
from semo.engine.terminal.stream import TerminalStream

CRLF = "\r\n"


def screen_with(text: str, cols: int, rows: int, **kwargs: object) -> TerminalScreen:
    screen = TerminalScreen(cols, rows, **kwargs)  # type: ignore[arg-type]
    TerminalStream(screen).feed(text)
    return screen


def everything(screen: TerminalScreen) -> list[str]:
    return [line.text.rstrip(" ") for line in screen.scrollback] + screen.text_rows()


def logical_lines(screen: TerminalScreen) -> list[str]:
    """History and screen with wrapped rows joined (trailing blanks of each line dropped)."""
    out: list[str] = []
    parts: list[str] = []
    rows = list(screen.scrollback) + [screen.row_line(y) for y in range(screen.lines)]
    for line in rows:
        parts.append(line.text)
        if not line.wrapped:
            out.append("".join(parts).rstrip(" "))
            parts = []
    return out


def test_a_wrapped_line_is_joined_and_wrapped_again() -> None:
    screen = screen_with("x" * 25 + CRLF + "$ ", cols=10, rows=6)
    assert screen.text_rows()[:4] == ["x" * 10, "x" * 10, "x" * 5, "$"]
    screen.resize(6, 30)
    assert screen.text_rows()[:2] == ["x" * 25, "$"]
    assert (screen.cursor.x, screen.cursor.y) == (2, 1)
    screen.resize(6, 7)  # 9 rows now: as in tmux the top ones go up, blank rows stay below
    assert everything(screen)[:5] == ["x" * 7, "x" * 7, "x" * 7, "xxxx", "$"]
    assert len(screen.scrollback) == 3
    assert (screen.cursor.x, screen.cursor.y) == (2, 1)


def test_hard_line_breaks_stay() -> None:
    screen = screen_with("abc" + CRLF + "def" + CRLF, cols=3, rows=4)
    screen.resize(4, 20)
    assert screen.text_rows()[:2] == ["abc", "def"]


def test_styles_go_with_their_characters() -> None:
    screen = screen_with("\x1b[31m" + "r" * 8 + "\x1b[42m" + "g" * 8 + "\x1b[0m", cols=5, rows=6)
    screen.resize(6, 16)
    line = screen.row_line(0)
    assert line.text == "r" * 8 + "g" * 8
    assert [(run.start, run.end, run.style.fg, run.style.bg) for run in line.runs] == [
        (0, 8, "red", "default"),
        (8, 16, "red", "green"),
    ]


def test_a_wide_character_is_never_split() -> None:
    screen = screen_with("a" + "中" * 10, cols=21, rows=4)
    for cols in (4, 5, 6, 3, 2):
        screen.resize(8, cols)
        for line in list(screen.scrollback) + [screen.row_line(y) for y in range(screen.lines)]:
            assert text_width(line.text.rstrip(" ")) <= cols
        assert "".join(logical_lines(screen)) == "a" + "中" * 10


def test_one_column_with_wide_characters_ends() -> None:
    """A wide character cannot fit one column: it gets a row of its own (as tmux: it overflows
    that row) and the reflow terminates."""
    screen = screen_with("中文x", cols=10, rows=3)
    screen.resize(3, 1)
    assert everything(screen)[:3] == ["中", "文", "x"]
    screen.resize(3, 10)
    assert screen.text_rows()[0] == "中文x"


def test_without_scrollback_rows_pushed_up_are_gone() -> None:
    screen = screen_with("y" * 30 + CRLF + "$ ", cols=10, rows=4, scrollback=0)
    screen.resize(4, 5)
    assert len(screen.scrollback) == 0
    assert screen.text_rows() == ["yyyyy", "yyyyy", "yyyyy", "$"]
    assert (screen.cursor.x, screen.cursor.y) == (2, 3)


def test_the_batch_path_and_the_cell_path_reflow_alike() -> None:
    """Rows the plain-output batch left as segments reflow as cell rows do."""
    rng = random.Random(5)
    text = CRLF.join(
        "".join(rng.choice("abc de") for _ in range(rng.randrange(0, 90))).rstrip(" ")
        for _ in range(40)
    )
    screens = []
    for batch in (True, False):
        screen = TerminalScreen(30, 8, scrollback=100)
        TerminalStream(screen, batch=batch).feed(text)
        screen.resize(11, 47)
        screen.resize(7, 13)
        screens.append(screen)
    fast, slow = screens
    assert everything(fast) == everything(slow)
    assert [line.wrapped for line in fast.scrollback] == [line.wrapped for line in slow.scrollback]
    assert (fast.cursor.x, fast.cursor.y) == (slow.cursor.x, slow.cursor.y)


def test_the_cursor_row_keeps_its_absolute_position() -> None:
    """Readers of new output mark `total_pushed + cursor row`: a resize keeps it the row the
    cursor is on, so output after the resize is new and output before it is not."""
    screen = screen_with(CRLF.join("n" * 50 for _ in range(30)) + CRLF + "$ ", cols=20, rows=6)
    before = screen.scrollback.total_pushed + screen.cursor.y
    rewrites = screen.scrollback.rewrites
    screen.resize(9, 70)
    assert screen.scrollback.total_pushed + screen.cursor.y == before
    assert screen.scrollback.rewrites == rewrites + 1


def test_thousands_of_resizes_stay_bounded() -> None:
    """Hostile sizes, many times over a full scrollback: no error, scrollback within its limit,
    every row within its width, the cursor on the screen, and the text itself intact."""
    rng = random.Random(9)
    lines = [
        f"\x1b[3{n % 8}m{n:04}" + "".join(rng.choice("ab 中🚀") for _ in range(rng.randrange(120)))
        for n in range(400)
    ]
    screen = TerminalScreen(80, 24, scrollback=300)
    TerminalStream(screen).feed(CRLF.join(line.rstrip(" ") for line in lines) + "\x1b[0m")
    for _ in range(2000):
        cols, rows = rng.choice([(1, 1), (2, 1), (1, 50), (300, 2), (3, 200)] + [(0, 0)] * 5)
        if cols == 0:
            cols, rows = rng.randrange(1, 160), rng.randrange(1, 80)
        screen.resize(rows, cols)
        assert len(screen.scrollback) <= 300
        assert 0 <= screen.cursor.y < rows and 0 <= screen.cursor.x <= cols
        for y in range(rows):
            assert text_width(screen.row_line(y).text.rstrip(" ")) <= max(cols, 2)
    screen.resize(60, 200)
    # nothing invented and no two lines run together: each logical line left is a piece of
    # one line written (the bound cuts the oldest; tmux's quirks cut some before a wide
    # character and move the cursor up, and shrinking then drops the rows below the cursor)
    written = [line.rstrip(" ").split("m", 1)[1].replace(" ", "") for line in lines]
    left = [line.replace(" ", "") for line in logical_lines(screen) if line.strip()]
    assert left
    for line in left:
        assert any(line in original for original in written), line


def test_a_64_kib_line_at_one_column_is_bounded() -> None:
    screen = screen_with("z" * 65536 + CRLF + "$ ", cols=80, rows=24, scrollback=1000)
    screen.resize(24, 1)
    assert len(screen.scrollback) == 1000
    screen.resize(24, 200)
    assert screen.text_rows()[-24:].count("") >= 1
    assert screen.row_line(screen.cursor.y).text.startswith("$")


HOSTILE = [*"ab \t\r\n", "\u200d", "\u0301", "\ufe0f", "中", "🚀", "👩", "💻", "\U0001f1fa"] + [
    f"\x1b{s}"
    for s in (
        "[2K", "[K", "[1K", "[J", "[2J", "[3J", "[H", "[5;3H", "[31m", "[0m", "[?1049h",
        "[?1049l", "[?47h", "[?47l", "[?7l", "[?7h", "[2;5r", "[r", "[3S", "[2T", "[4@", "[3P",
        "[2L", "[2M", "(0qqq\x1b(B", "7", "8", "D", "M", "[10C", "[5D", "[4A", "[4B", "[4b",
    )
]  # fmt: skip


def test_hostile_output_between_resizes_never_breaks_the_screen() -> None:
    """Random text, joiners, wide characters, erases, scroll regions, alternate screens and
    autowrap switches between random resizes (1x1 up to 60x60, scrollback 0/5/100): no error,
    the cursor on the screen, the scrollback within its limit."""
    for seed in range(80):
        rng = random.Random(seed)
        screen = TerminalScreen(
            rng.randrange(1, 40), rng.randrange(1, 20), scrollback=rng.choice([0, 5, 100])
        )
        stream = TerminalStream(screen)
        for _ in range(40):
            stream.feed("".join(rng.choice(HOSTILE) for _ in range(rng.randrange(0, 80))))
            screen.resize(rng.randrange(1, 60), rng.randrange(1, 60))
            assert 0 <= screen.cursor.y < screen.lines
            assert 0 <= screen.cursor.x <= screen.columns
            assert len(screen.scrollback) <= screen.scrollback.limit
            screen.text_rows()


def test_every_drawing_path_marks_the_rows_it_wraps() -> None:
    """The same output fed whole (batch path, inline draws), without the batch path, and one
    character at a time (the per-character paths) leaves the same wrap flags, so it reflows
    the same."""
    rng = random.Random(4)
    text = CRLF.join(
        "".join(rng.choice(["a", "b", " ", "中", "🚀", "é", "👩\u200d💻", "\x1b[32m", "\x1b[0m"])
                for _ in range(rng.randrange(0, 70)))
        for _ in range(30)
    )  # fmt: skip
    results = []
    for batch, step in ((True, len(text)), (False, len(text)), (True, 1), (False, 7)):
        screen = TerminalScreen(17, 6, scrollback=200)
        stream = TerminalStream(screen, batch=batch)
        for start in range(0, len(text), step):
            stream.feed(text[start : start + step])
        rows = list(screen.scrollback) + [screen.row_line(y) for y in range(screen.lines)]
        flags = [line.wrapped for line in rows]
        screen.resize(9, 31)
        results.append((flags, everything(screen), screen.cursor.x, screen.cursor.y))
    assert any(results[0][0])
    assert all(result == results[0] for result in results[1:])
