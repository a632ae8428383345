"""What the protocol observer adds to an agent session's screen, before/after, in one run.

    python bench/observer.py [--mb 4] [--repeat 5] [--baseline-rev REV]

An agent session is a screen plus an observer pass per screen update. Each stream of
bench/terminal.py (and a marker-dense one: model text with protocol markers, signals and code
fences) is fed in 64 KiB chunks (one PTY read each) into a real screen, and after every chunk
the observer reads it, as `AgentSession` does once per frame (at 5 MB/s a 60 Hz frame is about
one such chunk). The screen's time and the observer's time are measured apart; the figure is
the observer's cost in ms per MB and the whole session's MB/s.

The baseline column runs the same code with `engine/protocol/` taken from `--baseline-rev`
(default: the commit before the observer work of issues 12/17), everything else as checked out,
in a child process of the same run.
"""

from __future__ import annotations

import argparse
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
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
CHUNK = 65536
BASELINE_REV = "28a119c"


def marker_stream(size: int, rng: random.Random) -> bytes:
    """A generic agent's model text: prose, protocol markers, signals, fenced code."""
    words = "the quick brown fox jumps over lazy dog semo agent session".split()
    lines = [
        "● [STEP_COMPLETE] wrote the parser",
        '● [INVOKE:BE]\r\n● {"task": "add the endpoint", "context": {"file": "api.py"}}\r\n'
        "● [/INVOKE]",
        "● All tests passed",
        "● Error: something failed",
        "● ```\r\n● [SEMO:DONE] quoted\r\n● ```",
    ]
    out: list[str] = []
    total = 0
    while total < size:
        if rng.random() < 0.1:
            line = rng.choice(lines)
        else:
            line = "● " + " ".join(rng.choice(words) for _ in range(rng.randint(3, 16)))
        out.append(line + "\r\n")
        total += len(line) + 2
    return "".join(out).encode()


def bench_terminal() -> ModuleType:
    """bench/terminal.py: its stream generators and helpers."""
    if str(ROOT / "bench") not in sys.path:
        sys.path.insert(0, str(ROOT / "bench"))
    import terminal

    return terminal


def streams() -> dict[str, Callable[[int, random.Random], bytes]]:
    terminal = bench_terminal()

    found = {
        "plain": terminal.plain_stream,
        "wrapping": terminal.wrapping_stream,
        "coloured": terminal.coloured_stream,
        "ink redraw": terminal.redraw_stream,
        "wide/emoji ink": getattr(terminal, "wide_redraw_stream", None),
        "highlighted": getattr(terminal, "highlighted_stream", None),
        "markers": marker_stream,
    }
    return {name: make for name, make in found.items() if make is not None}


def measure(data: bytes, profile: str, cols: int, rows: int) -> tuple[float, float]:
    """(screen seconds, observer seconds) for one pass over `data`."""
    from semo.engine.agents import registry
    from semo.engine.protocol.observer import AgentObserver
    from semo.engine.terminal.stream import make_screen_and_stream

    screen, stream = make_screen_and_stream(cols, rows)
    adapter = registry.adapter(profile)
    reader = adapter.screen_reader(adapter.profile())
    observer = AgentObserver(reader, screen=screen if profile == "claude" else None)
    if profile == "claude":
        observer.on_hook("SessionStart", {}, 0.0)  # hooks seen: the screen only watches dialogs
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    screen_time = observer_time = 0.0
    clock = time.perf_counter
    for offset in range(0, len(data), CHUNK):
        text = decoder.decode(data[offset : offset + CHUNK])
        start = clock()
        stream.feed(text)
        middle = clock()
        observer.on_screen(screen, 1.0)
        observer_time += clock() - middle
        screen_time += middle - start
    return screen_time, observer_time


def child(args: argparse.Namespace) -> dict[str, dict[str, list[float]]]:
    results: dict[str, dict[str, list[float]]] = {}
    for name, make in streams().items():
        data = make(int(args.mb * 1024 * 1024), random.Random(7))
        for profile in ("generic", "claude"):
            runs = [measure(data, profile, args.cols, args.rows) for _ in range(args.repeat)]
            results[f"{name}|{profile}"] = {
                "screen": [s for s, _ in runs],
                "observer": [o for _, o in runs],
                "mb": [len(data) / 1e6],
            }
    return results


def baseline_tree(rev: str) -> Path:
    """A copy of engine/ with engine/protocol/ as it was at `rev`."""
    folder = Path(tempfile.mkdtemp(prefix="semo-observer-base-"))
    return bench_terminal().engine_tree(rev, folder, ["engine/protocol"])


def run_child(args: argparse.Namespace, pythonpath: Path) -> dict[str, dict[str, list[float]]]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    command = [sys.executable, __file__, "--child", "--mb", str(args.mb)]
    command += ["--repeat", str(args.repeat), "--cols", str(args.cols), "--rows", str(args.rows)]
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True, cwd=ROOT)
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    bench_terminal().size_arguments(parser)
    parser.add_argument("--baseline-rev", default=BASELINE_REV)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args)))
        return
    base = baseline_tree(args.baseline_rev)
    try:
        before = run_child(args, base)
        after = run_child(args, ROOT)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"date {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC  cpus {os.cpu_count()}  "
        f"load {load}  {args.mb} MB x {args.repeat}, {args.cols}x{args.rows}"
    )
    print(
        f"observer: ms per MB (median); session = screen + observer, MB/s "
        f"(baseline: engine/protocol at {args.baseline_rev})"
    )
    print(
        f"{'stream':<16}{'profile':<9}{'obs before':>11}{'obs after':>10}{'x':>7}"
        f"{'session before':>16}{'session after':>15}{'screen':>9}"
    )
    for key, now in after.items():
        name, profile = key.split("|")
        then = before[key]
        mb = now["mb"][0]
        obs_then = statistics.median(then["observer"]) / mb * 1000
        obs_now = statistics.median(now["observer"]) / mb * 1000
        sess_then = mb / statistics.median(
            [s + o for s, o in zip(then["screen"], then["observer"], strict=True)]
        )
        sess_now = mb / statistics.median(
            [s + o for s, o in zip(now["screen"], now["observer"], strict=True)]
        )
        screen = mb / statistics.median(now["screen"])
        speedup = obs_then / obs_now if obs_now else float("inf")
        print(
            f"{name:<16}{profile:<9}{obs_then:11.1f}{obs_now:10.1f}{speedup:7.1f}"
            f"{sess_then:16.2f}{sess_now:15.2f}{screen:9.2f}"
        )


if __name__ == "__main__":
    main()
