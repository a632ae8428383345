"""Command delivery: insert -> claimed latency, exactly-once with two engines, SIGKILL recovery.

    python bench/delivery.py [--commands 300] [--backends sqlite postgres]

- latency: an engine task waits (`wait_for_change`) and claims; another process inserts
  commands one at a time, as `semo command` or a web app would, stamping wall time in the
  payload. Reports p50/p99 from insert to claim, per backend.
- exactly-once: two engine processes drain 2,000 commands of one Postgres office; every command
  must be executed once and have exactly one result row.
- sigkill: an engine process claims a send_prompt and a get_output command and is killed with
  SIGKILL; after the lease expires, a second engine's `recover_expired` requeues the safe one
  (and runs it) and fails the other with a reason.
Postgres figures use a fresh database on $SEMO_TEST_POSTGRES (default 127.0.0.1:5432).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

from engine.store.base import Store
from engine.store.migrate import migrate
from engine.store.models import Office
from engine.store.postgres import PostgresStore
from engine.store.sqlite import SqliteStore

ADMIN_DSN = os.environ.get("SEMO_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
ROOT = Path(__file__).resolve().parents[1]

INSERTER = """
import asyncio, sys, time
from engine.store.{module} import {cls}
async def main():
    store = {cls}(sys.argv[1])
    async with store:
        for i in range(int(sys.argv[3])):
            stamp = repr(time.time())  # carried in session_id: the claimer knows when it was sent
            await store.insert_command(sys.argv[2], "get_output", {{}}, session_id=stamp)
            await asyncio.sleep(0.01)
asyncio.run(main())
"""

ENGINE = """
import asyncio, sys
from engine.store.postgres import PostgresStore
async def main():
    store = PostgresStore(sys.argv[1])
    name = sys.argv[3]
    async with store:
        idle = 0
        while idle < 20:
            command = await store.claim_next_command(sys.argv[2], name, 30)
            if command is None:
                idle += 1
                await store.wait_for_change(sys.argv[2], 0.1)
                continue
            idle = 0
            print(command.id, flush=True)
            await store.complete_command(command.id, name, success=True, result={{"by": name}})
asyncio.run(main())
"""

CLAIM_AND_HANG = """
import asyncio, sys
from engine.store.postgres import PostgresStore
async def main():
    store = PostgresStore(sys.argv[1])
    async with store:
        for _ in range(2):
            command = await store.claim_next_command(sys.argv[2], "doomed", 2.0)
            print(command.command_type, flush=True)
        await asyncio.sleep(3600)
asyncio.run(main())
"""


@asynccontextmanager
async def fresh_database() -> AsyncIterator[str]:
    admin = await psycopg.AsyncConnection.connect(ADMIN_DSN, autocommit=True)
    name = f"semo_bench_{uuid.uuid4().hex[:12]}"
    await admin.execute(f'create database "{name}"')
    try:
        dsn = make_conninfo(ADMIN_DSN, dbname=name)
        await migrate(dsn)
        yield dsn
    finally:
        await admin.execute(f'drop database if exists "{name}" with (force)')
        await admin.close()


def python(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", code, *args]


def percentiles(values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {statistics.median(ordered):6.1f} ms   p99 {p99:6.1f} ms   n={len(ordered)}"


async def measure_latency(store: Store, target: str, module: str, cls: str, count: int) -> str:
    office = await store.create_office(Office(name="bench"))
    inserter = await asyncio.create_subprocess_exec(
        *python(INSERTER.format(module=module, cls=cls), target, office.id, str(count)),
        cwd=ROOT,
    )
    latencies: list[float] = []
    while len(latencies) < count:
        command = await store.claim_next_command(office.id, "bench")
        if command is None:
            await store.wait_for_change(office.id, 1.0)
            continue
        latencies.append((time.time() - float(command.session_id or 0)) * 1000)
        await store.complete_command(command.id, "bench", success=True)
    await inserter.wait()
    return percentiles(latencies)


async def latency(backends: list[str], count: int) -> None:
    print(f"insert (another process) -> claimed, {count} commands, 10 ms apart")
    for backend in backends:
        if backend == "sqlite":
            with tempfile.TemporaryDirectory() as tmp:
                path = str(Path(tmp) / "semo.db")
                async with SqliteStore(path) as store:
                    figures = await measure_latency(store, path, "sqlite", "SqliteStore", count)
        else:
            async with fresh_database() as dsn, PostgresStore(dsn) as store:
                figures = await measure_latency(store, dsn, "postgres", "PostgresStore", count)
        print(f"  {backend:<9} {figures}")


async def exactly_once(total: int = 2000) -> None:
    async with fresh_database() as dsn, PostgresStore(dsn) as store:
        office = await store.create_office(Office(name="bench"))
        for _ in range(total):
            await store.insert_command(office.id, "get_output", {}, session_id="s")
        started = time.perf_counter()
        engines = [
            subprocess.Popen(  # noqa: ASYNC220 - the engines are separate processes on purpose
                python(ENGINE.format(), dsn, office.id, f"engine-{n}"),
                cwd=ROOT,
                stdout=subprocess.PIPE,
                text=True,
            )
            for n in (1, 2)
        ]
        outputs = [engine.communicate(timeout=300)[0].split() for engine in engines]
        elapsed = time.perf_counter() - started
        executed = [command for output in outputs for command in output]
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            cur = await conn.execute(
                "select count(*), count(distinct command_id) from agent_command_results"
            )
            results, distinct = await cur.fetchone()  # type: ignore[misc]
        print(
            f"two engines, one office, {total} commands in {elapsed:.1f} s: executed "
            f"{len(executed)} ({len(set(executed))} distinct; per engine "
            f"{', '.join(str(len(o)) for o in outputs)}), result rows {results} "
            f"({distinct} distinct)"
        )


async def sigkill() -> None:
    async with fresh_database() as dsn, PostgresStore(dsn) as store:
        office = await store.create_office(Office(name="bench"))
        prompt = await store.insert_command(
            office.id, "send_prompt", {"prompt": "x"}, session_id="s"
        )
        output = await store.insert_command(office.id, "get_output", {}, session_id="s")
        doomed = subprocess.Popen(  # noqa: ASYNC220 - killed with SIGKILL below
            python(CLAIM_AND_HANG, dsn, office.id), cwd=ROOT, stdout=subprocess.PIPE, text=True
        )
        assert doomed.stdout is not None
        claimed = [doomed.stdout.readline().strip() for _ in range(2)]
        killed_at = time.monotonic()
        os.kill(doomed.pid, signal.SIGKILL)
        doomed.wait()
        recovered: list[str] = []
        while len(recovered) < 2:
            recovered += [f"{c.command_type}->{c.status}" for c in await store.recover_expired()]
            await asyncio.sleep(0.05)
        handled_after = time.monotonic() - killed_at
        again = await store.claim_next_command(office.id, "survivor")
        assert again is not None and again.id == output.id
        await store.complete_command(again.id, "survivor", success=True)
        failed = await store.get_result(prompt.id)
        assert failed is not None
        print(
            f"SIGKILL with {claimed} claimed (lease 2 s): recovered {handled_after:.2f} s "
            f"after the kill: {', '.join(sorted(recovered))}; send_prompt result: "
            f"success={failed.success}, error={failed.error!r}"
        )


async def main_async(args: argparse.Namespace) -> None:
    await latency(args.backends, args.commands)
    if "postgres" in args.backends:
        await exactly_once()
        await sigkill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=300)
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgres"])
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
