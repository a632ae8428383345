"""Hostile code points whose width terminals and tables disagree on (issue 21, item 8).

U+3164 HANGUL FILLER is 0 cells for Rich and for the `wcwidth` package, 2 in tmux and most
terminals: an agent that prints it (in a pane, or in a question in the inbox) shifted every
cell after it. The terminal model and the console's Rich now measure with one table
(engine/terminal/width_table.py, glibc's as tmux uses it):

- each hostile code point, printed between two letters by a real program, puts the cursor where
  tmux 3.3a puts it, in the terminal model as in tmux;
- for every code point the console may draw, Rich in the console process measures what the
  model measures;
- a bash agent printing them in a real `semo console` in tmux: the pane's row holds every
  character and ends where the other rows end (its right border in the same column).
"""

from __future__ import annotations

import re
import sys
import unicodedata

import pytest
from rich.cells import get_character_cell_size

import semo.console.app  # noqa: F401 (the console: Rich measures with the model's table)
from semo.engine.terminal.stream import make_screen_and_stream
from semo.engine.terminal.width import char_width
from tests.control.office import Console, consoles, office_fixture
from tests.support.tmux import TmuxServer
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.tmux, pytest.mark.timeout(240)]

office = office_fixture()

#: fillers and blanks (Hangul, halfwidth), joiners and marks, spacing marks, a flag half, emoji
HOSTILE = [
    "\u3164",  # HANGUL FILLER: Rich/wcwidth 0, tmux 2
    "\uffa0",  # HALFWIDTH HANGUL FILLER: 0 / 1
    "\u115f",  # HANGUL CHOSEONG FILLER
    "\u1160",  # HANGUL JUNGSEONG FILLER
    "\u093e",  # DEVANAGARI VOWEL SIGN AA (spacing mark): 0 / 1
    "\u0f3e",  # TIBETAN SIGN YAR TSHES
    "\u200b",  # ZERO WIDTH SPACE
    "\u00ad",  # SOFT HYPHEN
    "\u2800",  # BRAILLE BLANK
    "\u0301",  # COMBINING ACUTE
    "\U0001f1e6",  # REGIONAL INDICATOR A
    "\u4e00",  # CJK
    "\U0001f600",  # emoji
]


def tmux_cursor(text: str) -> int:
    """Where tmux 3.3a leaves the cursor after a program prints `text` at the row's start."""
    server = TmuxServer()
    try:
        program = [sys.executable, "-c", f"import sys,time; sys.stdout.write({text!r}); "
                   "sys.stdout.flush(); time.sleep(30)"]  # fmt: skip
        env = {"LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"}
        server.start(program, cols=40, rows=3, env=env, cwd=None, term="xterm-256color")
        _rows, cursor, _dead = wait_until(
            server.state,
            f"tmux to draw {text!r}",
            10,
            until=lambda state: bool(state[0]) and state[0][0].rstrip().endswith("Y"),
            interval=0.02,
        )
        return int(cursor.split(",")[0])
    finally:
        server.kill()


@pytest.mark.parametrize("char", HOSTILE, ids=[f"U+{ord(c):04X}" for c in HOSTILE])
def test_the_model_puts_the_cursor_where_tmux_does(char: str) -> None:
    text = f"X{char}Y"
    screen, stream = make_screen_and_stream(40, 3)
    stream.feed(text)
    assert screen.cursor.x == tmux_cursor(text), unicodedata.name(char, "?")


def test_rich_in_the_console_measures_every_code_point_as_the_model() -> None:
    differ = [
        hex(code)
        for code in range(0xA0, 0x110000)
        if not 0xD800 <= code < 0xE000
        and get_character_cell_size(chr(code)) != max(char_width(chr(code)), 0)
    ]
    assert differ == []
    assert get_character_cell_size("\u3164") == 2


def cells(text: str) -> int:
    return sum(max(char_width(char), 0) for char in text)


def test_a_pane_keeps_its_rows_whole_around_hostile_code_points(office: object) -> None:
    """The console's pane of a bash agent that prints the hostile code points: in the tmux the
    console runs in, the row is as wide as every other row (before, U+3164 was 0 cells for the
    model and Rich and 2 for tmux: the row ran 2 cells past its border per filler)."""
    line = "<" + "".join(HOSTILE) + ">"
    escaped = "".join(c if c.isascii() else f"\\U{ord(c):08x}" for c in line)
    with consoles() as opened:
        shown = Console(office, "console", cols=120, rows=32)  # type: ignore[arg-type]
        opened.append(shown)
        shown.wait(lambda s: re.search(r"│A\s+(#\d+\s+)?ready", s) is not None, "agent A")
        shown.click(80, 5)  # into A's pane
        shown.type(f"printf '{escaped}\\n'\r")
        screen = shown.wait(lambda s: "<" + HOSTILE[0] in s, "the printed line")
    rows = screen.splitlines()
    [printed] = [row for row in rows if "<" + HOSTILE[0] in row]
    assert line in printed, printed  # every character, the closing one too
    bordered = [row for row in rows if row.endswith("│") and row.count("│") >= 3]
    assert printed in bordered and len(bordered) > 5
    assert {cells(row) for row in bordered} == {120}, [r for r in bordered if cells(r) != 120]
