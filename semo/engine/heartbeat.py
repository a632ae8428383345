"""An engine's heartbeat: the store row (`engines`) saying that this engine is alive.

    heartbeat = Heartbeat(store, office_id, engine_id, lease_seconds=30, dead_after=12)
    await heartbeat.refuse_if_running()  # EngineIdInUse when this id still beats elsewhere
    await heartbeat.start()        # row running, alive until now + 12 s; a beat every 3 s
    ...
    heartbeat.steady()             # True once beats have succeeded without a gap for 12 s
    await heartbeat.stop()         # no more beats; row stopped

How it works: docs/OPERATIONS.md, "The heartbeat".
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from semo.engine.store.base import Store, StoreConflict, StoreError
from semo.engine.store.models import EngineHeartbeat

log = logging.getLogger("semo.engine")

#: beats per lease: a beat every lease_seconds / 3 at most (the dispatcher renews leases as
#: often)
BEATS_PER_LEASE = 3
#: beats per limit: a beat every dead_after / 4
BEATS_PER_LIMIT = 4
#: an engine is dead after this many leases without a beat
LEASES_UNTIL_DEAD = 3
#: the pause before another try after a failed beat (at most the interval)
RETRY_SECONDS = 1.0
#: beat intervals a start watches an alive row of its own id for a beat before taking it for
#: a dead run's
WATCH_BEATS = 2.0


class EngineIdInUse(StoreConflict):
    """Another engine is running with this engine's id: this one must not start."""


class Heartbeat:
    def __init__(
        self,
        store: Store,
        office_id: str,
        engine_id: str,
        *,
        lease_seconds: float,
        dead_after: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not lease_seconds > 0:
            raise ValueError(f"lease_seconds must be positive, not {lease_seconds!r}")
        if dead_after is not None and not dead_after > 0:
            raise ValueError(f"dead_after must be positive, not {dead_after!r}")
        self.store = store
        self.office_id = office_id
        self.engine_id = engine_id
        #: seconds after the last beat from which others count this engine dead
        self.dead_after = lease_seconds * LEASES_UNTIL_DEAD if dead_after is None else dead_after
        #: seconds between beats
        self.interval = min(lease_seconds / BEATS_PER_LEASE, self.dead_after / BEATS_PER_LIMIT)
        self.last: EngineHeartbeat | None = None
        self._clock = clock
        #: clock() at the first beat of the current run of successful beats
        self._steady_since: float | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def refuse_if_running(self) -> None:
        """EngineIdInUse when another engine is running with this id (its heartbeat goes on);
        returns at once when the id's row is stopped, run out or missing, and after
        `WATCH_BEATS` intervals without a beat when it says alive (a run that died)."""
        row = await self._own_row()
        if row is None or not row.alive:
            return
        log.info(
            "engine %s: the store says an engine with this id is alive (last beat %s); "
            "watching its heartbeat for %.1f s",
            self.engine_id,
            row.last_seen.isoformat(),
            WATCH_BEATS * self.interval,
        )
        deadline = self._clock() + WATCH_BEATS * self.interval
        while self._clock() < deadline:
            await asyncio.sleep(min(self.interval / 4, max(0.0, deadline - self._clock())))
            now = await self._own_row()
            if now is None or not now.alive:
                return
            if now.last_seen != row.last_seen or now.started_at != row.started_at:
                raise EngineIdInUse(
                    f"engine {self.engine_id} is already running (its heartbeat went on at "
                    f"{now.last_seen.isoformat()}): stop it first (SIGTERM, semo stop) or give "
                    "this engine another [engine] id"
                )
        log.warning(
            "engine %s: the earlier run with this id stopped beating at %s without stopping: "
            "taking it for dead",
            self.engine_id,
            row.last_seen.isoformat(),
        )

    async def _own_row(self) -> EngineHeartbeat | None:
        rows = await self.store.list_engines(self.office_id)
        return next((r for r in rows if r.engine_id == self.engine_id), None)

    async def start(self) -> EngineHeartbeat:
        """Record this engine as started and alive (StoreError when the store refuses), then
        beat every `interval` seconds."""
        row = await self._beat(starting=True)
        self._task = asyncio.get_running_loop().create_task(
            self._loop(), name=f"semo-heartbeat {self.engine_id}"
        )
        return row

    async def stop(self, *, mark_stopped: bool = True) -> None:
        """No more beats; with `mark_stopped`, record a clean stop (logged if it fails: the
        row then runs out like a dead engine's). Once recorded, another call records nothing.
        A cancellation of the caller while it waits for the beats to end propagates (the beats
        are cancelled all the same)."""
        task, self._task = self._task, None
        self._steady_since = None
        if task is not None:
            task.cancel()
            # wait for the beat task without taking its cancellation for ours: asyncio.wait
            # neither raises the task's CancelledError nor swallows the caller's
            await asyncio.wait({task})
        if not mark_stopped or self.last is None or self.last.status == "stopped":
            return
        try:
            self.last = await self.store.mark_engine_stopped(self.office_id, self.engine_id)
        except StoreError as error:
            log.warning("could not record engine %s as stopped: %s", self.engine_id, error)

    def steady(self) -> bool:
        """Whether beats have gone through without a gap for at least `dead_after` seconds:
        only then may this engine take another's silence for its death."""
        since = self._steady_since
        return since is not None and self._clock() - since >= self.dead_after

    async def _beat(self, *, starting: bool = False) -> EngineHeartbeat:
        try:
            row = await self.store.record_heartbeat(
                self.office_id, self.engine_id, dead_after=self.dead_after, starting=starting
            )
        except Exception:
            self._steady_since = None
            raise
        if self._steady_since is None:
            self._steady_since = self._clock()
        self.last = row
        return row

    async def _loop(self) -> None:
        delay = self.interval
        while True:
            await asyncio.sleep(delay)
            try:
                await self._beat()
            except StoreError as error:
                delay = min(self.interval, RETRY_SECONDS)
                log.warning("heartbeat of engine %s failed: %s", self.engine_id, error)
            except Exception:
                delay = min(self.interval, RETRY_SECONDS)
                log.exception("heartbeat of engine %s failed", self.engine_id)
            else:
                delay = self.interval
