"""The console at 20 sessions on real processes: echo with the flooding pane on screen, bytes
written per keystroke, and the idle console (issue 15's budgets).

    python bench/console_grid.py [--only echo|bytes|idle|ab|history] [--keys 200]
                                 [--idle-seconds 20] [--size 160x48] [--repeat 2]

A real `semo engine` runs 20 bash agents (S01..S20, bench/console_processes.py's Office); a
real `semo console` runs in a pseudo-terminal this script reads and types into.

1. echo: F2 twice (the 4-pane grid: S01..S04 on screen), Enter opens S01's pane; a letter typed
   until the console writes it back, with the other panes idle, then while S02 (visible beside
   S01) floods (`seq` in a loop). Baseline in the same run: the same keys in the one-large-pane
   layout (the flooding pane hidden), as bench/console_processes.py measures it.
2. bytes: the bytes the console writes to its terminal per echoed keystroke (a letter, then
   its backspace: two echoes), in the one-pane layout and in the grid, all sessions idle.
3. idle: the console attached to 20 idle sessions, nothing typed: bytes per second written to
   its terminal and its CPU, over --idle-seconds; also with the jobs view (F5) open.
4. ab (only with --only ab): the grid with S02 flooding, the console's echo-first scheduling
   (semo/console/widgets/terminal_pane.py ECHO_HOLD) off and on, interleaved, --repeat times.
5. history (only with --only history): the grid with S02 flooding, the engine sending every
   console the flood's scrollback lines (SEMO_CONTROL_STREAM_HISTORY=1, as before the `history`
   request) and only the count of them (the panes show the live screen), and that with the
   engine's frames of the sessions not typed into at 4/s while the console types
   (SEMO_CONTROL_TYPING_FRAMES=0 turns that off), interleaved, --repeat
   times: each run's p50/p99 and the console's and the engine's CPU, then the runs' medians.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

if Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.console_processes import ConsoleProcess, Office, keystrokes, percentile, summary

F2 = b"\x1bOQ"
F5 = b"\x1b[15~"
SESSIONS = 20


def started_console(office: Office, size: tuple[int, int]) -> ConsoleProcess:
    console = ConsoleProcess(office, cols=size[0], rows=size[1])
    console.wait_for([b"S01", b"S02"], timeout=90)
    time.sleep(2.0)  # every session listed, the panels settled
    return console


def enter_pane(console: ConsoleProcess, grid: bool) -> None:
    if grid:
        console.write(F2)
        time.sleep(0.3)
        console.write(F2)  # 1 -> 2 -> 4 panes
        time.sleep(0.5)
    console.write(b"\r")  # Enter opens the selected (first) session's pane
    time.sleep(1.0)


def flood_neighbour(office: Office) -> float:
    """S02 prints `seq` in a loop from now on; the load average once it runs."""
    asyncio.run(office.type_into({office.roles[1]: "while :; do seq 1 100000; done"}))
    time.sleep(1.0)
    return os.getloadavg()[0]


def office_with_console(
    size: tuple[int, int], env: dict[str, str] | None = None
) -> tuple[Office, ConsoleProcess]:
    office = Office(SESSIONS)
    office.env.update(env or {})
    office.start()
    asyncio.run(office.type_into({office.roles[0]: "clear"}))
    return office, started_console(office, size)


def bench_echo(args: argparse.Namespace) -> None:
    for grid in (False, True):
        for flood in (False, True):
            office, console = office_with_console(args.size)
            try:
                enter_pane(console, grid)
                if flood:
                    flood_neighbour(office)
                began = time.perf_counter()
                latencies, _ = keystrokes(console, args.keys, pause=0.05)
                ended = time.perf_counter()
                layout = "4-pane grid, S02 on screen" if grid else "list + one pane, S02 hidden"
                what = "S02 flooding" if flood else "idle"
                print(f"echo, {SESSIONS} sessions, {layout}, {what}:")
                print(f"  {summary(latencies)}")
                rate = console.bytes_between(began, ended) / (ended - began)
                print(f"  the console wrote {rate / 1000:.1f} kB/s to its terminal meanwhile")
            finally:
                console.close()
                office.stop()


def bench_ab(args: argparse.Namespace) -> None:
    """The grid with S02 flooding, the console's echo-first scheduling on and off
    (SEMO_CONSOLE_ECHO_FIRST=0: no hold of the other panes, no slower frames while typing),
    interleaved, --repeat times each."""
    results: dict[str, list[float]] = {"on": [], "off": []}
    for _ in range(args.repeat):
        for mode in ("off", "on"):
            env = {"SEMO_CONSOLE_ECHO_FIRST": "0"} if mode == "off" else {}
            office, console = office_with_console(args.size, env)
            try:
                enter_pane(console, True)
                load = flood_neighbour(office)
                cpu, began = console.cpu_seconds(), time.perf_counter()
                latencies, _ = keystrokes(console, args.keys, pause=0.05)
                cpu = (console.cpu_seconds() - cpu) / (time.perf_counter() - began) * 100
                results[mode] += latencies
                what = f"grid, S02 flooding, echo-first {mode} (load {load:.1f})"
                print(f"{what}: {summary(latencies)}; console CPU {cpu:.0f} %")
            finally:
                console.close()
                office.stop()
    for mode, latencies in results.items():
        print(f"all runs, echo-first {mode}: {summary(latencies)}")


def bench_history(args: argparse.Namespace) -> None:
    """Echo in the grid with S02 flooding: scrollback lines streamed to the console (before)
    or only counted (after: a pane asks for the history when scrolled back)."""
    modes = {
        "streamed": {"SEMO_CONTROL_STREAM_HISTORY": "1", "SEMO_CONTROL_TYPING_FRAMES": "0"},
        "asked for": {"SEMO_CONTROL_TYPING_FRAMES": "0"},
        "asked for, neighbours 4/s while typing": {},
    }
    runs: dict[str, list[tuple[float, float, float, float]]] = {mode: [] for mode in modes}
    for _ in range(args.repeat):
        for mode, env in modes.items():
            office, console = office_with_console(args.size, env)
            try:
                enter_pane(console, True)
                load = flood_neighbour(office)
                cpu, engine_cpu = console.cpu_seconds(), office.cpu_seconds()
                began = time.perf_counter()
                latencies, _ = keystrokes(console, args.keys, pause=0.05)
                took = time.perf_counter() - began
                cpu = (console.cpu_seconds() - cpu) / took * 100
                engine_cpu = (office.cpu_seconds() - engine_cpu) / took * 100
                p50, p99 = statistics.median(latencies), percentile(latencies, 0.99)
                runs[mode].append((p50, p99, cpu, engine_cpu))
                print(
                    f"grid, S02 flooding, history {mode} (load {load:.1f}): "
                    f"{summary(latencies)}; CPU console {cpu:.0f} %, engine {engine_cpu:.0f} %"
                )
            finally:
                console.close()
                office.stop()
    for mode, figures in runs.items():
        p50s, p99s, cpus, engine_cpus = zip(*figures, strict=True)
        print(
            f"median of {len(figures)} runs, history {mode}: p50 {statistics.median(p50s):.1f} ms"
            f"  p99 {statistics.median(p99s):.1f} ms  CPU console {statistics.median(cpus):.0f} %"
            f", engine {statistics.median(engine_cpus):.0f} %"
        )


def bench_bytes(args: argparse.Namespace) -> None:
    for grid in (False, True):
        office, console = office_with_console(args.size)
        try:
            enter_pane(console, grid)
            _, sizes = keystrokes(console, min(args.keys, 60), pause=0.05)
            layout = "4-pane grid" if grid else "list + one pane"
            print(
                f"bytes written per keystroke (letter + backspace), {SESSIONS} idle sessions, "
                f"{layout}, {args.size[0]}x{args.size[1]}: median {statistics.median(sizes):.0f} B,"
                f" max {max(sizes)} B"
            )
        finally:
            console.close()
            office.stop()


def bench_idle(args: argparse.Namespace) -> None:
    office, console = office_with_console(args.size)
    try:
        for what in ("main screen", "jobs view (F5)"):
            if what.startswith("jobs"):
                console.write(F5)
                time.sleep(3.0)
            cpu, start = console.cpu_seconds(), time.perf_counter()
            time.sleep(args.idle_seconds)
            end = time.perf_counter()
            cpu = (console.cpu_seconds() - cpu) / (end - start) * 100
            written = console.bytes_between(start, end) / (end - start)
            print(f"idle console, {SESSIONS} idle sessions, {what}, {args.idle_seconds:g} s:")
            print(f"  writes {written:7.0f} B/s to its terminal; CPU {cpu:4.1f} %")
    finally:
        console.close()
        office.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("echo", "bytes", "idle", "ab", "history"))
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--keys", type=int, default=200)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--size", default="160x48")
    args = parser.parse_args()
    cols, rows = args.size.split("x")
    args.size = (int(cols), int(rows))
    print(f"load average {os.getloadavg()[0]:.2f}")
    for name, bench in (("bytes", bench_bytes), ("idle", bench_idle), ("echo", bench_echo)):
        if args.only in (None, name):
            bench(args)
    if args.only == "ab":
        bench_ab(args)
    if args.only == "history":
        bench_history(args)
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
