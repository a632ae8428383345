"""The console's terminal panes: keystroke -> echo on the pane, and the cost of live panes.

    python bench/console.py [--keys 300] [--mb 20] [--windows 5] [--window-seconds 2]
                            [--only latency|cost|processes] [--compare-gc]

`--only processes` runs bench/console_processes.py instead: real `semo console` processes
attached to a real engine through its control socket (attach, keystroke echo, idle console,
engine cost per console). The in-process figures below are its same-run baseline.

Everything runs in one headless Textual app (`App.run_test`), on one asyncio loop with the
sessions, as in `semo console`.

1. Latency: two panes side by side, 80 columns each. The echo pane runs `cat` and has focus;
   a key event goes into the app (`App.post_message`, the path a driver's key takes), through
   the pane's key handler to the PTY; the tty echoes it; the time counted ends when the pane's
   `render_line` returns a strip with that character in the cursor's cell. Measured twice:
   with the other pane idle (baseline) and while it floods (`cat` of a --mb MB file, in a loop).
   The start-up heap is frozen first, as `semo console` does (semo/engine/heap.py); --compare-gc
   measures the same without that before it.
2. Cost: six panes in a 200x50 app, each child printing ~20 coloured lines/s (steady agents),
   against the same six panes idle (baseline): process CPU time per wall second (this process
   only: the UI, the PTY reads, the screens), pane frames (refreshes) per second and
   `render_line` calls per second; the median of --windows windows.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import string
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from textual import events
from textual.app import App, ComposeResult
from textual.containers import Grid, Horizontal
from textual.strip import Strip

# Run as a script, this file would shadow the `console` package: import from the project root.
if Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from semo.console.widgets.terminal_pane import TerminalPane
from semo.engine.heap import freeze_startup_heap, thaw_heap
from semo.engine.terminal.session import TerminalSession

LINE_CHARS = string.ascii_letters + string.digits + "     "
STEADY = (
    "import sys, time\n"
    "n = 0\n"
    "while True:\n"
    "    n += 1\n"
    "    sys.stdout.write(f'\\x1b[3{n % 8}m{n:06d}\\x1b[0m agent output, steady: '\n"
    "                     f'\\x1b[1mbold\\x1b[0m and plain text {\"x\" * (n % 40)}\\n')\n"
    "    sys.stdout.flush()\n"
    "    time.sleep(0.05)\n"
)


class ProbePane(TerminalPane):
    """A TerminalPane that reports what render_line returns (and counts the calls)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.probe: Callable[[int, Strip], None] | None = None
        self.render_calls = 0

    def render_line(self, y: int) -> Strip:
        strip = super().render_line(y)
        self.render_calls += 1
        if self.probe is not None:
            self.probe(y, strip)
        return strip


class BenchApp(App[None]):
    CSS = """
    Grid { grid-size: 3 2; }
    """

    def __init__(self, sessions: list[TerminalSession], *, grid: bool) -> None:
        super().__init__()
        self.sessions = sessions
        self.grid = grid
        self.panes = [ProbePane(s, title=f"pane {i}") for i, s in enumerate(sessions)]
        self.pane_size = ""

    def compose(self) -> ComposeResult:
        container = Grid() if self.grid else Horizontal()
        with container:
            yield from self.panes


def write_flood_file(path: Path, megabytes: float, longest: int) -> None:
    rng = random.Random(1)
    lines = ["".join(rng.choices(LINE_CHARS, k=rng.randint(20, longest))) for _ in range(2000)]
    block = ("\n".join(lines) + "\n").encode()
    with path.open("wb") as out:
        written = 0
        while written < megabytes * 1e6:
            out.write(block)
            written += len(block)


async def press_enter(app: BenchApp, session: TerminalSession) -> None:
    """Enter through the app; wait for the new line and for `cat` to have echoed it."""
    row = session.screen.cursor.y
    app.post_message(events.Key("enter", "\r"))
    await asyncio.wait_for(wait_for_newline(session, row), 10)
    await session.wait_quiet(0.05, 5)


async def wait_for_newline(session: TerminalSession, row: int) -> None:
    screen = session.screen
    moved = asyncio.Event()
    session.add_listener(lambda _: moved.set())
    while screen.cursor.x != 0 or (screen.cursor.y == row and row < screen.lines - 1):
        moved.clear()
        await moved.wait()


