"""Many `semo engine` processes on one Postgres office (issue 29), each with its own clone of
the repository and one generic scripted agent role: started at the same instant on a fresh
database they make one office and one agent row; a burst of jobs is done exactly once (each
job one `done` step, its attempts counted); an idle engine holds one connection
(pg_stat_activity); a third SIGKILLed mid-burst is taken over (its jobs retried elsewhere);
and the same behind PgBouncer in transaction mode. The large runs are bench/fleet.py's."""

from __future__ import annotations

import signal
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from semo.engine.store.base import Store
from semo.engine.store.migrate import migrate
from semo.engine.store.models import Job
from tests.store.conftest import fresh_database
from tests.support.fleet import (
    FLEET_TIMEOUT,
    OFFICE,
    alive_engines,
    burst,
    burst_end,
    create_jobs,
    fleet,
    observer_store,
    postgres_store,
    semo_connections,
)
from tests.support.pgbouncer import pgbouncer
from tests.support.waiting import eventually_value

#: a fleet starts in a minute or two on 2 cores
pytestmark = pytest.mark.timeout(480)


async def check_done_once(store: Store, jobs: list[Job]) -> None:
    """Every job done, with one `done` step, its attempts counted, and no command of the
    office left pending or processing."""
    assert [j.status for j in jobs] == ["done"] * len(jobs), [j.failure_reason for j in jobs]
    for job in jobs:
        steps = [e.step for e in await store.list_job_entries(job.id)]
        assert steps.count("done") == 1, steps
        assert steps[0] == "created" and job.attempts >= 1, (steps, job.attempts)
    left = [c for c in await store.list_commands(jobs[0].office_id) if c.status == "pending"]
    assert [c for c in left if c.command_type == "run_job"] == []


async def test_engines_started_at_once_share_one_office_and_serve_a_burst_once(
    tmp_path: Path,
) -> None:
    """Ten engines started at the same instant on a fresh database: one office, one agent row
    for the role; twenty jobs all done exactly once; idle, at most one connection each."""
    count = 10
    async with fresh_database() as dsn:
        await migrate(dsn)
        async with fleet(tmp_path, count, postgres_store(dsn)), observer_store(dsn) as store:
            office_id = await alive_engines(store, None, count)
            assert [o.name for o in await store.list_offices()] == [OFFICE]
            assert [a.role for a in await store.list_agents(office_id)] == ["A"]
            jobs = await burst(store, office_id, 2 * count)
            await check_done_once(store, jobs)
            engines = {j.engine_id for j in jobs}
            assert len(engines) > 1, engines  # spread over the fleet

            async def idle_budget() -> int | None:
                held = await semo_connections(dsn)
                return held if held <= count else None

            await eventually_value(idle_budget, f"at most {count} connections", 30)


async def test_a_third_of_the_engines_killed_mid_burst_are_taken_over(tmp_path: Path) -> None:
    """Six engines, twelve jobs of 4 s; two engines SIGKILLed while they run jobs: their jobs
    are retried by the others (the same machine: the process check, not the heartbeat) within
    20 s of the kill, and every job ends done exactly once."""
    count = 6
    async with fresh_database() as dsn:
        await migrate(dsn)
        async with (
            fleet(tmp_path, count, postgres_store(dsn), reply_delay=4.0) as processes,
            observer_store(dsn) as store,
        ):
            office_id = await alive_engines(store, None, count)
            created = await create_jobs(store, office_id, 2 * count)
            by_id = {f"{socket.gethostname()}-{p.pid}": p for p in processes}

            async def two_busy() -> set[str] | None:
                running = await store.list_jobs(office_id, status="running")
                busy = sorted({j.engine_id for j in running if j.engine_id in by_id})
                return set(busy[:2]) if len(busy) >= 2 else None

            victims = await eventually_value(two_busy, "two engines running jobs", FLEET_TIMEOUT)
            killed_at = time.time()
            for engine_id in victims:
                by_id[engine_id].send_signal(signal.SIGKILL)
            running = await store.list_jobs(office_id, status="running")
            theirs = [j.id for j in running if j.engine_id in victims]
            assert theirs

            async def taken_over() -> list[Any] | None:
                steps = []
                for job_id in theirs:
                    retried = [e for e in await store.list_job_entries(job_id) if e.step == "retry"]
                    if not retried:
                        return None
                    steps.append(retried[0])
                return steps

            retries = await eventually_value(taken_over, "the victims' jobs retried", 20)
            assert all(e.at.timestamp() - killed_at < 20 for e in retries)
            rows = {j.id: j for j in await store.list_jobs(office_id)}
            jobs = await burst_end(store, office_id, [rows[j.id] for j in created])
            await check_done_once(store, jobs)
            assert not victims & {j.engine_id for j in jobs if j.id in theirs}


async def test_engines_behind_pgbouncer_in_transaction_mode(tmp_path: Path) -> None:
    """Six engines reaching the office through PgBouncer (pool_mode = transaction): one office,
    a burst of twelve jobs done exactly once (wake-ups polled: no LISTEN through the pooler)."""
    count = 6
    async with fresh_database() as dsn:
        await migrate(dsn)
        with pgbouncer(dsn) as pooled:
            store_toml = postgres_store(pooled) + '\npooler = "transaction"'
            async with fleet(tmp_path, count, store_toml), observer_store(dsn) as store:
                office_id = await alive_engines(store, None, count)
                assert [o.name for o in await store.list_offices()] == [OFFICE]
                jobs = await burst(store, office_id, 2 * count)
                await check_done_once(store, jobs)
