"""Hostile input against the control socket's frames, round two (issue 21, items 5 and 12), and
its fuzz: a real `semo engine` process, consoles as real `EngineClient`s on its socket.

- An agent's one turn of 70 large questions (and the events about them) puts well over 8 MiB
  in front of every subscribed console at once; a long job list is one reply of ~9 MiB. Both
  consoles stay connected and get all of it (before: "engine gone" on every console).
- A request nested 100,000 levels deep gets a clear error and a closed connection, never a
  RecursionError; the engine serves on.
- The fuzz (seeded, a few seconds): frames of random sizes (announced past the limit, cut
  short, in pieces, pieces past the limit), random depths, garbage, slow peers that trickle a
  frame byte by byte, peers that vanish mid-frame. The engine never logs a traceback, a
  console subscribed throughout stays connected, and a new console is served after.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import socket
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from semo.engine.control.client import EngineClient
from semo.engine.control.wire import MAX_REQUEST_BYTES, encode_frame
from tests.support.git_repo import make_repo
from tests.support.office_toml import sqlite_office_toml
from tests.support.semo_process import semo_engine, semo_env
from tests.support.temp_dirs import short_temp_dir
from tests.support.waiting import eventually, eventually_value

pytestmark = pytest.mark.timeout(300)

HOSTILE = Path(__file__).resolve().parents[1] / "support" / "hostile_agent.py"
TIMEOUT = 120.0

CONFIG = (
    sqlite_office_toml("frames")
    + """
[engine]
log_format = "text"
shutdown_grace = 1

# 70 questions of ~63 KiB in one turn: over the default per-agent budgets (issue 21 #2),
# which would refuse most of them before they reach a console
[budgets]
questions = 100
bytes = 16777216

[pool]
max_sessions = 2
warm_roles = ["EVIL"]

[[agents]]
role = "EVIL"
profile = "generic"
command = {evil}

