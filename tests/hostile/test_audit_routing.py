"""Audit of issue 12, routing: what the audit found beyond the routing helper's suite.

- A loop waiting for store changes through the engine's ChangeFeed must end when it is
  cancelled, also when a change arrives at the same moment. With `asyncio.wait_for` around a
  shared `asyncio.Condition` (Python 3.11) the cancellation was lost now and then: the router's
  sweep never ended and `semo engine` hung on SIGTERM forever (found with a busy office: jobs,
  answers and results arriving while the engine stopped). Real sqlite store, real change feed.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from engine.store.changes import ChangeFeed
from engine.store.models import Office
from engine.store.sqlite import SqliteStore


async def test_a_cancelled_change_wait_always_ends_even_when_a_change_comes_with_it(
    tmp_path: Path,
) -> None:
    rng = random.Random(12)
    async with SqliteStore(tmp_path / "semo.db", poll_interval=0.001) as store:
        office = await store.create_office(Office(name="feed"))
        feed = ChangeFeed(store, office.id)
        feed.start()
        try:
            for round_ in range(150):
                cursor = feed.cursor()

                async def waiting(cursor=cursor) -> None:  # type: ignore[no-untyped-def]
                    while True:
                        await cursor.wait_for_change(office.id, 5.0)

                waiter = asyncio.create_task(waiting())
                await asyncio.sleep(rng.random() * 0.003)
                await store.insert_command(office.id, "create_session", {"role": "X"})
                for _ in range(rng.randint(0, 4)):
                    await asyncio.sleep(0)
                waiter.cancel()
                done, _ = await asyncio.wait({waiter}, timeout=10)
                assert done, f"round {round_}: the cancelled wait did not end"
                assert waiter.cancelled()
        finally:
            await feed.stop()


async def test_every_cursor_sees_each_change_once(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "semo.db", poll_interval=0.001) as store:
        office = await store.create_office(Office(name="feed"))
        feed = ChangeFeed(store, office.id)
        feed.start()
        try:
            first, second = feed.cursor(), feed.cursor()
            assert not await first.wait_for_change(office.id, 0.05)
            waits = [
                asyncio.create_task(c.wait_for_change(office.id, 10.0)) for c in (first, second)
            ]
            await asyncio.sleep(0)
            await store.insert_command(office.id, "create_session", {"role": "X"})
            assert await asyncio.gather(*waits) == [True, True]
            # seen: the next wait times out unless another change comes
            assert not await first.wait_for_change(office.id, 0.05)
            await store.insert_command(office.id, "create_session", {"role": "X"})

            async def changed() -> bool:
                return await second.wait_for_change(office.id, 10.0)

            assert await changed()
        finally:
            await feed.stop()
