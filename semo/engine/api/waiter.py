"""Waiting for command results, for many requests at once, on one store.

`Store.wait_for_change` reports a change once per store instance and office (it remembers what
it last reported), so concurrent requests that each called it would take each other's wake-ups
and fall back to polling. `ResultWaiter` runs one watcher per office instead: it waits for
changes and, on each one (and at least every `recheck` seconds, since a wake-up is only a
hint), looks up the result of every command a request waits for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from semo.engine.store.base import Store, StoreError
from semo.engine.store.models import AgentCommandResult

log = logging.getLogger("semo.api")


class ResultWaiter:
    def __init__(self, store: Store, *, recheck: float = 1.0) -> None:
        self.store = store
        self.recheck = recheck
        self._waiting: dict[str, dict[str, asyncio.Future[AgentCommandResult]]] = {}
        self._watchers: dict[str, asyncio.Task[None]] = {}

    async def wait(
        self, office_id: str, command_id: str, timeout: float
    ) -> AgentCommandResult | None:
        """The command's result, or None when it has not come within `timeout` seconds."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[AgentCommandResult] = loop.create_future()
        waiting = self._waiting.setdefault(office_id, {})
        waiting[command_id] = future
        try:
            self._ensure_watcher(office_id)
            result = await self.store.get_result(command_id)  # it may be there already
            if result is not None:
                return result
            try:
                async with asyncio.timeout(timeout):
                    return await asyncio.shield(future)
            except TimeoutError:
                return None
        finally:
            if waiting.get(command_id) is future:
                del waiting[command_id]
            if not future.done():
                future.cancel()

    async def close(self) -> None:
        watchers, self._watchers = list(self._watchers.values()), {}
        for task in watchers:
            task.cancel()
        for task in watchers:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def _ensure_watcher(self, office_id: str) -> None:
        task = self._watchers.get(office_id)
        if task is None or task.done():
            self._watchers[office_id] = asyncio.get_running_loop().create_task(
                self._watch(office_id), name=f"semo-api results {office_id}"
            )

    async def _watch(self, office_id: str) -> None:
        failures = 0
        try:
            while self._waiting.get(office_id):
                try:
                    await self.store.wait_for_change(office_id, self.recheck)
                    await self._check(office_id)
                    failures = 0
                except StoreError as error:
                    failures += 1
                    log.warning("waiting for results of office %s: %s", office_id, error)
                    await asyncio.sleep(min(0.1 * 2**failures, self.recheck))
        finally:
            if self._watchers.get(office_id) is asyncio.current_task():
                del self._watchers[office_id]

    async def _check(self, office_id: str) -> None:
        for command_id, future in list(self._waiting.get(office_id, {}).items()):
            if future.done():
                continue
            result = await self.store.get_result(command_id)
            if result is not None and not future.done():
                future.set_result(result)
