"""Wake-ups for several waiters on one store.

`Store.wait_for_change` keeps one cursor per store instance and office: a change is reported to
the first caller only. The engine has several loops waiting on the same store (the command
dispatcher, the router), so one `ChangeFeed` per office runs the single store wait and every
`ChangeCursor` sees every change once.

    feed = ChangeFeed(store, office_id); feed.start()
    dispatcher_wake = feed.cursor().wait_for_change     # (office_id, timeout) -> bool
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from semo.engine.store.base import Store, StoreError

log = logging.getLogger("semo.store")

#: How long the feed's own store wait lasts before it loops (it returns early on a change).
FEED_WAIT_SECONDS = 1.0


class ChangeFeed:
    def __init__(self, store: Store, office_id: str) -> None:
        self.store = store
        self.office_id = office_id
        self.generation = 0
        #: resolved (and replaced) at the next change; waiters never cancel it, so a waiter's
        #: cancellation cannot be lost in a shared primitive (asyncio.wait_for around a
        #: Condition.wait swallowed it on 3.11 when a change came at the same moment, and an
        #: engine's stop then hung on the router's sweep forever)
        self._next: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"changes {self.office_id}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def cursor(self) -> ChangeCursor:
        return ChangeCursor(self)

    async def _run(self) -> None:
        while True:
            try:
                changed = await self.store.wait_for_change(self.office_id, FEED_WAIT_SECONDS)
            except StoreError as error:
                log.warning("waiting for changes failed: %s; retrying", error)
                changed = True  # waiters re-read the store: that is what a wake-up means
                await asyncio.sleep(FEED_WAIT_SECONDS)
            if changed:
                self.generation += 1
                waiting, self._next = self._next, None
                if waiting is not None and not waiting.done():
                    waiting.set_result(None)

    def _change(self) -> asyncio.Future[None]:
        """The future the next change resolves."""
        if self._next is None or self._next.done():
            self._next = asyncio.get_running_loop().create_future()
        return self._next


class ChangeCursor:
    """One waiter's view of a feed: every change once, like `Store.wait_for_change`."""

    def __init__(self, feed: ChangeFeed) -> None:
        self.feed = feed
        self.seen = feed.generation

    async def wait_for_change(self, office_id: str, timeout: float) -> bool:
        if office_id != self.feed.office_id:
            raise ValueError(f"this cursor follows office {self.feed.office_id}, not {office_id}")
        feed = self.feed
        if feed.generation == self.seen:
            # asyncio.wait neither cancels the shared future nor hides this task's cancellation
            await asyncio.wait({feed._change()}, timeout=max(0.0, timeout))
        if feed.generation == self.seen:
            return False
        self.seen = feed.generation
        return True
