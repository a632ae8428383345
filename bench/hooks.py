"""Hook socket under hostile input: costs of the defences, each against a same-run baseline.

    python bench/hooks.py [--repeat 21]

1. ``safe_json.loads`` against ``json.loads`` on the same text: a typical Stop request (~2 KB),
   1 MB of one long string, 1 MB of small nested objects (bracket-heavy: the worst case of the
   depth pre-scan).
2. A Stop whose transcript is a 200 MB sparse file with the turn at its end: the transcript
   reader (tail only) against reading the whole file as the engine did before.
3. Hook round trips (connect, request, answer) to a real HookServer: idle, and while another
   process holds 3,000 connections (20 processes); plus the server's open descriptors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from semo.engine import safe_json
from semo.engine.agents.claude.transcript import TranscriptScope, project_slug, read_turn_text
from semo.engine.protocol import hook_shim
from semo.engine.protocol.hooks import HookServer

HOLDER = """
import os, socket, sys
path, count, procs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for _ in range(procs - 1):
    if os.fork() == 0:
        break
held = []
for _ in range(count // procs):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    try:
        s.send(b'{"token": ')
    except OSError:
        pass
    held.append(s)
os.write(1, b"held\\n")
sys.stdin.read()
"""


def median_us(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def bench_json(repeat: int) -> None:
    stop = json.dumps(
        {
            "token": "x" * 43,
            "event": "Stop",
            "sent_at": time.time(),
            "payload": {
                "session_id": "9673d968-fd2b-43a4-9241-6effcb67657d",
                "transcript_path": "/home/u/.claude/projects/-work-x/9673d968.jsonl",
                "hook_event_name": "Stop",
                "last_assistant_message": "Done.\n" * 300,
                "effort": {"level": "high"},
                "background_tasks": [],
            },
        }
    )
    long_string = json.dumps({"payload": {"text": "a [b] {c} \\" * 90_000}})
    nested = json.dumps({"payload": [[i, {"k": [i, {"v": i}]}] for i in range(40_000)]})
    print("1. parsing, median of", repeat, "runs")
    print(f"{'input':38} {'json.loads':>12} {'safe_json':>12} {'ratio':>7}")
    for name, text in (
        (f"Stop request ({len(stop)} B)", stop),
        (f"one long string ({len(long_string) / 1e6:.1f} MB)", long_string),
        (f"small nested objects ({len(nested) / 1e6:.1f} MB)", nested),
    ):
        data = text.encode()
        base = median_us(lambda d=data: json.loads(d), repeat)
        ours = median_us(lambda d=data: safe_json.loads(d, max_bytes=1 << 24), repeat)
        print(f"{name:38} {base:10.0f}us {ours:10.0f}us {ours / base:6.2f}x")
    deep = b"[" * 1_000_000
    refused = median_us(lambda: _refuse(deep), max(3, repeat // 4))
    print(f"{'1,000,000 nested brackets (refused)':38} {'RecursionError':>12} {refused:10.0f}us")


def _refuse(data: bytes) -> None:
    try:
        safe_json.loads(data, max_bytes=1 << 24)
    except safe_json.JSONInputError:
        return
    raise AssertionError("accepted")


def bench_transcript(repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "work"
        home = Path(tmp) / "home"
        folder = home / ".claude" / "projects" / project_slug(str(work))
        folder.mkdir(parents=True)
        path = folder / "t.jsonl"
        turn = [
            {"type": "user", "message": {"content": "go"}},
            {"type": "assistant", "message": {"content": [{"type": "text", "text": "Done."}]}},
        ]
        with path.open("wb") as f:
            f.truncate(200 * 1024 * 1024)
            f.seek(0, os.SEEK_END)
            f.write(b"\n" + "".join(json.dumps(e) + "\n" for e in turn).encode())
        scope = TranscriptScope.for_session(work, {"HOME": str(home)})
        runs = max(3, repeat // 7)

        def whole_file() -> None:  # what the engine did before: in the event loop
            for raw in path.read_text(encoding="utf-8").splitlines():
                try:
                    json.loads(raw)
                except json.JSONDecodeError:
                    continue

        base = median_us(whole_file, runs) / 1000
        ours = median_us(lambda: read_turn_text(str(path), scope, final_text="Done."), runs) / 1000
        print(f"\n2. Stop with a 200 MB sparse transcript, median of {runs} runs")
        print(f"whole file read and parsed (before): {base:8.1f} ms  (blocking the event loop)")
        print(f"tail only (4 MiB, worker thread):    {ours:8.1f} ms")


async def round_trips(path: Path, token: str, count: int) -> list[float]:
    """Round trips by the shim's own client (in a thread, like the shim's process would)."""
    line = json.dumps({"token": token, "event": "Notification", "payload": {}}).encode() + b"\n"
    times = []
    for _ in range(count):
        start = time.perf_counter()
        answer = await asyncio.to_thread(hook_shim.send, str(path), line)
        assert answer.startswith(b'{"ok": true'), answer
        times.append(time.perf_counter() - start)
    return times


async def bench_flood(repeat: int) -> None:
    runtime = Path(tempfile.mkdtemp(prefix="semo-b-"))
    async with HookServer(runtime_dir=runtime, on_event=lambda _e: None) as server:
        token = server.register_session("s")
        idle = await round_trips(server.path, token, repeat * 10)
        before = len(os.listdir("/proc/self/fd"))
        holder = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            HOLDER,
            str(server.path),
            "3000",
            "20",
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        peak = 0

        async def sample() -> None:
            nonlocal peak
            while True:
                peak = max(peak, len(os.listdir("/proc/self/fd")) - before)
                await asyncio.sleep(0)

        sampler = asyncio.create_task(sample())
        during = await round_trips(server.path, token, repeat * 10)
        assert holder.stdout is not None
        for _ in range(20):
            await holder.stdout.readline()
        held = await round_trips(server.path, token, repeat * 10)
        sampler.cancel()
        assert holder.stdin is not None
        holder.stdin.close()
        await holder.wait()
        refused = sum(server.rejected.values())

    def p(values: list[float], q: float) -> float:
        return sorted(values)[int(q * (len(values) - 1))] * 1000

    print(f"\n3. hook round trips, {repeat * 10} each (ms)")
    print(f"{'':34} {'p50':>7} {'p99':>7}")
    for name, values in (
        ("idle (baseline)", idle),
        ("while 3,000 connect (20 procs)", during),
        ("while they are held", held),
    ):
        print(f"{name:34} {p(values, 0.5):7.2f} {p(values, 0.99):7.2f}")
    print(f"server fds above idle at peak: {peak}; connections refused or dropped: {refused}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=21)
    args = parser.parse_args()
    bench_json(args.repeat)
    bench_transcript(args.repeat)
    asyncio.run(bench_flood(args.repeat))


if __name__ == "__main__":
    main()