class Stages:
    """Timestamps of one keystroke on its way: PTY write, echo read, echo rendered."""

    def __init__(self, session: TerminalSession) -> None:
        self.marks: dict[str, float] = {}
        write = session.write

        def timed_write(text: str) -> None:
            self.marks.setdefault("write", time.perf_counter())
            write(text)

        session.write = timed_write  # type: ignore[method-assign]
        session.add_listener(lambda _: self.marks.setdefault("read", time.perf_counter()))


async def keystroke_latencies(
    app: BenchApp, pane: ProbePane, session: TerminalSession, stages: Stages, count: int
) -> dict[str, list[float]]:
    """ms from the key event entering the app to the echo in the pane's rendered line, and
    the stages: key event -> PTY write, -> echo read from the PTY, -> echo rendered."""
    rng = random.Random(2)
    screen = session.screen
    latencies: dict[str, list[float]] = {"total": [], "write": [], "read": [], "render": []}
    seen = asyncio.Event()
    for index in range(count):
        if index % 50 == 49:  # Enter now and then so the echo never wraps
            await press_enter(app, session)
        char = string.ascii_lowercase[index % 26]
        x, y = screen.cursor.x, screen.cursor.y
        seen.clear()
        marks = stages.marks
        marks.clear()

        def probe(
            row: int, strip: Strip, x: int = x, y: int = y, char: str = char, marks=marks
        ) -> None:
            if row == y and "render" not in marks and strip.crop(x, x + 1).text == char:
                marks["render"] = time.perf_counter()
                seen.set()

        pane.probe = probe
        start = time.perf_counter()
        app.post_message(events.Key(char, char))
        await asyncio.wait_for(seen.wait(), 10)
        pane.probe = None
        latencies["total"].append((marks["render"] - start) * 1000)
        previous = start
        for stage in ("write", "read", "render"):
            latencies[stage].append((marks[stage] - previous) * 1000)
            previous = marks[stage]
        await asyncio.sleep(rng.uniform(0.005, 0.02))
    await press_enter(app, session)
    return latencies


def report(name: str, latencies: dict[str, list[float]]) -> list[str]:
    rows = [describe(name, latencies["total"])]
    parts = []
    for stage, label in (("write", "key->write"), ("read", "->echo read"), ("render", "->drawn")):
        values = sorted(latencies[stage])
        p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
        parts.append(f"{label} {statistics.median(values):.1f}/{p99:.1f}")
    rows.append("    p50/p99 ms: " + ", ".join(parts))
    return rows


def describe(name: str, values: list[float]) -> str:
    values = sorted(values)
    p50 = statistics.median(values)
    p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
    return (
        f"  {name:<42} p50 {p50:6.2f} ms   p99 {p99:6.2f} ms   max {values[-1]:6.2f} ms"
        f"   n={len(values)}"
    )


FLOODS = (("lines that fit (20-70 chars)", 70), ("lines that wrap (20-110 chars)", 110))


