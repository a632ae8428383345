"""Keystroke -> echo latency in one session while another floods its terminal.

    python bench/latency.py [--mb 50] [--keys 300]

Session B runs `cat` (the tty echoes each key); session A runs `cat` on a file of --mb MB of
log lines, restarted whenever it ends, so it floods for the whole measurement. Both live on one
asyncio loop, as sessions do in the engine. A key counts as echoed when B's screen shows it.
The same measurement without the flood runs first, as the baseline of this run.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import string
import tempfile
import time
from pathlib import Path

from engine.terminal.session import TerminalSession

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50.0)
    parser.add_argument("--keys", type=int, default=300)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
