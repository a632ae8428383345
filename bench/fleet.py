"""Many engines on one Postgres office (issue 29): start-up, connections, job latency, take-over.

    python bench/fleet.py --engines 10,20,40 [--jobs-per-engine 4] [--kill-third] [--repeat 3]
    python bench/fleet.py --engines 100 --pgbouncer      # through PgBouncer, transaction mode

Per N: a fresh database on $SEMO_TEST_POSTGRES (default postgresql://postgres@127.0.0.1:5432/
postgres, default settings: max_connections = 100), N real `semo engine` processes
(tests/support/fleet.py: each its own clone, one generic scripted agent role answering after
--reply-delay s), all started at once. Measured: seconds until all are alive; offices and agent
rows (must be 1 and 1); connections of the engines (pg_stat_activity, application `semo`)
idle, sampled every 0.2 s during the burst (peak) and idle again after it, per engine; a burst
of N x --jobs-per-engine jobs: each job's latency (its `created` step to its `done` step),
p50/p99, and whether every job is done exactly once; with --kill-third, a third of the engines
SIGKILLed once each runs a job: the seconds from the kill to each of their jobs' `retry` step.

Figures only; nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import os
import platform
import signal
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from semo.engine.store.migrate import migrate
from tests.store.conftest import fresh_database
from tests.support import fleet as fleet_support
from tests.support.fleet import (
    OFFICE,
    alive_engines,
    burst_end,
    create_jobs,
    fleet,
    observer_store,
    postgres_store,
    semo_connections,
)
from tests.support.pgbouncer import pgbouncer

fleet_support.FLEET_TIMEOUT = 1200.0  # a large fleet starts slowly on a loaded machine


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def sample_peak(dsn: str, stop: asyncio.Event) -> int:
    peak = 0
    while not stop.is_set():
        with contextlib.suppress(psycopg.OperationalError):  # the server full: sample again
            peak = max(peak, await semo_connections(dsn))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.2)
    return peak


async def run(count: int, args: argparse.Namespace) -> dict[str, object]:
    async with fresh_database() as dsn:
        await migrate(dsn)
        with contextlib.ExitStack() as stack:
            engine_dsn = dsn
            store_toml = postgres_store(dsn)
            if args.pgbouncer:
                engine_dsn = stack.enter_context(pgbouncer(dsn))
                store_toml = postgres_store(engine_dsn) + '\npooler = "transaction"'
            folder = Path(tempfile.mkdtemp(prefix="semo-fleet"))
            started = time.monotonic()
            async with (
                fleet(folder, count, store_toml, reply_delay=args.reply_delay) as processes,
                observer_store(dsn) as store,
            ):
                office_id = await alive_engines(store, None, count)
                start_s = time.monotonic() - started
                offices = [o for o in await store.list_offices() if o.name == OFFICE]
                agents = await store.list_agents(office_id)
                await asyncio.sleep(5)  # idle: burst connections given back
                idle = await semo_connections(dsn)
                stop = asyncio.Event()
                sampler = asyncio.create_task(sample_peak(dsn, stop))
                created = await create_jobs(store, office_id, count * args.jobs_per_engine)
                takeover: list[float] = []
                if args.kill_third:
                    by_id = {f"{socket.gethostname()}-{p.pid}": p for p in processes}
                    third = max(1, count // 3)
                    while True:  # a third of the engines, each running a job
                        running = await store.list_jobs(office_id, status="running")
                        busy = sorted({j.engine_id for j in running if j.engine_id in by_id})
                        if len(busy) >= third:
                            break
                        await asyncio.sleep(0.2)
                    names = set(busy[:third])
                    killed_at = time.time()
                    for name in names:
                        by_id[name].send_signal(signal.SIGKILL)
                    running = await store.list_jobs(office_id, status="running")
                    theirs = [j.id for j in running if j.engine_id in names]
                ended = await burst_end(store, office_id, created)
                stop.set()
                peak = await sampler
                if args.kill_third:
                    for job_id in theirs:
                        steps = await store.list_job_entries(job_id)
                        retry = next((e for e in steps if e.step == "retry"), None)
                        if retry is not None:
                            takeover.append(retry.at.timestamp() - killed_at)
                latencies, once = [], True
                for job in ended:
                    steps = await store.list_job_entries(job.id)
                    done = [e for e in steps if e.step == "done"]
                    once &= job.status == "done" and len(done) == 1
                    if done:
                        latencies.append((done[0].at - steps[0].at).total_seconds())
                await asyncio.sleep(5)
                idle_after = await semo_connections(dsn)
    alive = count - (max(1, count // 3) if args.kill_third else 0)
    return {
        "engines": count,
        "start_s": round(start_s, 1),
        "offices": len(offices),
        "agent_rows": len(agents),
        "idle_per_engine": round(idle / count, 2),
        "peak_total": peak,
        "peak_per_engine": round(peak / count, 2),
        "idle_after_per_engine": round(idle_after / alive, 2),
        "jobs": len(ended),
        "done_once": once,
        "p50_s": round(percentile(latencies, 0.5), 2),
        "p99_s": round(percentile(latencies, 0.99), 2),
        "takeover_median_s": round(statistics.median(takeover), 1) if takeover else None,
        "takeover_max_s": round(max(takeover), 1) if takeover else None,
        "takeover_jobs": len(takeover),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", default="10,20,40")
    parser.add_argument("--jobs-per-engine", type=int, default=4)
    parser.add_argument("--reply-delay", type=float, default=1.0)
    parser.add_argument("--kill-third", action="store_true")
    parser.add_argument("--pgbouncer", action="store_true")
    parser.add_argument("--repeat", type=int, default=1, help="runs per N; then their medians")
    args = parser.parse_args()
    print(
        f"# {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {platform.platform()}, "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, python {platform.python_version()}"
    )
    print(f"# {' '.join(sys.argv)}")
    for count in [int(n) for n in args.engines.split(",")]:
        runs = []
        for _ in range(max(1, args.repeat)):
            runs.append(asyncio.run(run(count, args)))
            print(runs[-1], flush=True)
        if len(runs) > 1:
            print({"median_of": len(runs), **medians(runs)}, flush=True)


def medians(runs: list[dict[str, object]]) -> dict[str, object]:
    """Each figure's median over `runs` (numbers; a flag is true only if it held every time)."""
    out: dict[str, object] = {}
    for key, value in runs[0].items():
        values = [r[key] for r in runs]
        if isinstance(value, bool):
            out[key] = all(values)
        elif all(isinstance(v, int | float) for v in values):
            out[key] = round(statistics.median(values), 2)  # type: ignore[arg-type]
        else:
            out[key] = values
    return out


if __name__ == "__main__":
    main()