async def latency(args: argparse.Namespace, *, frozen: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        echo = TerminalSession(["cat"])
        floods = []
        for index, (_, longest) in enumerate(FLOODS):
            path = Path(tmp) / f"flood{index}.txt"
            write_flood_file(path, args.mb, longest)
            loop = 'read -r _; while :; do cat "$0"; done'
            floods.append(TerminalSession(["bash", "-c", loop, str(path)]))
        for session in (echo, *floods):
            session.start()
        app = BenchApp([echo, *floods], grid=False)
        rows: list[str] = []
        try:
            async with app.run_test(size=(240, 30)) as pilot:
                echo_pane = app.panes[0]
                echo_pane.focus()
                await pilot.pause(0.3)
                if frozen:
                    freeze_startup_heap()  # as `semo console` does once its engine has started
                size = "x".join(map(str, echo_pane.size))
                stages = Stages(echo)
                baseline = await keystroke_latencies(app, echo_pane, echo, stages, args.keys)
                rows.extend(report("baseline (no flood)", baseline))
                for (name, _), flood, pane in zip(FLOODS, floods, app.panes[1:], strict=True):
                    flood.write("\r")  # starts the flood loop
                    await asyncio.sleep(0.5)
                    frames_before = pane.frames
                    bytes_before, started = flood.bytes_out, time.perf_counter()
                    flooded = await keystroke_latencies(app, echo_pane, echo, stages, args.keys)
                    elapsed = time.perf_counter() - started
                    frames = (pane.frames - frames_before) / elapsed
                    ingest = (flood.bytes_out - bytes_before) / elapsed / 1e6
                    await flood.close(grace=0.5)
                    rows.extend(report(f"flood, {name}", flooded))
                    rows.append(f"    the flooding pane: {ingest:.1f} MB/s, {frames:.0f} frames/s")
        finally:
            thaw_heap()
            for session in (echo, *floods):
                await session.close(grace=0.5)
    heap = "start-up heap frozen (as semo console runs)" if frozen else "collector as is"
    print(
        f"keystroke -> echo in the pane's render_line, {args.keys} keys per row; three {size} "
        f"panes in a 240x30 app; flood: cat of a {args.mb:g} MB file in a loop in another pane; "
        f"a pane refreshes at most every {TerminalPane.FRAME_SECONDS * 1000:.1f} ms; {heap}"
    )
    print("\n".join(rows))


async def live_panes_cost(
    args: argparse.Namespace, *, steady: bool
) -> tuple[dict[str, float], str]:
    argv = [sys.executable, "-u", "-c", STEADY] if steady else ["cat"]
    sessions = [TerminalSession(argv) for _ in range(6)]
    for session in sessions:
        session.start()
    app = BenchApp(sessions, grid=True)
    windows: dict[str, list[float]] = {"cpu": [], "frames": [], "renders": [], "lines": []}
    try:
        async with app.run_test(size=(200, 50)) as pilot:
            await pilot.pause(1.0)  # start-up and first frames
            freeze_startup_heap()
            app.pane_size = "x".join(map(str, app.panes[0].size))
            for _ in range(args.windows):
                cpu, wall = time.process_time(), time.perf_counter()
                frames = sum(p.frames for p in app.panes)
                renders = sum(p.render_calls for p in app.panes)
                pushed = sum(s.screen.scrollback.total_pushed for s in sessions)
                await asyncio.sleep(args.window_seconds)
                wall = time.perf_counter() - wall
                windows["cpu"].append((time.process_time() - cpu) / wall * 100)
                windows["frames"].append((sum(p.frames for p in app.panes) - frames) / wall)
                windows["renders"].append((sum(p.render_calls for p in app.panes) - renders) / wall)
                lines = sum(s.screen.scrollback.total_pushed for s in sessions) - pushed
                windows["lines"].append(lines / wall)
    finally:
        thaw_heap()
        for session in sessions:
            await session.close(grace=0.5)
    figures = {name: statistics.median(values) for name, values in windows.items()}
    return figures, app.pane_size


async def cost(args: argparse.Namespace) -> None:
    idle, _ = await live_panes_cost(args, steady=False)
    busy, size = await live_panes_cost(args, steady=True)
    print(
        f"six {size} panes in a 200x50 app; median of {args.windows} windows of "
        f"{args.window_seconds:g} s"
    )
    for name, figures in (("baseline (idle panes)", idle), ("6 panes x ~20 lines/s", busy)):
        print(
            f"  {name:<24} CPU {figures['cpu']:5.1f} %   frames {figures['frames']:6.1f}/s   "
            f"render_line {figures['renders']:7.0f}/s   output lines {figures['lines']:5.0f}/s"
        )


async def main_async(args: argparse.Namespace) -> None:
    if args.only in (None, "latency"):
        if args.compare_gc:
            await latency(args, frozen=False)
        await latency(args, frozen=True)
    if args.only in (None, "cost"):
        await cost(args)


def main() -> None:
    if sys.argv[1:3] == ["--only", "processes"]:
        from bench.console_processes import main as processes_main

        sys.argv[1:3] = []
        processes_main()
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=300)
    parser.add_argument("--mb", type=float, default=20.0)
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--window-seconds", type=float, default=2.0)
    parser.add_argument("--only", choices=("latency", "cost", "processes"))
    parser.add_argument(
        "--compare-gc",
        action="store_true",
        help="also measure latency without freezing the start-up heap (semo/engine/heap.py)",
    )
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
