"""The Sessions REST API on a local engine: requests/s and latency of GET sessions and POST
prompt, beside the same work done straight on the store.

    python bench/api.py [--seconds 5] [--concurrency 1 8 32] [--prompts 30] [--dispatcher-poll S]

An engine (SQLite store, `generic` bash agents: one warm, two more created through the API)
and the API (uvicorn on 127.0.0.1, its own connection to the store, as `semo engine --http`)
run in a child process; this process is the client (httpx, one connection per worker).

- GET /api/offices/{id}/sessions: `--seconds` of back-to-back requests per concurrency level;
  beside it, `store.list_sessions` called in this process (no HTTP) for the floor.
- POST .../sessions/{sid}/prompt (`{"prompt": "true"}`, no wait: the result is "delivered"):
  `--prompts` per session, one worker per session, one and three sessions at once; beside it,
  the same command inserted on the store and its result awaited in this process
  (`insert_command` + `wait_for_result`, as `semo command --wait` does).

`--dispatcher-poll S` sets the engine dispatcher's poll interval (default: the engine's own,
5 s); see the "Latency" note in docs/API.md for why it matters today.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TOKEN = "bench-api-token-0123456789abcdef"
OFFICE = "bench-api"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}


# -- the server (child process) -----------------------------------------------------------------


async def serve(folder: Path, dispatcher_poll: float | None) -> None:
    from pydantic import SecretStr

    from semo.engine.api.server import ApiServer
    from semo.engine.api.settings import ApiSettings
    from semo.engine.config import AgentConfig, EngineConfig, OfficeConfig, PoolConfig, SemoConfig
    from semo.engine.engine import Engine
    from semo.engine.logs import configure_logging
    from semo.engine.store.sqlite import SqliteStore

    log = (folder / "engine.log").open("w")
    configure_logging("json", stream=log)  # the claims, for the breakdown
    db = folder / "semo.db"
    work = folder / "work"
    work.mkdir(exist_ok=True)
    config = SemoConfig(
        office=OfficeConfig(name=OFFICE, repository=folder, workspace_root=folder / "ws"),
        store={"backend": "sqlite", "sqlite_path": db},
        engine=EngineConfig(id="bench-api-engine", shutdown_grace=1),
        pool=PoolConfig(max_sessions=4, warm_roles=["SH"]),
        agents=[
            AgentConfig(
                role="SH",
                profile="generic",
                command=["bash", "--norc", "--noprofile", "-i"],
                env={"PS1": "$ "},
                cols=80,
                rows=24,
            )
        ],
    )
    runtime = Path(tempfile.mkdtemp(prefix="semo-bench-"))
    engine = Engine(
        config, store=SqliteStore(db), runtime_dir=runtime, folder_for=lambda a, t: work
    )
    api_store = SqliteStore(db)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    await engine.store.open()
    await engine.start()
    if dispatcher_poll is not None and engine.dispatcher is not None:
        engine.dispatcher.poll_interval = dispatcher_poll
    await api_store.open()
    server = ApiServer(api_store, ApiSettings(tokens={OFFICE: SecretStr(TOKEN)}))
    await server.start("127.0.0.1", 0)
    print(json.dumps({"url": server.url, "office": engine.office_id, "db": str(db)}), flush=True)
    try:
        await stop.wait()
    finally:
        await server.stop()
        await api_store.close()
        await engine.stop("bench over")
        await engine.store.close()
        shutil.rmtree(runtime, ignore_errors=True)


# -- the client -----------------------------------------------------------------------------------


def summary(name: str, latencies: list[float], elapsed: float) -> str:
    ms = sorted(x * 1000 for x in latencies)
    q = statistics.quantiles(ms, n=100, method="inclusive") if len(ms) > 1 else ms * 99
    rate = len(ms) / elapsed if elapsed > 0 else 0.0
    return (
        f"  {name:<34} {rate:8.1f} req/s   p50 {q[49]:7.2f}   p95 {q[94]:7.2f}   "
        f"p99 {q[98]:7.2f}   max {ms[-1]:7.2f} ms   n={len(ms)}"
    )


async def get_sessions(url: str, office: str, concurrency: int, seconds: float) -> str:
    latencies: list[float] = []
    endpoint = f"{url}/api/offices/{office}/sessions"

    async def worker(client: httpx.AsyncClient, deadline: float) -> None:
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            response = await client.get(endpoint)
            latencies.append(time.perf_counter() - started)
            assert response.status_code == 200, response.text

    clients = [httpx.AsyncClient(headers=HEADERS, timeout=60) for _ in range(concurrency)]
    try:
        for client in clients:  # connect first
            (await client.get(endpoint)).raise_for_status()
        started = time.perf_counter()
        deadline = started + seconds
        await asyncio.gather(*(worker(c, deadline) for c in clients))
        elapsed = time.perf_counter() - started
    finally:
        for client in clients:
            await client.aclose()
    return summary(f"GET sessions, {concurrency} at once", latencies, elapsed)


@dataclass
class Sent:
    """One command: wall times around it (this process) and its id."""

    command_id: str
    sent: float
    answered: float


async def post_prompts(
    url: str, office: str, sessions: list[str], prompts: int, sent: list[Sent]
) -> str:
    latencies: list[float] = []

    async def worker(session: str) -> None:
        endpoint = f"{url}/api/offices/{office}/sessions/{session}/prompt"
        async with httpx.AsyncClient(headers=HEADERS, timeout=60) as client:
            for _ in range(prompts):
                wall, started = time.time(), time.perf_counter()
                response = await client.post(endpoint, json={"prompt": "true"})
                latencies.append(time.perf_counter() - started)
                assert response.status_code == 200, response.text
                sent.append(Sent(response.json()["command_id"], wall, time.time()))

    started = time.perf_counter()
    await asyncio.gather(*(worker(s) for s in sessions))
    elapsed = time.perf_counter() - started
    n = len(sessions)
    return summary(f"POST prompt, {n} session{'s' * (n > 1)} at once", latencies, elapsed)


def claims(log: Path) -> dict[str, float]:
    """command id -> when the engine claimed it (wall time), from its JSON log."""
    found: dict[str, float] = {}
    for line in log.read_text().splitlines():
        record = json.loads(line)
        words = record["msg"].split()
        if record["logger"] == "semo.routing" and words[:1] == ["command"] and "claimed" in words:
            found[words[1]] = datetime.fromisoformat(record["ts"]).timestamp()
    return found


async def breakdown(db: str, log: Path, sent: list[Sent]) -> str:
    """Medians of: sent -> row inserted -> claimed -> result row -> answer received."""
    from semo.engine.store.sqlite import SqliteStore

    claimed_at = claims(log)
    parts: dict[str, list[float]] = {"insert": [], "claim": [], "run": [], "answer": []}
    async with SqliteStore(db) as store:
        for one in sent:
            command = await store.get_command(one.command_id)
            result = await store.get_result(one.command_id)
            assert result is not None
            inserted = command.created_at.timestamp()
            claimed = claimed_at[one.command_id]
            done = result.created_at.timestamp()
            parts["insert"].append(inserted - one.sent)
            parts["claim"].append(claimed - inserted)
            parts["run"].append(done - claimed)
            parts["answer"].append(one.answered - done)
    med = {k: statistics.median(v) * 1000 for k, v in parts.items()}
    slow = sum(1 for v in parts["claim"] if v > 1.0)
    return (
        f"    of which (medians): sent -> row {med['insert']:.1f}, row -> claimed "
        f"{med['claim']:.1f}, claimed -> result {med['run']:.1f}, result -> answer "
        f"{med['answer']:.1f} ms; claimed after more than 1 s: {slow} of {len(sent)}"
    )


async def store_baseline(
    db: str, log: Path, office: str, sessions: list[str], prompts: int
) -> list[str]:
    from semo.engine.office.operations import wait_for_result
    from semo.engine.store.sqlite import SqliteStore

    lines = []
    async with SqliteStore(db) as store:
        latencies = []
        started = time.perf_counter()
        deadline = started + 2.0
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            await store.list_sessions(office)
            latencies.append(time.perf_counter() - t0)
        lines.append(
            summary("store.list_sessions (no HTTP)", latencies, time.perf_counter() - started)
        )
        latencies = []

        direct: list[Sent] = []

        async def worker(session: str) -> None:
            for _ in range(prompts):
                wall, t0 = time.time(), time.perf_counter()
                command = await store.insert_command(
                    office, "send_prompt", {"prompt": "true"}, session_id=session
                )
                result = await wait_for_result(store, office, command.id, 60)
                latencies.append(time.perf_counter() - t0)
                assert result is not None and result.success, result
                direct.append(Sent(command.id, wall, time.time()))

        started = time.perf_counter()
        await worker(sessions[0])
        lines.append(
            summary("store insert + wait (no HTTP), 1", latencies, time.perf_counter() - started)
        )
    lines.append(await breakdown(db, log, direct))
    return lines


async def bench(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="semo-bench-api-"))
    command = [sys.executable, __file__, "--serve", str(folder)]
    if args.dispatcher_poll is not None:
        command += ["--dispatcher-poll", str(args.dispatcher_poll)]
    server = subprocess.Popen(  # noqa: ASYNC220 (started once, before any measurement)
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert server.stdout is not None
        info = json.loads(server.stdout.readline())
        url, office = info["url"], info["office"]
        async with httpx.AsyncClient(headers=HEADERS, timeout=60) as client:
            sessions: list[str] = []
            for _ in range(50):
                listed = (await client.get(f"{url}/api/offices/{office}/sessions")).json()
                sessions = [s["session_id"] for s in listed if s["status"] == "ready"]
                if sessions:
                    break
                await asyncio.sleep(0.1)
            for _ in range(2):  # two more bash sessions, through the API
                made = await client.post(
                    f"{url}/api/offices/{office}/sessions", json={"role": "SH"}
                )
                made.raise_for_status()
                sessions.append(made.json()["session"]["session_id"])
        poll = args.dispatcher_poll if args.dispatcher_poll is not None else "5 (default)"
        load = os.getloadavg()[0]
        print(
            f"engine + API in a child process, client here; sqlite; bash sessions: "
            f"{len(sessions)}; dispatcher poll {poll} s; load {load:.1f}"
        )
        for concurrency in args.concurrency:
            print(await get_sessions(url, office, concurrency, args.seconds), flush=True)
        for group in (sessions[:1], sessions):
            sent: list[Sent] = []
            print(await post_prompts(url, office, group, args.prompts, sent), flush=True)
            print(await breakdown(info["db"], folder / "engine.log", sent), flush=True)
        for line in await store_baseline(
            info["db"], folder / "engine.log", office, sessions, args.prompts
        ):
            print(line, flush=True)
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="per GET row (default 5)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--prompts", type=int, default=30, help="per session (default 30)")
    parser.add_argument("--dispatcher-poll", type=float, default=None, metavar="S")
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        asyncio.run(serve(args.serve, args.dispatcher_poll))
    else:
        asyncio.run(bench(args))


if __name__ == "__main__":
    main()
