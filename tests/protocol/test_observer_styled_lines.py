"""A generic agent's styled output read back by FinalLines (engine/protocol/screen_text.py).

Lines with SGR colours are kept in scrollback as styled records, not bare strings; each must
still be read once, in order, whole, and a wrapped one joined with its rest, whether the reader
takes them in one call or across many.
"""

from __future__ import annotations

import random

from semo.engine.protocol.screen_text import FinalLines
from semo.engine.terminal.stream import make_screen_and_stream


def styled(n: int, rng: random.Random) -> str:
    words = " ".join(f"\x1b[3{rng.randint(1, 6)}mw{n}x{i}\x1b[0m" for i in range(rng.randint(1, 9)))
    if n % 7 == 0:  # wider than the screen: it wraps
        words += " " + "\x1b[1m" + "z" * 50 + "\x1b[22m"
    return f"L{n:05d} {words}"


def plain_text(line: str) -> str:
    out, skip = [], False
    for char in line:
        if char == "\x1b":
            skip = True
        elif skip and char == "m":
            skip = False
        elif not skip:
            out.append(char)
    return "".join(out)


def test_styled_lines_are_read_once_in_order_and_wrapped_ones_whole() -> None:
    rng = random.Random(5)
    lines = [styled(n, rng) for n in range(3000)]
    expected = [plain_text(line) for line in lines]
    for cut in (1, 7, 100, 5000):  # lines fed between two reads
        screen, stream = make_screen_and_stream(40, 10)
        reader = FinalLines()
        got: list[str] = []
        for start in range(0, len(lines), cut):
            stream.feed("".join(line + "\r\n" for line in lines[start : start + cut]))
            got += reader.take(screen)
        assert got == expected, f"fed {cut} lines per read"


def test_a_styled_line_after_a_wrapped_plain_one_stays_its_own_line() -> None:
    screen, stream = make_screen_and_stream(20, 5)
    reader = FinalLines()
    text = "a" * 30 + "\r\n" + "\x1b[31mred\x1b[0m line\r\n" + "\r\n" * 8
    stream.feed(text)
    assert reader.take(screen)[:2] == ["a" * 30, "red line"]
