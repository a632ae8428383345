"""A fleet of real `semo engine` processes on one Postgres office, for tests and bench/fleet.py:
each engine has its own folder, its own clone of the repository and one generic scripted agent
role `A` that answers every prompt `[SEMO:DONE]` after a delay."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

from semo.engine.office import job_ops
from semo.engine.store.base import Store
from semo.engine.store.models import Job
from semo.engine.store.postgres import PostgresStore
from tests.support.git_repo import make_repo
from tests.support.office_files import engine_pool_toml
from tests.support.semo_process import engine_in, semo_env
from tests.support.waiting import eventually_value

REPO = Path(__file__).resolve().parents[2]
OFFICE = "fleet"
#: seconds a fleet may take to start, or a burst to end, on a loaded 2-core machine (a wait,
#: not a budget: bench/fleet.py measures)
FLEET_TIMEOUT = 240.0


def write_engine(folder: Path, store: str, *, reply_delay: float) -> None:
    """An engine's folder: its own clone `repo`, semo.toml on the shared office, and one
    generic scripted agent `A` that answers every prompt `[SEMO:DONE]` after `reply_delay`."""
    folder.mkdir(parents=True)
    make_repo(folder / "repo")
    script = folder / "A.json"
    script.write_text(json.dumps([{"text": "[SEMO:DONE] done", "delay": reply_delay}] * 100))
    command = [sys.executable, "-m", "tests.support.script_agent", "--script", str(script)]
    command += ["--log", str(folder / "A.log")]
    pool = engine_pool_toml(command_timeout=30, shutdown_grace=1, max_sessions=2, warm_roles=["A"])
    (folder / "semo.toml").write_text(
        f"""
[office]
name = "{OFFICE}"
repository = "repo"
workspace_root = "ws"

{store}
{pool}
[[agents]]
role = "A"
profile = "generic"
command = {json.dumps(command)}
env = {{ PYTHONPATH = "{REPO}" }}
reads_prompts = true
"""
    )


@asynccontextmanager
async def fleet(
    tmp_path: Path, count: int, store: str, *, reply_delay: float = 0.5
) -> AsyncIterator[list[asyncio.subprocess.Process]]:
    """`count` engines on the office, all started at once (none waits for another)."""
    folders = [tmp_path / f"engine{n}" for n in range(count)]
    for folder in folders:
        write_engine(folder, store, reply_delay=reply_delay)
    async with AsyncExitStack() as stack:
        processes = await asyncio.gather(
            *(stack.enter_async_context(engine_in(f, semo_env(), grace=10)) for f in folders)
        )
        yield list(processes)


def postgres_store(dsn: str) -> str:
    return f'[store]\nbackend = "postgres"\ndatabase_url = "{dsn}"'


async def alive_engines(store: Store, office_id: str | None, count: int) -> str:
    """Until `count` engines of the office named OFFICE are alive: its id."""

    async def probe() -> str | None:
        offices = [o for o in await store.list_offices() if o.name == OFFICE]
        if not offices:
            return None
        rows = await store.list_engines(offices[0].id)
        return offices[0].id if sum(r.alive for r in rows) >= count else None

    return await eventually_value(probe, f"{count} engines alive", FLEET_TIMEOUT)


async def burst(store: Store, office_id: str, jobs: int) -> list[Job]:
    """`jobs` jobs for role A, created one after the other; once every one has ended."""
    return await burst_end(store, office_id, await create_jobs(store, office_id, jobs))


async def create_jobs(store: Store, office_id: str, jobs: int) -> list[Job]:
    return [
        (await job_ops.create_job(store, office_id, role="A", task=f"job {n}"))[0]
        for n in range(jobs)
    ]


async def burst_end(store: Store, office_id: str, created: list[Job]) -> list[Job]:
    """Once every job of `created` has ended (done or failed): their rows."""

    async def all_ended() -> list[Job] | None:
        rows = {j.id: j for j in await store.list_jobs(office_id)}
        ended = [rows[j.id] for j in created if rows[j.id].status in ("done", "failed")]
        return ended if len(ended) == len(created) else None

    return await eventually_value(all_ended, "every job ended", FLEET_TIMEOUT)


async def semo_connections(dsn: str) -> int:
    """Connections to the database whose application is an engine (`semo`)."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute(
            "select count(*) from pg_stat_activity"
            " where datname = current_database() and application_name = 'semo'"
        )
        row = await cur.fetchone()
        return int(row[0]) if row else 0


def observer_store(dsn: str) -> PostgresStore:
    """The test's own store, named apart from the engines in pg_stat_activity."""
    return PostgresStore(make_conninfo(dsn, application_name="semo-test"))
