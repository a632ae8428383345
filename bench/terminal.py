"""Terminal ingest throughput: semo's screen beside plain pyte and tmux, same bytes, same run.

    python bench/terminal.py [--mb 4] [--repeat 5] [--cols 120] [--rows 40] [--pty] [--agent]
                             [--no-pyte] [--only a,b]
    python bench/terminal.py --before REF [--mb 2] [--only a,b]

Streams: plain scrolling text (a log being cat'ed), the same with lines of up to 300 characters
that wrap at the margin, coloured output (SGR every few words, like `ls --color`), highlighted
code (an SGR every token), a vim-like TUI (cursor-addressed rows), cursor-addressed redraws
(Ink-style: erase the previous frame line by line, draw the next one, as Claude Code does), the
same with CJK and emoji, and the recorded Claude Code sessions of tests/corpus.

Screen alone: each stream is fed in 64 KiB chunks (one PTY read each) through an incremental
UTF-8 decoder into semo's screen and into plain pyte (`pyte.Screen` + `pyte.ByteStream`). tmux:
a detached tmux 3.3a pane (same size, history-limit 10000) runs `cat` of the stream's file; the
time is from the pane's start to `cat` having written everything and tmux having answered
(`wait-for`), minus the same with an empty file. With --pty, semo too reads `cat` through a
real PTY (`TerminalSession`), timed from spawn to exit; with --agent, a semo agent session
(`AgentSession`, claude profile: screen + observer, what every agent runs) the same way.
The file `cat` writes has the streams' CR LFs as LFs (`as_written`): the PTY turns them back
into CR LF, so tmux and semo through a PTY receive exactly the bytes the screen alone is fed.
Prints MB/s medians.
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pyte

from semo.engine.terminal.session import TerminalSession
from semo.engine.terminal.stream import make_screen_and_stream

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


def ink_frames(size: int, rows: int, row: Callable[[int, int], str]) -> bytes:
    """Ink-style redraws to `size` bytes: each frame after the first erases the last one line
    by line, then writes `rows` rows; `row(frame_no, r)` is row r of frame frame_no."""
    out: list[str] = []
    total = 0
    frame_no = 0
    while total < size:
        frame = []
        if frame_no:
            frame.append("\x1b[2K\x1b[1A" * (rows - 1) + "\x1b[2K\x1b[G")
        frame.extend(row(frame_no, r) for r in range(rows))
        text = "".join(frame)
        out.append(text)
        total += len(text.encode())
        frame_no += 1
    return "".join(out).encode()


def redraw_stream(size: int, rng: random.Random, rows: int = 12) -> bytes:
    spinner = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"

    def row(frame_no: int, r: int) -> str:
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 9)))
        if r == rows - 1:
            return f"\x1b[38;2;215;119;87m{spinner[frame_no % 10]}\x1b[39m {words}"
        return f"\x1b[1m●\x1b[22m {words}\r\n"

    return ink_frames(size, rows, row)


def highlighted_stream(size: int, rng: random.Random) -> bytes:
    """Syntax-highlighted code (bat / delta style): a truecolor SGR around every token."""
    out: list[str] = []
    total = 0
    palette = ["38;2;249;38;114", "38;2;166;226;46", "38;2;230;219;116", "38;2;102;217;239"]
    n = 0
    while total < size:
        tokens = [f"\x1b[38;5;242m{n:5d}\x1b[0m \x1b[38;5;238m│\x1b[0m "]
        for _ in range(rng.randint(2, 9)):
            tokens.append(f"\x1b[{rng.choice(palette)}m{rng.choice(WORDS)}\x1b[0m")
            tokens.append(rng.choice([" ", "(", ", ", ".", " = "]))
        line = "".join(tokens) + "\r\n"
        out.append(line)
        total += len(line)
        n += 1
    return "".join(out).encode()


def vim_stream(size: int, rng: random.Random, rows: int = 40, cols: int = 120) -> bytes:
    """A vim-like TUI: scroll a buffer by redrawing every row with CUP, EL and a few SGRs."""
    out: list[str] = []
    total = 0
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))) for _ in range(500)]
    top = 0
    while total < size:
        frame = ["\x1b[?25l"]
        for y in range(rows - 1):
            text = lines[(top + y) % len(lines)]
            frame.append(f"\x1b[{y + 1};1H\x1b[33m{top + y + 1:4d} \x1b[m{text[: cols - 6]}\x1b[K")
        frame.append(f"\x1b[{rows};1H\x1b[1m-- INSERT --\x1b[m\x1b[K\x1b[{rows};100H{top},1")
        frame.append(f"\x1b[{rng.randint(1, rows - 1)};{rng.randint(6, 40)}H\x1b[?25h")
        text = "".join(frame)
        out.append(text)
        total += len(text)
        top += 1
    return "".join(out).encode()


def wide_redraw_stream(size: int, rng: random.Random, rows: int = 12) -> bytes:
    """Claude-Code-like Ink redraws with CJK text and emoji (some with ZWJ and VS16)."""
    cjk = "中文字符测试项目代码审查完成安装依赖"
    emoji = ["✅", "🚀", "🔍", "📦", "⚠️", "👨‍💻", "🧪", "✨"]

    def row(frame_no: int, r: int) -> str:
        parts = []
        for _ in range(rng.randint(2, 7)):
            pick = rng.random()
            if pick < 0.4:
                start = rng.randrange(len(cjk) - 4)
                parts.append(cjk[start : start + rng.randint(2, 4)])
            elif pick < 0.6:
                parts.append(rng.choice(emoji))
            else:
                parts.append(rng.choice(WORDS))
        words = " ".join(parts)
        if r == rows - 1:
            return f"\x1b[38;2;215;119;87m✻\x1b[39m {words} \x1b[2m(esc to interrupt)\x1b[22m"
        return f"\x1b[1m⏺\x1b[22m {words}\r\n"

    return ink_frames(size, rows, row)


def corpus_stream(size: int, rng: random.Random) -> bytes:
    """The output of the recorded Claude Code sessions in tests/corpus, repeated to `size`."""
    outputs: list[str] = []
    for cast in sorted((Path(__file__).parent.parent / "tests" / "corpus").glob("*.cast")):
        lines = cast.read_text(encoding="utf-8").splitlines()[1:]
        events = [json.loads(line) for line in lines if line.strip()]
        outputs.append("".join(data for _, kind, data in events if kind == "o"))
    whole = "".join(f"\x1bc{text}" for text in outputs).encode()
    return (whole * (size // max(len(whole), 1) + 1))[:size]


def as_written(data: bytes) -> bytes:
    """What a program writes for a terminal to receive `data` through a PTY: the PTY's output
    processing (ONLCR, on by default and kept by Node's raw mode) turns each LF into CR LF, so
    the streams' CR LFs are written as LFs (no stream has a lone LF). Writing the CR LFs as
    they are would hand the terminal CR CR LF instead, a different stream (Ink redraws cost
    semo's screen 1.6x more that way)."""
    return data.replace(b"\r\n", b"\n")


def feed_semo(data: bytes, cols: int, rows: int) -> float:
    screen, stream = make_screen_and_stream(cols, rows)
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    start = time.perf_counter()
    for offset in range(0, len(data), CHUNK):
        stream.feed(decoder.decode(data[offset : offset + CHUNK]))
    screen.text_rows()  # whatever the screen kept back for its readers is paid for here
    return time.perf_counter() - start


def feed_pyte(data: bytes, cols: int, rows: int) -> float:
    screen = pyte.Screen(cols, rows)
    stream = pyte.ByteStream(screen)
    start = time.perf_counter()
    for offset in range(0, len(data), CHUNK):
        stream.feed(data[offset : offset + CHUNK])
    return time.perf_counter() - start


def tmux_cat(path: Path, cols: int, rows: int) -> float:
    """Seconds for a detached tmux pane to take in `cat path` (spawn to wait-for answered)."""
    sock = f"semo-bench-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
    env.pop("TMUX", None)
    tmux = ["tmux", "-L", sock, "-f", os.devnull]
    script = f"cat {path}; tmux -L {sock} wait-for -S done"
    start = time.perf_counter()
    subprocess.run(
        [*tmux, "start-server", ";", "set", "-g", "history-limit", "10000", ";",
         "set", "-g", "remain-on-exit", "on", ";",
         "new-session", "-d", "-x", str(cols), "-y", str(rows), "sh", "-c", script, ";",
         "wait-for", "done"],
        check=True, env=env, timeout=600,
    )  # fmt: skip
    elapsed = time.perf_counter() - start
    subprocess.run([*tmux, "kill-server"], env=env, check=False, capture_output=True)
    return elapsed


def semo_cat(path: Path, cols: int, rows: int) -> float:
    """Seconds for a semo TerminalSession to take in `cat path` through a real PTY."""

    async def run() -> float:
        session = TerminalSession(["cat", str(path)], cols=cols, rows=rows)
        start = time.perf_counter()
        session.start()
        await session.wait()
        elapsed = time.perf_counter() - start
        await session.close()
        return elapsed

    return asyncio.run(run())


def agent_cat(path: Path, cols: int, rows: int, profile: str = "claude") -> float:
    """Seconds for a semo agent session (screen + observer) to take in `cat path`."""
    from semo.engine.sessions.agent_session import AgentSession
    from semo.engine.sessions.profiles import profile_named

    async def run() -> float:
        session = AgentSession(
            "bench", ["cat", str(path)], profile_named(profile), cols=cols, rows=rows
        )
        start = time.perf_counter()
        session.start()
        await session.terminal.wait()
        elapsed = time.perf_counter() - start
        await session.terminate("bench done")
        return elapsed

    return asyncio.run(run())


_CPU_FEED = """
import codecs, random, sys, time
sys.path[:0] = [{root!r}, {repo!r}]
import semo.engine.terminal.stream as stream_module
assert stream_module.__file__.startswith({root!r}), stream_module.__file__
from bench.terminal import STREAMS, CHUNK
data = STREAMS[{name!r}](int({mb!r} * 1e6), random.Random(7))
times = []
for _ in range(3):
    screen, stream = stream_module.make_screen_and_stream({cols!r}, {rows!r})
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    start = time.process_time()
    for offset in range(0, len(data), CHUNK):
        stream.feed(decoder.decode(data[offset : offset + CHUNK]))
    screen.text_rows()
    times.append(time.process_time() - start)
print(len(data) / sorted(times)[1] / 1e6)
"""


def cpu_mbps(root: Path, name: str, args: argparse.Namespace) -> float:
    """Screen-alone MB/s in CPU time, with the `engine` package found first in `root`."""
    repo = str(Path(__file__).resolve().parent.parent)
    code = _CPU_FEED.format(
        root=str(root), repo=repo, name=name, mb=args.mb, cols=args.cols, rows=args.rows
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/"
    )
    return float(out.stdout)


def compare_before(ref: str, names: list[str], args: argparse.Namespace) -> None:
    """The screen alone at git `ref` (exported with git archive) and in this tree, alternating
    in fresh processes, CPU time (less sensitive to other load than wall time)."""
    repo = Path(__file__).resolve().parent.parent
    print(f"screen alone, CPU time, {args.mb} MB per stream, {args.cols}x{args.rows}, median of 3")
    print(f"{'stream':<24}{ref[:10] + ' MB/s':>16}{'this tree':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "-C", str(repo), "archive", ref, "engine"], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        for name in names:
            before: list[float] = []
            after: list[float] = []
            for _ in range(3):
                before.append(cpu_mbps(Path(tmp), name, args))
                after.append(cpu_mbps(repo, name, args))
            old, new = statistics.median(before), statistics.median(after)
            print(f"{name:<24}{old:>16.2f}{new:>12.2f}   x{new / old:.2f}", flush=True)


def median_mbps(fn: Callable[[bytes, int, int], float], data: bytes, args, repeat: int) -> float:
    times = [fn(data, args.cols, args.rows) for _ in range(repeat)]
    return len(data) / statistics.median(times) / 1e6


def median_cat_mbps(
    fn: Callable[[Path, int, int], float], path: Path, empty: Path, args, repeat: int
) -> float:
    size = path.stat().st_size
    times = []
    for _ in range(repeat):
        times.append(fn(path, args.cols, args.rows) - fn(empty, args.cols, args.rows))
    return size / max(statistics.median(times), 1e-6) / 1e6


STREAMS: dict[str, Callable[[int, random.Random], bytes]] = {
    "plain scrolling": plain_stream,
    "plain, lines that wrap": wrapping_stream,
    "coloured (SGR)": coloured_stream,
    "highlighted code": highlighted_stream,
    "vim-like TUI": vim_stream,
    "Ink redraw": redraw_stream,
    "Ink redraw, wide/emoji": wide_redraw_stream,
    "recorded Claude Code": corpus_stream,
}


def size_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every stream bench takes: --mb, --repeat, --cols, --rows."""
    parser.add_argument("--mb", type=float, default=4.0, help="size of each stream (MB)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cols", type=int, default=120)
    parser.add_argument("--rows", type=int, default=40)


def engine_tree(rev: str, into: Path, paths: list[str]) -> Path:
    """A copy of this tree's engine/ in `into`, with `paths` (folders or files under engine/)
    as they were at git `rev` (a folder whole: files added since are not in it)."""
    repo = Path(__file__).resolve().parent.parent
    shutil.copytree(repo / "engine", into / "engine", ignore=shutil.ignore_patterns("__pycache__"))
    for path in paths:
        target = into / path
        if target.is_dir():
            shutil.rmtree(target)
        else:
            target.unlink(missing_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", rev, *paths], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size_arguments(parser)
    parser.add_argument("--pty", action="store_true", help="also semo through a real PTY")
    parser.add_argument(
        "--agent", action="store_true", help="also a semo agent session (screen + observer)"
    )
    parser.add_argument("--no-pyte", action="store_true", help="skip plain pyte (slow)")
    parser.add_argument("--only", default="", help="comma-separated stream name prefixes")
    parser.add_argument(
        "--before", metavar="REF", help="instead: the screen alone at git REF vs this tree"
    )
    args = parser.parse_args()
    size = int(args.mb * 1e6)
    wanted = [w.strip() for w in args.only.split(",") if w.strip()]
    names = [n for n in STREAMS if not wanted or any(n.startswith(w) for w in wanted)]
    if args.before:
        compare_before(args.before, names, args)
        return
    print(f"screen {args.cols}x{args.rows}, {args.mb} MB per stream, median of {args.repeat}")
    header = f"{'stream':<24}{'semo':>8}{'pyte':>8}{'tmux':>8}{'/pyte':>8}{'/tmux':>8}"
    if args.pty:
        header += f"{'semo pty':>10}{'/tmux':>7}"
    if args.agent:
        header += f"{'agent':>8}{'/tmux':>7}"
    print(header + "   (MB/s)")
    with tempfile.TemporaryDirectory() as tmp:
        empty = Path(tmp) / "empty"
        empty.write_bytes(b"")
        for name in names:
            data = STREAMS[name](size, random.Random(7))
            path = Path(tmp) / "stream"
            path.write_bytes(as_written(data))  # the PTY hands on `data` itself
            ours = median_mbps(feed_semo, data, args, args.repeat)
            pyte_rate = (
                float("nan") if args.no_pyte
                else median_mbps(feed_pyte, data, args, max(1, args.repeat // 2))
            )  # fmt: skip
            tmux_rate = median_cat_mbps(tmux_cat, path, empty, args, args.repeat)
            row = f"{name:<24}{ours:>8.2f}{pyte_rate:>8.2f}{tmux_rate:>8.2f}"
            row += f"{ours / pyte_rate:>7.2f}x{ours / tmux_rate:>7.2f}x"
            if args.pty:
                pty_rate = median_cat_mbps(semo_cat, path, empty, args, args.repeat)
                row += f"{pty_rate:>10.2f}{pty_rate / tmux_rate:>6.2f}x"
            if args.agent:
                agent_rate = median_cat_mbps(agent_cat, path, empty, args, args.repeat)
                row += f"{agent_rate:>8.2f}{agent_rate / tmux_rate:>6.2f}x"
            print(row, flush=True)


if __name__ == "__main__":
    main()
