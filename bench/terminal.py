"""Terminal ingest throughput: semo's screen beside plain pyte, on the same bytes, same run.

    python bench/terminal.py [--mb 4] [--repeat 5] [--cols 120] [--rows 40]

Four streams: plain scrolling text (a log being cat'ed), the same with lines of up to 300
characters that wrap at the margin, coloured output (SGR every few words,
like `ls --color` or `git log --color`), and cursor-addressed redraws (Ink-style: erase the
previous frame line by line, draw the next one, as Claude Code does). Each is fed in 64 KiB
chunks (one PTY read each) through an incremental UTF-8 decoder. Prints MB/s medians.
"""

from __future__ import annotations

import argparse
import codecs
import random
import statistics
import time
from collections.abc import Callable

import pyte

from engine.terminal.stream import make_screen_and_stream

CHUNK = 65536
WORDS = "the quick brown fox jumps over lazy dog semo agent session worktree claude".split()


def plain_stream(size: int, rng: random.Random) -> bytes:
    out: list[str] = []
    total = 0
    n = 0
    while total < size:
        line = f"{n:08d} INFO " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 14)))
        out.append(line + "\r\n")
        total += len(line) + 2
        n += 1
    return "".join(out).encode()


def wrapping_stream(size: int, rng: random.Random) -> bytes:
    """Plain lines of 20 to 300 characters: most are wider than the screen and wrap."""
    out: list[str] = []
    total = 0
    while total < size:
        words: list[str] = []
        length = rng.randint(20, 300)
        while sum(len(w) + 1 for w in words) < length:
            words.append(rng.choice(WORDS))
        line = " ".join(words) + "\r\n"
        out.append(line)
        total += len(line)
    return "".join(out).encode()


def coloured_stream(size: int, rng: random.Random) -> bytes:
    out: list[str] = []
    total = 0
    while total < size:
        parts = []
        for _ in range(rng.randint(3, 10)):
            colour = rng.choice(["31", "32", "1;34", "38;5;208", "38;2;10;200;30", "0"])
            parts.append(f"\x1b[{colour}m{rng.choice(WORDS)}\x1b[0m")
        line = " ".join(parts) + "\r\n"
        out.append(line)
        total += len(line)
    return "".join(out).encode()


def redraw_stream(size: int, rng: random.Random, rows: int = 12) -> bytes:
    out: list[str] = []
    total = 0
    spinner = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
    frame_no = 0
    while total < size:
        frame = []
        if frame_no:
            frame.append("\x1b[2K\x1b[1A" * (rows - 1) + "\x1b[2K\x1b[G")
        for r in range(rows):
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 9)))
            if r == rows - 1:
                frame.append(f"\x1b[38;2;215;119;87m{spinner[frame_no % 10]}\x1b[39m {words}")
            else:
                frame.append(f"\x1b[1m●\x1b[22m {words}\r\n")
        text = "".join(frame)
        out.append(text)
        total += len(text.encode())
        frame_no += 1
    return "".join(out).encode()


def feed_semo(data: bytes, cols: int, rows: int) -> float:
    _screen, stream = make_screen_and_stream(cols, rows)
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    start = time.perf_counter()
    for offset in range(0, len(data), CHUNK):
        stream.feed(decoder.decode(data[offset : offset + CHUNK]))
    return time.perf_counter() - start


def feed_pyte(data: bytes, cols: int, rows: int) -> float:
    screen = pyte.Screen(cols, rows)
    stream = pyte.ByteStream(screen)
    start = time.perf_counter()
    for offset in range(0, len(data), CHUNK):
        stream.feed(data[offset : offset + CHUNK])
    return time.perf_counter() - start


def feed_pyte_history(data: bytes, cols: int, rows: int) -> float:
    screen = pyte.HistoryScreen(cols, rows, history=10_000)
    stream = pyte.ByteStream(screen)
    start = time.perf_counter()
    for offset in range(0, len(data), CHUNK):
        stream.feed(data[offset : offset + CHUNK])
    return time.perf_counter() - start


def median_mbps(fn: Callable[[bytes, int, int], float], data: bytes, args, repeat: int) -> float:
    times = [fn(data, args.cols, args.rows) for _ in range(repeat)]
    return len(data) / statistics.median(times) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=4.0, help="size of each stream (MB)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cols", type=int, default=120)
    parser.add_argument("--rows", type=int, default=40)
    args = parser.parse_args()
    rng = random.Random(7)
    size = int(args.mb * 1e6)
    streams = {
        "plain scrolling": plain_stream(size, rng),
        "plain, lines that wrap": wrapping_stream(size, rng),
        "coloured (SGR)": coloured_stream(size, rng),
        "cursor-addressed redraw": redraw_stream(size, rng),
    }
    print(f"screen {args.cols}x{args.rows}, {args.mb} MB per stream, median of {args.repeat}")
    print(f"{'stream':<26}{'semo MB/s':>12}{'pyte MB/s':>12}{'ratio':>8}")
    for name, data in streams.items():
        ours = median_mbps(feed_semo, data, args, args.repeat)
        theirs = median_mbps(feed_pyte, data, args, max(1, args.repeat // 2))
        print(f"{name:<26}{ours:>12.2f}{theirs:>12.2f}{ours / theirs:>7.1f}x")
    plain = streams["plain scrolling"][: len(streams["plain scrolling"]) // 4]
    history = median_mbps(feed_pyte_history, plain, args, 1)
    ours = median_mbps(feed_semo, plain, args, args.repeat)
    print(
        f"{'plain, 10k-line history':<26}{ours:>12.2f}{history:>12.2f}{ours / history:>7.1f}x"
        "  (pyte HistoryScreen; semo's scrollback is always on)"
    )


if __name__ == "__main__":
    main()
