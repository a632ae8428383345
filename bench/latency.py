"""Keystroke -> echo latency in one session while another floods its terminal; engine start-up.

    python bench/latency.py [--mb 50] [--keys 300]
    python bench/latency.py --startup [--rounds 7]
    python bench/latency.py --cli [--rounds 20] [--baseline DIR]

--startup: an in-process `Engine` (sqlite store in a fresh folder, a fresh git repository, three
bash agents, warm roles FE, BE, QA) from `Engine(...)` + `start()` until the three warm sessions
are ready, against three bash `TerminalSession`s started by hand until each shows its prompt,
alternating, in the same run.

--cli: wall and CPU time of `semo --help`, `semo engine --help`, `semo hook Stop` and `semo
capture --settle 1 -- true` as real processes (the venv's `semo` script), each round running
every command once in turn, beside a bare `python -c pass`; medians. `--baseline DIR` runs each
semo command once more per round with PYTHONPATH=DIR (an older engine/ tree).

Session B runs `cat` (the tty echoes each key); session A runs `cat` on a file of --mb MB of
log lines, restarted whenever it ends, so it floods for the whole measurement. Both live on one
asyncio loop, as sessions do in the engine. A key counts as echoed when B's screen shows it.
The same measurement without the flood runs first, as the baseline of this run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import resource
import statistics
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from semo.engine.terminal.session import TerminalSession

LINE_CHARS = string.ascii_letters + string.digits + "     "


def write_flood_file(path: Path, megabytes: float) -> None:
    rng = random.Random(1)
    lines = ["".join(rng.choices(LINE_CHARS, k=rng.randint(20, 110))) for _ in range(2000)]
    block = ("\n".join(lines) + "\n").encode()
    target = int(megabytes * 1e6)
    with path.open("wb") as out:
        written = 0
        while written < target:
            out.write(block)
            written += len(block)


async def keystroke_latencies(echo: TerminalSession, count: int) -> list[float]:
    latencies: list[float] = []
    seen = asyncio.Event()
    expected = {"char": ""}

    def on_output(_: str) -> None:
        row = echo.screen.buffer[echo.screen.cursor.y]
        if expected["char"] and row[max(echo.screen.cursor.x - 1, 0)].data == expected["char"]:
            seen.set()

    echo.add_listener(on_output)
    for index in range(count):
        char = "abcdefghijklmnopqrstuvwxyz"[index % 26]
        if index % 60 == 59:
            echo.write("\r")  # new line now and then so the echo never wraps
            await asyncio.sleep(0.02)
        seen.clear()
        expected["char"] = char
        start = time.perf_counter()
        echo.write(char)
        await asyncio.wait_for(seen.wait(), 5)
        latencies.append((time.perf_counter() - start) * 1000)
        await asyncio.sleep(0.01)
    return latencies


async def flood_forever(path: Path, stop: asyncio.Event, counters: dict[str, int]) -> None:
    while not stop.is_set():
        flood = TerminalSession(["cat", str(path)], cols=120, rows=40)
        flood.start()
        done = asyncio.ensure_future(flood.wait())
        stopped = asyncio.ensure_future(stop.wait())
        await asyncio.wait({done, stopped}, return_when=asyncio.FIRST_COMPLETED)
        counters["bytes"] += flood.bytes_out
        stopped.cancel()
        await flood.close(grace=0.5)


def describe(name: str, values: list[float]) -> str:
    values = sorted(values)
    p50 = statistics.median(values)
    p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
    return f"{name:<28} p50 {p50:6.2f} ms   p99 {p99:6.2f} ms   max {values[-1]:6.2f} ms"


async def main_async(args: argparse.Namespace) -> None:
    echo = TerminalSession(["cat"], cols=80, rows=24)
    echo.start()
    await echo.wait_quiet(0.2, 5)
    baseline = await keystroke_latencies(echo, args.keys)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "flood.txt"
        write_flood_file(path, args.mb)
        stop = asyncio.Event()
        counters = {"bytes": 0}
        flooder = asyncio.ensure_future(flood_forever(path, stop, counters))
        await asyncio.sleep(0.5)
        started = time.perf_counter()
        flooded = await keystroke_latencies(echo, args.keys)
        elapsed = time.perf_counter() - started
        stop.set()
        await flooder
    await echo.close()
    print(f"{args.keys} keystrokes each; flood: cat of a {args.mb} MB file, restarted as needed")
    print(describe("baseline (no flood)", baseline))
    print(describe("while another pane floods", flooded))
    print(f"flood ingest during measurement: {counters['bytes'] / elapsed / 1e6:.1f} MB/s")


BASH = ["bash", "--norc", "--noprofile", "-i"]
ROLES = ("FE", "BE", "QA")


def startup_config(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@example.org"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "root"], check=True)
    agents = "".join(
        f'[[agents]]\nrole = "{role}"\nprofile = "generic"\nenv = {{ PS1 = "$ " }}\n'
        + f"command = {BASH!r}\n".replace("'", '"')
        for role in ROLES
    )
    text = (
        f'[office]\nname = "bench"\nrepository = "{repo}"\nworkspace_root = "{root / "ws"}"\n'
        f'[store]\nbackend = "sqlite"\nsqlite_path = "{root / "semo.db"}"\n'
        f'[pool]\nwarm_roles = ["FE", "BE", "QA"]\n{agents}'
    )
    path = root / "semo.toml"
    path.write_text(text)
    return path


async def engine_startup(root: Path) -> float:
    from semo.engine.config import load_config
    from semo.engine.engine import Engine

    config = load_config(startup_config(root))
    started = time.perf_counter()
    engine = Engine(config)
    await engine.start()
    elapsed = time.perf_counter() - started
    status = engine.pool.status() if engine.pool is not None else None
    await engine.stop("bench done")
    if status is None or status.down:
        raise RuntimeError(f"warm sessions not ready: {status}")
    return elapsed


async def by_hand_startup(root: Path) -> float:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PS1": "$ ", "HOME": str(root)}
    started = time.perf_counter()
    sessions = [TerminalSession(BASH, env=env, cwd=root) for _ in ROLES]
    ready = asyncio.Event()

    def check(_: str) -> None:
        if all("$" in s.screen.text_rows()[s.screen.cursor.y] for s in sessions):
            ready.set()

    for session in sessions:
        session.add_listener(check)
        session.start()
    await asyncio.wait_for(ready.wait(), 30)
    elapsed = time.perf_counter() - started
    for session in sessions:
        await session.close()
    return elapsed


async def startup_async(args: argparse.Namespace) -> None:
    engine_s: list[float] = []
    hand_s: list[float] = []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            hand_s.append(await by_hand_startup(Path(tmp)))
        with tempfile.TemporaryDirectory() as tmp:
            engine_s.append(await engine_startup(Path(tmp)))
    hand, engine = statistics.median(hand_s) * 1000, statistics.median(engine_s) * 1000
    print(f"{len(ROLES)} warm bash sessions ready, median of {args.rounds}")
    print(f"  by hand (3 TerminalSessions to their prompt) {hand:7.1f} ms")
    print(f"  Engine(...).start(), sqlite, 3 warm roles    {engine:7.1f} ms")
    print(f"  difference                                   {engine - hand:+7.1f} ms")


CLI_COMMANDS: list[tuple[str, list[str]]] = [
    ("python -c pass", ["-c", "pass"]),
    ("semo --help", ["SEMO", "--help"]),
    ("semo engine --help", ["SEMO", "engine", "--help"]),
    ("semo hook Stop", ["SEMO", "hook", "Stop"]),
    ("semo capture --settle 1 -- true", ["SEMO", "capture", "--settle", "1", "--", "true"]),
]


def cli_startup(rounds: int, baseline: str | None = None) -> None:
    """Each command's wall time and its process's CPU time (user + system, from the children's
    rusage: steadier than wall time on a loaded machine). With `baseline`, every `semo`
    command runs a second time with PYTHONPATH=baseline (an older engine/ tree, e.g. exported
    with git archive), in the same rounds."""
    python = Path(sys.executable)
    semo = str(python.parent / "semo")
    env = {**os.environ, "SEMO_HOOK_SOCKET": "/nonexistent/semo-bench.sock"}
    runs: list[tuple[str, list[str], dict[str, str]]] = []
    for name, argv in CLI_COMMANDS:
        cmd = [semo, *argv[1:]] if argv[0] == "SEMO" else [str(python), *argv]
        runs.append((name, cmd, env))
        if baseline and argv[0] == "SEMO":
            runs.append((f"{name} (baseline)", cmd, {**env, "PYTHONPATH": baseline}))
    times: dict[str, list[float]] = {name: [] for name, _, _ in runs}
    cpu: dict[str, list[float]] = {name: [] for name, _, _ in runs}
    for _ in range(rounds):
        for name, cmd, run_env in runs:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            subprocess.run(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=run_env,
                check=False,
            )
            times[name].append(time.perf_counter() - started)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[name].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    print(f"CLI start, median of {rounds}: wall (min), CPU user+sys; load {os.getloadavg()[0]:.1f}")
    for name, values in times.items():
        print(
            f"  {name:45s} {statistics.median(values) * 1000:7.1f} ms  ({min(values) * 1000:.1f})"
            f"   CPU {statistics.median(cpu[name]) * 1000:6.1f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50.0)
    parser.add_argument("--keys", type=int, default=300)
    parser.add_argument("--startup", action="store_true", help="engine start-up instead")
    parser.add_argument("--cli", action="store_true", help="command-line start instead")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument(
        "--baseline", metavar="DIR", help="--cli: also each semo command with PYTHONPATH=DIR"
    )
    args = parser.parse_args()
    if args.cli:
        cli_startup(args.rounds or 20, args.baseline)
        return
    args.rounds = args.rounds or 7
    asyncio.run(startup_async(args) if args.startup else main_async(args))


if __name__ == "__main__":
    main()
