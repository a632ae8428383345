"""Where an agent session loses against its screen: the same stream through each layer, one run.

    python bench/agent_pty.py [--mb 4] [--repeat 5] [--only plain,coloured,...] [--no-tmux]
                              [--generic] [--baseline REV]

For each stream of bench/terminal.py, alternating in each round:

- ``screen``: the screen alone, fed 64 KiB chunks through an incremental UTF-8 decoder
  (no PTY, no loop: what the screen itself costs);
- ``terminal``: a `TerminalSession` running `cat` of the stream in a real PTY (reads, read
  sizing, the intake budget, the loop);
- ``agent``: an `AgentSession` (claude profile without hooks, as bench/terminal.py's agent case;
  ``generic`` too with --generic): the terminal plus the session's output bookkeeping and one
  observer pass per frame;
- ``tmux``: a detached tmux pane running the same `cat` (bench/terminal.py's measurement).

`cat` writes the stream with its CR LFs as LFs (bench/terminal.py's `as_written`): the PTY
makes them CR LFs again, so every layer receives the same bytes.

Wall-clock MB/s (for PTY runs: from spawn to exit, minus the same with an empty file) and the
bench process's CPU MB/s (time.process_time: `cat`, the kernel's tty work and other load are
not in it). Also PTY reads, screen feeds and observer passes per MB of the agent run. Medians.
On a shared machine the wall figures move with the load; CPU figures much less.

Every measurement runs in a fresh child process. --baseline REV adds the terminal and agent
layers once more with engine/terminal/{session,pty_process}.py, engine/sessions/agent_session.py
and engine/protocol/ taken from git REV (everything else as checked out), alternating with the
others in each round.
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# the engine measured: this tree's, or a baseline's (set by the parent for a --baseline child)
sys.path[:0] = [
    os.environ.get("AGENT_PTY_ROOT") or str(Path(__file__).resolve().parents[1]),
    str(Path(__file__).resolve().parents[1]),
    str(Path(__file__).resolve().parent),
]

import terminal as bench_terminal  # noqa: E402  (bench/terminal.py: streams and tmux_cat)

from semo.engine.terminal.stream import make_screen_and_stream  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CHUNK = 65536
#: the files --baseline takes from the older revision
AGENT_PATH_FILES = [
    "engine/terminal/session.py",
    "engine/terminal/pty_process.py",
    "engine/sessions/agent_session.py",
]
Run = tuple[float, float]  # (wall seconds, CPU seconds)


def screen_alone(data: bytes, cols: int, rows: int) -> Run:
    _screen, stream = make_screen_and_stream(cols, rows)
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    wall, cpu = time.perf_counter(), time.process_time()
    for offset in range(0, len(data), CHUNK):
        stream.feed(decoder.decode(data[offset : offset + CHUNK]))
    _ = _screen.buffer  # what a frame would read: deferred rows are laid out
    return time.perf_counter() - wall, time.process_time() - cpu


def terminal_cat(path: Path, cols: int, rows: int, stats: dict[str, float]) -> Run:
    from semo.engine.terminal.session import TerminalSession

    async def run() -> Run:
        session = TerminalSession(["cat", str(path)], cols=cols, rows=rows)
        wall, cpu = time.perf_counter(), time.process_time()
        session.start()
        await session.wait()
        result = time.perf_counter() - wall, time.process_time() - cpu
        assert session.process is not None
        stats["reads"] = session.process.reads
        await session.close()
        return result

    return asyncio.run(run())


def agent_cat(path: Path, cols: int, rows: int, stats: dict[str, float], profile: str) -> Run:
    from semo.engine.sessions.agent_session import AgentSession
    from semo.engine.sessions.profiles import profile_named

    async def run() -> Run:
        session = AgentSession(
            "bench", ["cat", str(path)], profile_named(profile), cols=cols, rows=rows
        )
        feeds = 0
        passes = 0
        observe = session.observer.on_screen

        def count_feed(_text: str) -> None:
            nonlocal feeds
            feeds += 1

        def count_pass(screen, at):  # type: ignore[no-untyped-def]
            nonlocal passes
            passes += 1
            return observe(screen, at)

        session.observer.on_screen = count_pass  # type: ignore[method-assign]
        session.terminal.add_listener(count_feed)
        wall, cpu = time.perf_counter(), time.process_time()
        session.start()
        await session.terminal.wait()
        result = time.perf_counter() - wall, time.process_time() - cpu
        assert session.terminal.process is not None
        stats.update(reads=session.terminal.process.reads, feeds=feeds, passes=passes)
        await session.terminate("bench done")
        return result

    return asyncio.run(run())


def child(args: argparse.Namespace) -> None:
    """One measurement (`--child layer path`), printed as JSON."""
    layer, path = args.child
    stats: dict[str, float] = {}
    if layer == "screen":
        # the file is what cat writes (LFs): the screen alone gets what the PTY makes of it
        data = Path(path).read_bytes().replace(b"\n", b"\r\n")
        wall, cpu = screen_alone(data, args.cols, args.rows)
    elif layer == "terminal":
        wall, cpu = terminal_cat(Path(path), args.cols, args.rows, stats)
    else:
        wall, cpu = agent_cat(Path(path), args.cols, args.rows, stats, layer)
    print(json.dumps({"wall": wall, "cpu": cpu, **stats}))


def measure(layer: str, path: Path, args: argparse.Namespace, root: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", layer, str(path),
         "--cols", str(args.cols), "--rows", str(args.rows)],
        capture_output=True, text=True, check=True, env={**os.environ, "AGENT_PTY_ROOT": str(root)},
    )  # fmt: skip
    return json.loads(out.stdout.splitlines()[-1])


def baseline_tree(rev: str, into: Path) -> Path:
    """This tree's engine/ with the agent path's files (AGENT_PATH_FILES, engine/protocol/)
    from `rev`."""
    return bench_terminal.engine_tree(rev, into, ["engine/protocol", *AGENT_PATH_FILES])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    bench_terminal.size_arguments(parser)
    parser.add_argument("--only", default="plain,coloured,Ink")
    parser.add_argument("--generic", action="store_true", help="also a generic agent session")
    parser.add_argument("--baseline", metavar="REV", help="also the agent path at git REV")
    parser.add_argument("--no-tmux", action="store_true")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    wanted = [w.strip() for w in args.only.split(",") if w.strip()]
    names = [n for n in bench_terminal.STREAMS if any(n.startswith(w) for w in wanted)]
    size = int(args.mb * 1e6)
    layers = [("screen", "screen", ROOT), ("terminal", "terminal", ROOT), ("agent", "claude", ROOT)]
    if args.generic:
        layers.append(("generic", "generic", ROOT))
    with tempfile.TemporaryDirectory() as tmp:
        if args.baseline:
            base = baseline_tree(args.baseline, Path(tmp) / "baseline")
            rev = subprocess.run(
                ["git", "-C", str(ROOT), "rev-parse", "--short", args.baseline],
                capture_output=True, text=True, check=True,
            ).stdout.strip()  # fmt: skip
            layers[1:1] = [(f"terminal@{rev}", "terminal", base)]
            layers[3:3] = [(f"agent@{rev}", "claude", base)]
            if args.generic:
                layers.append((f"generic@{rev}", "generic", base))
        print(
            f"{args.cols}x{args.rows}, {args.mb} MB per stream, median of {args.repeat}, "
            f"load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        print(
            f"{'stream':<24}{'layer':<18}{'wall MB/s':>10}{'/screen':>8}{'/tmux':>7}"
            f"{'CPU MB/s':>10}{'/screen':>8}   per MB"
        )
        empty = Path(tmp) / "empty"
        empty.write_bytes(b"")
        for name in names:
            data = bench_terminal.STREAMS[name](size, random.Random(7))
            path = Path(tmp) / "stream"
            path.write_bytes(bench_terminal.as_written(data))  # through the PTY: `data`
            runs: dict[str, list[dict[str, float]]] = {label: [] for label, _, _ in layers}
            tmux: list[float] = []
            for _ in range(args.repeat):
                for label, layer, root in layers:
                    run = measure(layer, path, args, root)
                    if layer != "screen":  # spawn and exit, measured with an empty file
                        run["wall"] -= measure(layer, empty, args, root)["wall"]
                    runs[label].append(run)
                if not args.no_tmux:
                    tmux.append(
                        bench_terminal.tmux_cat(path, args.cols, args.rows)
                        - bench_terminal.tmux_cat(empty, args.cols, args.rows)
                    )
            mb = len(data) / 1e6

            def rate(values: list[float], mb: float = mb) -> float:
                return mb / max(statistics.median(values), 1e-6)

            screen_wall = rate([r["wall"] for r in runs["screen"]])
            screen_cpu = rate([r["cpu"] for r in runs["screen"]])
            tmux_rate = rate(tmux) if tmux else float("nan")
            if tmux:
                print(f"{name:<24}{'tmux':<18}{tmux_rate:>10.2f}", flush=True)
            for label, _layer, _root in layers:
                wall = rate([r["wall"] for r in runs[label]])
                cpu = rate([r["cpu"] for r in runs[label]])
                counters = sorted(set(runs[label][0]) - {"wall", "cpu"})
                per_mb = "  ".join(
                    f"{key} {statistics.median(r[key] for r in runs[label]) / mb:.0f}"
                    for key in counters
                )
                print(
                    f"{name:<24}{label:<18}{wall:>10.2f}{wall / screen_wall:>7.2f}x"
                    f"{wall / tmux_rate:>6.2f}x{cpu:>10.2f}{cpu / screen_cpu:>7.2f}x   {per_mb}",
                    flush=True,
                )
            print(f"{'':<24}load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
