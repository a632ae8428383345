"""Command delivery: insert -> claimed latency, exactly-once with two engines, SIGKILL recovery,
and the supabase backend under Realtime faults.

    python bench/delivery.py [--commands 300] [--backends sqlite postgres supabase]
    python bench/delivery.py --faults [--fault-commands 10000] [--fault-pause MS] [--latency]

- latency: an engine task waits (`wait_for_change`) and claims; another process inserts
  commands one at a time, as `semo command` or a web app would, stamping wall time in the
  payload. Reports p50/p99 from insert to claim, per backend. supabase: the Supabase emulator
  (tests/support/supabase_emulator) in a process of its own, as the real server would be, over a
  fresh Supabase-shaped database migrated with 0007 (private channel, members, least
  privilege), as strict as Supabase: every REST request runs as its JWT's role with RLS and
  every Realtime change is checked against the subscriber's RLS; supabase-lax is the same run's
  baseline with the emulator as it was before (superuser REST, no Realtime check). Both the
  inserter and the engine use SupabaseStore (PostgREST + Realtime) with the service role.
- exactly-once: two engine processes drain 2,000 commands of one Postgres office; every command
  must be executed once and have exactly one result row.
- sigkill: an engine process claims a send_prompt and a get_output command and is killed with
  SIGKILL; after the lease expires, a second engine's `recover_expired` requeues the safe one
  (and runs it) and fails the other with a reason.
- faults (--faults): an inserter process puts 10,000 commands through SupabaseStore (PostgREST),
  10 ms apart (--fault-pause), while the emulator drops every Realtime socket every 200 ms and
  loses 5 % of change events; one engine (SupabaseStore, waiting up to 60 s per
  `wait_for_change`, so only the store's own hints wake it) claims and completes them. Reports
  commands never claimed, commands executed twice, result rows, reconnect time after each drop
  (drop -> SUBSCRIBED), total time.
Postgres figures use a fresh database on $SEMO_TEST_POSTGRES (default 127.0.0.1:5432).
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from semo.engine.store.base import Store, StoreUnavailable
from semo.engine.store.migrate import migrate
from semo.engine.store.models import Office
from semo.engine.store.postgres import PostgresStore
from semo.engine.store.sqlite import SqliteStore
from semo.engine.store.supabase import SupabaseStore

ADMIN_DSN = os.environ.get("SEMO_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
ROOT = Path(__file__).resolve().parents[1]
KEY_VARIABLE = "SEMO_BENCH_SUPABASE_KEY"  # the emulator's key, for the inserter process

INSERTER = """
import asyncio, os, sys, time
from semo.engine.store.{module} import {cls}
async def main():
    store = {cls}(sys.argv[1], *([os.environ["{key}"]] if "{key}" in os.environ else []))
    async with store:
        for i in range(int(sys.argv[3])):
            stamp = repr(time.time())  # carried in session_id: the claimer knows when it was sent
            await store.insert_command(sys.argv[2], "get_output", {{}}, session_id=stamp)
            await asyncio.sleep(0.01)
asyncio.run(main())
"""

ENGINE = """
import asyncio, sys
from semo.engine.store.postgres import PostgresStore
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
from semo.engine.store.postgres import PostgresStore
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


def inserter_code(module: str, cls: str) -> str:
    return INSERTER.format(module=module, cls=cls, key=KEY_VARIABLE)


#: The Supabase emulator in a process of its own (the engine must not share its GIL, as it would
#: not share a machine with Supabase). Prints {"url", "key", "dsn"}, then obeys JSON lines on
#: stdin: {"op": "faults", "period", "loss"} starts dropping every socket every `period` s and
#: losing that share of change events; {"op": "calm"} stops and prints the drops (monotonic
#: times: the same clock as this process on Linux) and the emulator's counters; EOF ends it.
EMULATOR = """
import dataclasses, json, sys, threading, time
from tests.support.supabase_emulator import (
    SupabaseEmulator, default_migrations, temporary_database)

def main():
    strict = sys.argv[2] == "strict"
    with temporary_database(sys.argv[1], migrations=default_migrations()) as dsn:
        with SupabaseEmulator(dsn, switch_roles=strict, realtime_rls=strict) as emu:
            say({"url": emu.url, "key": emu.service_role_key, "dsn": dsn})
            stop, drops, idle, thread = threading.Event(), [], [0], None

            def dropper(period):
                tick = time.monotonic()
                while not stop.is_set():
                    tick += period
                    stop.wait(max(0.0, tick - time.monotonic()))
                    if stop.is_set():
                        return
                    at = time.monotonic()
                    if emu.drop_sockets():
                        drops.append(at)
                    else:
                        idle[0] += 1  # nothing open: the client is still reconnecting

            for line in sys.stdin:
                order = json.loads(line)
                if order["op"] == "faults":
                    emu.set_event_loss(order["loss"], seed=4)
                    thread = threading.Thread(target=dropper, args=(order["period"],))
                    thread.start()
                    say({"ok": True})
                elif order["op"] == "calm":
                    stop.set()
                    if thread is not None:
                        thread.join()
                    emu.set_event_loss(0.0)
                    stats = dataclasses.asdict(emu.stats())
                    say({"drops": drops, "idle": idle[0], "stats": stats})

def say(data):
    print(json.dumps(data), flush=True)

main()
"""


