"""The Postgres store's connection budget (issue 29): one connection while idle, at most
`pool_size` more for a burst, given back after `idle_seconds`; a connection refused for lack
of slots is waited for, not an error; the same behind PgBouncer in transaction mode."""

from __future__ import annotations

import asyncio

import pytest

from semo.engine.store.base import StoreBusy
from semo.engine.store.migrate import migrate
from semo.engine.store.models import Office
from semo.engine.store.postgres import PostgresStore
from tests.store.conftest import fresh_database
from tests.support.fleet import semo_connections
from tests.support.pgbouncer import pgbouncer
from tests.support.waiting import eventually_value


async def _burst(store: PostgresStore, office_id: str, size: int) -> None:
    """`size` operations at once, each holding its connection a little (pg_sleep)."""

    async def one() -> None:
        await store._one("select pg_sleep(0.2)")

    await asyncio.gather(*(one() for _ in range(size)))
    assert len(await store.list_jobs(office_id)) == 0


async def _idle_connections(dsn: str, most: int) -> int:
    async def within() -> int | None:
        held = await semo_connections(dsn)
        return held if held <= most else None

    return await eventually_value(within, f"at most {most} connection(s)", 10)


@pytest.mark.parametrize("pooler", ["session", "transaction"])
async def test_one_connection_idle_a_bounded_burst_given_back(pooler: str) -> None:
    """Listening (session) or polling (transaction): a burst of 8 operations uses at most
    pool_size (3) pooled connections, and once idle the engine holds one."""
    async with fresh_database() as dsn:
        await migrate(dsn)
        store = PostgresStore(dsn, pool_size=3, pooler=pooler, idle_seconds=0.5)  # type: ignore[arg-type]
        async with store:
            office = await store.ensure_office(Office(name="o"))
            await _burst(store, office.id, 8)
            listener = 1 if pooler == "session" else 0
            assert store.peak_connections <= 3 + listener
            assert store.peak_connections >= 2  # the burst did run in parallel
            assert await _idle_connections(dsn, 1) == 1
            assert store.connections == 1
            # and it still works, and still hears of changes
            await store.insert_command(office.id, "run_job", {"job_id": "j"})
            assert await store.wait_for_change(office.id, 5.0)


async def test_no_slot_left_is_waited_for_behind_pgbouncer() -> None:
    """PgBouncer in transaction mode that admits 2 clients: a store of pool_size 4 runs 8
    operations at once, waiting for slots ("no more connections allowed") instead of failing;
    a second store finds no slot while the first holds both, and gets one once it is idle."""
    async with fresh_database() as dsn:
        await migrate(dsn)
        with pgbouncer(dsn, max_client_conn=2) as pooled:
            store = PostgresStore(pooled, pool_size=4, pooler="transaction", idle_seconds=0.5)
            async with store:
                office = await store.ensure_office(Office(name="o"))
                await _burst(store, office.id, 8)
                assert store.peak_connections == 2
                other = PostgresStore(
                    pooled, pooler="transaction", connect_timeout=1, statement_timeout=1
                )
                with pytest.raises(StoreBusy):
                    await asyncio.wait_for(_hold_both(store, other), 30)
                async with other:  # the first store went back to one connection
                    assert (await other.ensure_office(Office(name="o"))).id == office.id


async def _hold_both(store: PostgresStore, other: PostgresStore) -> None:
    """`other` opens while `store` holds both of the pooler's client slots."""

    async def hold() -> None:
        await store._one("select pg_sleep(6)")

    holders = [asyncio.ensure_future(hold()) for _ in range(3)]  # a burst: both slots
    try:
        await asyncio.sleep(0.5)
        await other.open()
    finally:
        await asyncio.gather(*holders)