[[agents]]
role = "JOBS"
profile = "generic"
command = {idle}
"""
)

#: an agent that never shows a prompt: jobs for it wait (the list is what is tested)
IDLE = "import sys; sys.stdin.read()"


def block(payload: dict[str, object]) -> str:
    return f"[ASK_USER]\n{json.dumps(payload)}\n[/ASK_USER]"


@dataclass(frozen=True)
class Paths:
    """What EngineClient needs to reach the engine."""

    office: str
    socket: Path


@dataclass
class Engine:
    folder: Path
    runtime: Path
    process: asyncio.subprocess.Process

    @property
    def log(self) -> str:
        return (self.folder / "engine.log").read_text(errors="replace")

    def socket(self) -> Path:
        found = sorted((self.runtime / "semo").glob("control-*.sock"))
        return found[0]

    async def console(self) -> EngineClient:
        # the info file is written once the socket listens
        await eventually(lambda: any((self.runtime / "semo").glob("control-*.json")), TIMEOUT)
        client = EngineClient(Paths("frames", self.socket()))
        await client.start()
        return client


@contextlib.asynccontextmanager
async def engine(folder: Path, replies: list[dict[str, object]]) -> AsyncIterator[Engine]:
    make_repo(folder / "repo")
    (folder / "script.json").write_text(json.dumps(replies))
    evil = [sys.executable, str(HOSTILE), "--script", str(folder / "script.json")]
    evil += ["--log", str(folder / "prompts.jsonl")]
    idle = [sys.executable, "-c", IDLE]
    config = folder / "semo.toml"
    config.write_text(CONFIG.format(evil=json.dumps(evil), idle=json.dumps(idle)))
    with short_temp_dir("semo-f") as runtime, (folder / "engine.log").open("wb") as log:
        env = semo_env(XDG_RUNTIME_DIR=str(runtime), XDG_STATE_HOME=str(folder / "state"))
        async with semo_engine(config, env, log, grace=30) as process:
            yield Engine(folder, runtime, process)


async def evil_session(console: EngineClient) -> str:
    async def ready() -> str | None:
        for session in console.sessions():
            if session.role == "EVIL" and session.state.value == "ready":
                return session.session_id
        return None

    return await eventually_value(ready, "the hostile agent ready", TIMEOUT)


async def test_70_large_questions_and_a_long_job_list_keep_every_console(tmp_path: Path) -> None:
    # 70 questions of ~63 KiB: 4.4 MB in the office snapshot and as much again in events
    questions = [(f"{i:02d} " + "why? " * 12_600).strip() for i in range(70)]
    turn = "\n".join(block({"type": "text", "question": q}) for q in questions)
    async with engine(tmp_path, [{"match": "go", "text": turn}]) as running:
        first, second = await running.console(), await running.console()
        try:
            session_id = await evil_session(first)
            await first.prompt(session_id, "go")

            async def all_asked() -> list[str] | None:
                for console in (first, second):
                    assert console.gone is None, console.gone
                one, two = await first.pending_questions(), await second.pending_questions()
                asked = [q.question for q in two]
                return asked if len(one) == len(two) == 70 else None

            asked = await eventually_value(all_asked, "70 questions on both consoles", TIMEOUT)
            assert sorted(asked) == questions

            # a job list of ~9 MiB is one reply
            for i in range(90):
                await first.create_job("JOBS", f"job {i:02d} " + "x" * 99_000)
            jobs = await first.list_jobs()
            assert len(jobs) == 90 and {len(job.task) for job in jobs} == {99_007}
            assert first.gone is None and second.gone is None
            assert "reads too slowly" not in running.log
        finally:
            await first.close()
            await second.close()


def nested(depth: int) -> bytes:
    body = b'{"op":"ping","id":1,"x":' + b"[" * depth + b"]" * depth + b"}"
    return len(body).to_bytes(4, "big") + body


async def raw_exchange(path: Path, data: bytes) -> bytes:
    """Send `data` as a stranger (this test process) and read until the engine closes."""
    reader, writer = await asyncio.open_unix_connection(str(path))
    try:
        writer.write(data)
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        return await asyncio.wait_for(reader.read(), 30)
    finally:
        writer.close()


async def test_a_deeply_nested_frame_is_a_clear_error(tmp_path: Path) -> None:
    async with engine(tmp_path, []) as running:
        watcher = await running.console()
        try:
            answer = await raw_exchange(running.socket(), nested(100_000))
            assert b'"t":"error"' in answer and b"nested deeper than 64 levels" in answer
            assert await watcher.request({"op": "ping"}) is not None
            assert watcher.gone is None
        finally:
            await watcher.close()
    assert "RecursionError" not in running.log and "Traceback" not in running.log


def fuzz_frame(rng: random.Random) -> tuple[bytes, bytes | None]:
    """One random thing to send (a frame of a random size, depth or shape, or garbage) and
    what the engine must answer to it whole: an error frame, a reply, or None (not known)."""
    shape = rng.randrange(7)
    error, reply = b'"t":"error"', b'"t":"reply"'
    if shape == 0:  # announced past the limit
        return rng.randrange(MAX_REQUEST_BYTES + 1, 1 << 31).to_bytes(4, "big") + b"{}", error
    if shape == 1:  # cut short (the engine waits for the rest)
        return (1000).to_bytes(4, "big") + b'{"op":"ping"', None
    if shape == 2:  # random depth (the request object is one level more)
        depth = rng.choice([1, 10, 63, 64, 65, 200, 5_000, 200_000])
        return nested(depth), reply if depth + 1 <= 64 else error
    if shape == 3:  # pieces (the top bit: more follows) of spaces, possibly past the limit
        pieces = rng.randrange(1, 6)
        size = rng.choice([10, 1 << 10, 1 << 19, MAX_REQUEST_BYTES // 2])
        data = b""
        for i in range(pieces):
            more = (1 << 31) if i < pieces - 1 else 0
            data += (size | more).to_bytes(4, "big") + b" " * size
        return data, error
    if shape == 4:  # garbage
        return rng.randbytes(rng.randrange(1, 4096)), None
    if shape == 5:  # a valid request of a random operation and junk arguments
        op = rng.choice(["ping", "attach", "input", "answer", "jobs", "nope", 7, None])
        request = {"op": op, "id": rng.randrange(100), "session": [1, {"a": None}]}
        return encode_frame(request), reply
    return encode_frame({"op": "ping", "id": "x" * rng.randrange(1, 1 << 16)}), reply


async def exchange(path: Path, data: bytes, needle: bytes) -> bytes:
    """Send `data` (while the engine may close the connection half way: what it said before
    is still read) and return what the engine sends until `needle` or its close."""
    loop = asyncio.get_running_loop()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.setblocking(False)
        await loop.sock_connect(sock, str(path))

        async def send() -> None:
            with contextlib.suppress(OSError):
                await loop.sock_sendall(sock, data)

        async def receive() -> bytes:
            received = b""
            async with asyncio.timeout(20):
                while needle not in received and (chunk := await loop.sock_recv(sock, 1 << 16)):
                    received += chunk
            return received

        _, answer = await asyncio.gather(send(), receive())
    return answer


async def fuzz_peer(path: Path, rng: random.Random) -> None:
    """One peer: sends a fuzz frame whole (and checks the answer), slowly, or vanishes in
    the middle of it."""
    data, expect = fuzz_frame(rng)
    style = rng.randrange(3)
    if style == 0 and expect is not None:
        answer = await exchange(path, data, expect)
        assert expect in answer, (data[:80], answer[-300:])
        return
    _, writer = await asyncio.open_unix_connection(str(path))
    try:  # the engine may close first (a header past the limit): that is its answer
        if style == 1:  # slow: a byte at a time, then gone
            for byte in data[: rng.randrange(1, 40)]:
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(0.01)
        else:  # vanishes mid-frame (or sends what has no known answer and goes)
            writer.write(data[: rng.randrange(1, len(data) + 1)])
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def test_fuzz_the_control_socket(tmp_path: Path) -> None:
    rng = random.Random(21)
    async with engine(tmp_path, []) as running:
        watcher = await running.console()
        try:
            path = running.socket()
            deadline = time.monotonic() + 4.0
            rounds = 0
            while time.monotonic() < deadline:
                await asyncio.gather(*(fuzz_peer(path, rng) for _ in range(8)))
                rounds += 1
            assert rounds > 3
            assert watcher.gone is None
            assert (await watcher.request({"op": "ping"}))["consoles"] >= 1
            late = await running.console()
            await late.close()
        finally:
            await watcher.close()
        assert running.process.returncode is None
    assert "Traceback" not in running.log and "RecursionError" not in running.log
