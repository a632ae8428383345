"""Helpers of test_fuzz_tmux that other test modules use too."""

from __future__ import annotations

import os
import random
import subprocess
import uuid
from pathlib import Path

from semo.engine.terminal.cell import BLANK
from semo.engine.terminal.screen import TerminalScreen
from semo.engine.terminal.stream import make_screen_and_stream
from tests.support.random_stream import random_stream

COLUMNS, ROWS = 30, 10


WORDS = ["word", "ab", "x" * 12, "中文字", "ｱｲ", "✅", "🚀🚀", "│ ⏺ ●", "한국어", "end"]


# What Ink (Claude Code), vim-likes and coloured output send. Not here, because semo and tmux
# differ on them in streams like these before any of the fast paths (found by this test with
# them in, on the code before issue 17 too): scroll margins with IL/DL/SU/SD/RI, ICH/DCH over
# wide characters.
SEQUENCES = [
    "\r\n", "\r", "\n", "\x08", "\x1b[H", "\x1b[K", "\x1b[1K", "\x1b[2K", "\x1b[J",
    "\x1b[1J", "\x1b[A", "\x1b[2B", "\x1b[3C", "\x1b[D", "\x1b[G", "\x1b[12G", "\x1b[3d",
    "\x1b[2X", "\x1b[0m", "\x1b[m", "\x1b[1m", "\x1b[22m", "\x1b[31m", "\x1b[44m", "\x1b[7m",
    "\x1b[38;5;208m", "\x1b[48;2;10;20;30m", "\x1b[39;49m", "\x1b[2m", "\x1b[?2026h",
    "\x1b[?2026l", "\x1b[?25l", "\x1b[?25h",
]  # fmt: skip


def fuzz_stream(rng: random.Random, size: int) -> str:
    return random_stream(
        rng,
        size,
        [
            (0.35, lambda: rng.choice(WORDS)),
            (0.45, lambda: f"\x1b[{rng.randint(1, ROWS + 2)};{rng.randint(1, COLUMNS + 3)}H"),
            (1.0, lambda: rng.choice(SEQUENCES)),
        ],
    )


def tmux_screen(path: Path, escapes: bool) -> tuple[list[str], tuple[int, int]]:
    sock = str(path.parent / f"tmux-{uuid.uuid4().hex[:8]}")  # in the test's folder: removed
    env = {**os.environ, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
    env.pop("TMUX", None)
    tmux = ["tmux", "-S", sock, "-f", os.devnull]
    script = f"stty -opost; cat {path}; tmux -S {sock} wait-for -S done; exec sleep 600"
    try:
        subprocess.run(
            [*tmux, "new-session", "-d", "-x", str(COLUMNS), "-y", str(ROWS), "sh", "-c",
             script, ";", "wait-for", "done"],
            check=True, env=env, timeout=60,
        )  # fmt: skip
        capture = [*tmux, "capture-pane", "-p", *(["-e", "-N"] if escapes else [])]
        out = subprocess.run(capture, check=True, env=env, capture_output=True, text=True)
        cursor = subprocess.run(
            [*tmux, "display-message", "-p", "#{cursor_x},#{cursor_y}"],
            check=True,
            env=env,
            capture_output=True,
            text=True,
        ).stdout.strip()
    finally:
        subprocess.run([*tmux, "kill-server"], env=env, check=False, capture_output=True)
    x, y = cursor.split(",")
    return out.stdout.split("\n")[:ROWS], (int(x), int(y))


def screen_cells(screen: TerminalScreen) -> list[list[tuple[str, tuple[object, ...]]]]:
    """Each row's characters with their style; blanks without theirs. tmux clears cells with
    the background colour alone, semo (pyte) with all the cursor's attributes, and erased cells
    with a background read back differently through capture-pane -e (known differences, on the
    code before issue 17 too, not looked into here): only what a glyph looks like is compared."""
    rows = []
    for y in range(ROWS):
        line = screen.row_line(y)
        styles: list[tuple[object, ...]] = [()] * len(line.text)
        for run in line.runs:
            for x in range(run.start, min(run.end, len(line.text))):
                styles[x] = () if run.style[1:] == BLANK[1:] else tuple(run.style[1:])
        cells = [
            (char, ("default",) if char == " " else style)
            for char, style in zip(line.text, styles, strict=True)
        ]
        while cells and cells[-1] == (" ", ("default",)):
            cells.pop()
        rows.append([(char, () if style == ("default",) else style) for char, style in cells])
    return rows


def tmux_cells(rows: list[str]) -> list[list[tuple[str, tuple[object, ...]]]]:
    """capture-pane -e rows read back through a fresh screen."""
    screen, stream = make_screen_and_stream(COLUMNS, ROWS)
    stream.feed("\r\n".join(rows))
    return screen_cells(screen)