class EmulatorProcess:
    """The handle on an EMULATOR process."""

    def __init__(self, process: asyncio.subprocess.Process, hello: dict[str, Any]) -> None:
        self.process = process
        self.url: str = hello["url"]
        self.key: str = hello["key"]
        self.dsn: str = hello["dsn"]

    async def order(self, **order: Any) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write((json.dumps(order) + "\n").encode())
        await self.process.stdin.drain()
        return json.loads(await self.process.stdout.readline())


@asynccontextmanager
async def emulated_supabase(strict: bool = True) -> AsyncIterator[EmulatorProcess]:
    """A fresh migrated database served by the Supabase emulator in its own process: strict
    (requests as the JWT's role with RLS, Realtime changes checked against RLS per subscriber,
    as Supabase), or not (the emulator before issue 16: REST as the superuser, no check)."""
    process = await asyncio.create_subprocess_exec(
        *python(EMULATOR, ADMIN_DSN, "strict" if strict else "lax"),
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), 60)
        if not line:
            raise RuntimeError("the emulator process did not start")
        yield EmulatorProcess(process, json.loads(line))
    finally:
        if process.stdin is not None:
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 30)
        except TimeoutError:
            process.kill()
            await process.wait()


async def measure_latency(
    store: Store,
    target: str,
    module: str,
    cls: str,
    count: int,
    env: dict[str, str] | None = None,
) -> str:
    office = await store.create_office(Office(name="bench"))
    inserter = await asyncio.create_subprocess_exec(
        *python(inserter_code(module, cls), target, office.id, str(count)),
        cwd=ROOT,
        env={**os.environ, **(env or {})},
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
        elif backend in ("supabase", "supabase-lax"):
            async with (
                emulated_supabase(strict=backend == "supabase") as emu,
                SupabaseStore(emu.url, emu.key) as store,
            ):
                figures = await measure_latency(
                    store, emu.url, "supabase", "SupabaseStore", count, env={KEY_VARIABLE: emu.key}
                )
        else:
            async with fresh_database() as dsn, PostgresStore(dsn) as store:
                figures = await measure_latency(store, dsn, "postgres", "PostgresStore", count)
        print(f"  {backend:<12} {figures}", flush=True)


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


FAULT_INSERTER = """
import asyncio, os, sys, time
from semo.engine.store.supabase import SupabaseStore
async def main():
    async with SupabaseStore(sys.argv[1], os.environ["{key}"]) as store:
        for i in range(int(sys.argv[3])):
            stamp = repr(time.time())
            await store.insert_command(sys.argv[2], "get_output", {{}}, session_id=stamp)
            await asyncio.sleep(float(sys.argv[4]))
asyncio.run(main())
"""


def spread(values: list[float], unit: float = 1000.0) -> str:
    if not values:
        return "n=0"
    ordered = sorted(v * unit for v in values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (
        f"p50 {statistics.median(ordered):6.1f} ms   p99 {p99:6.1f} ms   "
        f"max {ordered[-1]:6.1f} ms   n={len(ordered)}"
    )


async def faults(
    total: int,
    pause: float = 0.01,
    drop_every: float = 0.2,
    loss: float = 0.05,
    strict: bool = True,
) -> None:
    import bisect
    import logging

    # realtime-py logs every dropped socket at ERROR: thousands of lines here
    logging.getLogger("realtime").setLevel(logging.CRITICAL)
    print(
        f"supabase under faults: {total} commands inserted by another process through PostgREST"
        f" ({pause * 1000:g} ms apart); the emulator drops the Realtime socket every"
        f" {drop_every * 1000:.0f} ms and loses {loss:.0%} of change events; one engine claims"
        f" and completes ({'strict' if strict else 'lax'} emulator)",
        flush=True,
    )
    async with emulated_supabase(strict) as emu:
        engine = SupabaseStore(emu.url, emu.key)
        async with engine:
            office = await engine.create_office(Office(name="faults"))
            assert await engine.wait_for_change(office.id, 0) is False  # start watching
            for _ in range(1000):  # its channel is subscribed
                if engine.stats.ready_at:
                    break
                await asyncio.sleep(0.01)
            claims: dict[str, int] = {}
            latencies: list[float] = []
            unavailable = 0
            await emu.order(op="faults", period=drop_every, loss=loss)
            started = time.monotonic()
            inserter = await asyncio.create_subprocess_exec(
                *python(
                    FAULT_INSERTER.format(key=KEY_VARIABLE),
                    emu.url,
                    office.id,
                    str(total),
                    str(pause),
                ),
                cwd=ROOT,
                env={**os.environ, KEY_VARIABLE: emu.key},
            )
            inserted_at: float | None = None
            ended: list[float] = []
            inserter_done = asyncio.create_task(inserter.wait())
            inserter_done.add_done_callback(lambda _: ended.append(time.monotonic()))
            # until every command is claimed, or 30 s (six slow-timer periods) after the last
            # insert: what is still unclaimed then is lost
            while len(claims) < total:
                if inserted_at is None and ended:
                    inserted_at = ended[0]
                if inserted_at is not None and time.monotonic() - inserted_at > 30:
                    break
                try:
                    command = await engine.claim_next_command(office.id, "engine", 30)
                    if command is None:
                        await engine.wait_for_change(office.id, 60 if inserted_at is None else 5)
                        continue
                    claims[command.id] = claims.get(command.id, 0) + 1
                    latencies.append(time.time() - float(command.session_id or 0))
                    await engine.complete_command(command.id, "engine", success=True)
                except StoreUnavailable:
                    unavailable += 1
                    await asyncio.sleep(0.05)
            finished = time.monotonic()
            calm = await emu.order(op="calm")
            await inserter_done
            insert_time = ended[0] - started
            async with await psycopg.AsyncConnection.connect(emu.dsn) as conn:
                cur = await conn.execute(
                    "select count(*), count(*) filter (where status = 'completed'),"
                    " (select count(*) from agent_command_results),"
                    " (select count(distinct command_id) from agent_command_results)"
                    " from agent_commands"
                )
                rows, completed, results, distinct = await cur.fetchone()  # type: ignore[misc]
                cur = await conn.execute("select id from agent_commands")
                in_database = {r[0] for r in await cur.fetchall()}
            stats = engine.stats
        emulator, drops = calm["stats"], calm["drops"]
        subscribed = sorted(stats.subscribed_at)
        ready = sorted(stats.ready_at)

        def after(times: list[float], at: float) -> float | None:
            index = bisect.bisect_right(times, at)
            return times[index] - at if index < len(times) else None

        to_subscribed = [d for d in (after(subscribed, at) for at in drops) if d]
        to_ready = [d for d in (after(ready, at) for at in drops) if d]
        lost = len(in_database - set(claims))
        twice = sum(1 for n in claims.values() if n > 1)
        print(
            f"  inserted {rows} (inserter exit {inserter.returncode}), claimed {len(claims)},"
            f" completed {completed}, result rows {results} ({distinct} distinct)"
        )
        print(f"  commands lost (never claimed): {lost}    executed twice: {twice}")
        print(
            f"  sockets dropped {len(drops)} (+{calm['idle']} ticks found none open);"
            f" change events sent {emulator['events_sent']}, lost on purpose or with a dropped"
            f" socket {emulator['events_dropped']}"
        )
        print(f"  reconnect, drop -> SUBSCRIBED:              {spread(to_subscribed)}")
        print(f"  reconnect, drop -> Subscribed to PostgreSQL: {spread(to_ready)}")
        print(f"  insert -> claimed under faults:             {spread(latencies)}")
        print(
            f"  engine hints: {stats.events} events, {stats.resubscribed} resubscriptions,"
            f" {stats.catch_ups} from catch-up reads, {stats.timer} from the timer;"
            f" realtime clients built {stats.rebuilds} ({stats.rebuild_failures} failed);"
            f" REST unavailable {unavailable}"
        )
        print(
            f"  total time {finished - started:.1f} s from the first insert to the last claim"
            f" (the inserter took {insert_time:.1f} s)"
        )


async def main_async(args: argparse.Namespace) -> None:
    if not args.faults or args.latency:
        await latency(args.backends, args.commands)
        if "postgres" in args.backends:
            await exactly_once()
            await sigkill()
    if args.faults:
        for mode in args.fault_emulator:
            await faults(args.fault_commands, args.fault_pause / 1000, strict=mode == "strict")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=300)
    parser.add_argument(
        "--backends",
        nargs="+",
        default=["sqlite", "postgres", "supabase", "supabase-lax"],
        help="supabase: the emulator as strict as Supabase (RLS on REST and Realtime); "
        "supabase-lax: the same run's baseline without (the emulator before issue 16)",
    )
    parser.add_argument(
        "--faults", action="store_true", help="only the supabase run under Realtime faults"
    )
    parser.add_argument("--latency", action="store_true", help="with --faults: the rest too")
    parser.add_argument("--fault-commands", type=int, default=10_000)
    parser.add_argument(
        "--fault-emulator",
        nargs="+",
        choices=["strict", "lax"],
        default=["strict"],
        help="the emulator for --faults: strict (RLS, as Supabase), lax (before issue 16), both",
    )
    parser.add_argument(
        "--fault-pause", type=float, default=10.0, help="ms between two inserts (0: flat out)"
    )
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
