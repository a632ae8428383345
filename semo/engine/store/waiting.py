"""Opening a store whose database has no connection slot left: wait, with backoff.

An engine started while the database (or its pooler) refuses new connections ("too many
clients": `StoreBusy`) waits for a slot instead of exiting: each refused open is logged and
tried again, 0.5 s, 1 s, 2 s ... up to `MOST_SECONDS` apart. Any other failure (a wrong URL, an
unreachable host, a schema to migrate) is raised at once.
"""

from __future__ import annotations

import asyncio
import logging

from semo.engine.store.base import Store, StoreBusy

log = logging.getLogger("semo.engine")

FIRST_SECONDS = 0.5
MOST_SECONDS = 10.0


async def open_waiting(store: Store) -> None:
    """`store.open()`, tried again with backoff for as long as it raises StoreBusy."""
    delay = FIRST_SECONDS
    while True:
        try:
            await store.open()
            return
        except StoreBusy as error:
            log.warning(
                "the store has no connection for this engine yet (%s); trying again in %.1f s",
                error,
                delay,
            )
        await asyncio.sleep(delay)
        delay = min(MOST_SECONDS, delay * 2)
