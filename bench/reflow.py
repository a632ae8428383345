"""What a resize costs with a full scrollback: semo's reflow against tmux 3.3a's.

    .venv/bin/python bench/reflow.py [--lines 10000] [--resizes 20]

For each kind of content (plain lines of 0-200 characters, the same coloured, CJK and emoji)
a 80x24 screen with a full scrollback is resized through the same widths (narrower and wider,
so every wrapped line is rejoined or split each time). Columns, per resize, median and max:

- semo reflow: `TerminalScreen.resize` (semo/engine/terminal/reflow.py), CPU time of this process
  (the machine is shared: wall time would count the other processes);
- semo cut: the same screen resized as before the reflow (rows cut, scrollback untouched), the
  baseline measured in the same run;
- tmux: `tmux resize-window` on a pane holding the same output (history-limit = --lines); the
  command returns once tmux has reflowed (wall time: tmux is another process). `tmux idle` is
  the same command on an empty pane (the round trip alone).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from semo.engine.terminal.screen import TerminalScreen
from semo.engine.terminal.stream import TerminalStream
from tests.terminal.reflow_pair import TmuxPane

WIDTHS = [120, 60, 100, 47, 80, 133, 71, 90]


def content(kind: str, lines: int) -> str:
    rng = random.Random(7)
    alphabet = {"plain": "abcdefgh ijk", "coloured": "abcdefgh ijk", "cjk": "ab 中文字🚀é"}[kind]
    out = []
    for n in range(lines):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 200))).rstrip(" ")
        if kind == "coloured":
            text = f"\x1b[3{n % 8}m{text[:60]}\x1b[1;4{n % 8}m{text[60:]}\x1b[0m"
        out.append(f"{n:05} {text}")
    return "\r\n".join(out) + "\r\n$ "


def timed(
    resize: Callable[[int, int], None], count: int, clock: Callable[[], float]
) -> list[float]:
    times = []
    for n in range(count):
        start = clock()
        resize(WIDTHS[n % len(WIDTHS)], 24)
        times.append(clock() - start)
    return times


def semo(data: str, lines: int, count: int, *, cut: bool) -> list[float]:
    screen = TerminalScreen(80, 24, scrollback=lines)
    TerminalStream(screen).feed(data)
    if cut:
        screen._reflow_to = screen._cut_to  # type: ignore[method-assign]
    return timed(lambda cols, rows: screen.resize(rows, cols), count, time.process_time)


def tmux(data: str, lines: int, count: int) -> list[float]:
    pane = TmuxPane(80, 24, lines)
    try:
        if data:
            pane.feed(data)

        def resize(cols: int, rows: int) -> None:
            pane.server("resize-window", "-t", "rf", "-x", str(cols), "-y", str(rows))

        return timed(resize, count, time.perf_counter)
    finally:
        pane.close()


def row(name: str, times: list[float]) -> str:
    median, worst = statistics.median(times) * 1000, max(times) * 1000
    return f"{name:<14} {median:9.2f} {worst:9.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--resizes", type=int, default=20)
    args = parser.parse_args()
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}  load {os.getloadavg()}")
    print(f"scrollback {args.lines} lines, {args.resizes} resizes, widths {WIDTHS}, 24 rows")
    with tempfile.TemporaryDirectory():
        idle = tmux("", args.lines, args.resizes)
        for kind in ("plain", "coloured", "cjk"):
            data = content(kind, args.lines)
            print(f"\n{kind:<14} {'median ms':>9} {'max ms':>9}")
            print(row("semo reflow", semo(data, args.lines, args.resizes, cut=False)))
            print(row("semo cut", semo(data, args.lines, args.resizes, cut=True)))
            print(row("tmux", tmux(data, args.lines, args.resizes)))
            print(row("tmux idle", idle))
    print(f"\nload after {os.getloadavg()}")


if __name__ == "__main__":
    main()
