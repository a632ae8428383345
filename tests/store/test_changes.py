"""Several loops waiting on one store each see every change (on every backend)."""

from __future__ import annotations

import asyncio

from semo.engine.store.base import Store
from semo.engine.store.changes import ChangeFeed
from semo.engine.store.models import Office


async def test_every_cursor_sees_every_change(store: Store) -> None:
    office = await store.create_office(Office(name="o"))
    feed = ChangeFeed(store, office.id)
    feed.start()
    try:
        first, second = feed.cursor(), feed.cursor()
        waits = [
            asyncio.create_task(cursor.wait_for_change(office.id, 10.0))
            for cursor in (first, second)
        ]
        await asyncio.sleep(0.2)
        await store.insert_command(office.id, "create_session", {"role": "BE"})
        assert await asyncio.gather(*waits) == [True, True]
        # a store alone tells only its first caller; the cursors have nothing new now
        assert await first.wait_for_change(office.id, 0.3) is False
        assert await second.wait_for_change(office.id, 0.3) is False
    finally:
        await feed.stop()
