"""`[ship] on_done`: the steps an engine runs by itself when one of its jobs is done.

    auto = AutoShip(store, settings)
    remove = bus.add_listener(auto.on_event)      # a job's "done" step starts its shipping
    ...
    remove(); await auto.stop()

Only the engine that ran the job sees its `done` on its bus, so a job is shipped once. A job
that ends `needs_review` (its roles' work conflicts) or failed is not shipped. What shipping did
or why it failed is on the job's timeline (semo/engine/ship/ship.py); a failure is also logged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from semo.engine.events import BaseEvent, JobEvent
from semo.engine.ship.settings import ShipSection
from semo.engine.ship.ship import ShipError, ShipRequest, ship_stored_job
from semo.engine.store.base import Store

__all__ = ["AutoShip"]

log = logging.getLogger("semo.ship")


class AutoShip:
    """Ships each job whose `done` step it is told of, with `settings.on_done`'s steps."""

    def __init__(
        self, store: Store, settings: ShipSection, env: Mapping[str, str] | None = None
    ) -> None:
        self.store = store
        self.settings = settings
        self.env = env
        self.request = ShipRequest(**dict.fromkeys(settings.on_done, True))
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def enabled(self) -> bool:
        return bool(self.settings.on_done)

    def on_event(self, event: BaseEvent) -> None:
        """A bus listener: a job's `done` step starts shipping it (in its own task)."""
        if not self.enabled or not isinstance(event, JobEvent) or event.step != "done":
            return
        task = asyncio.get_running_loop().create_task(
            self._ship(event.job_id), name=f"ship job {event.job_id}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _ship(self, job_id: str) -> None:
        try:
            report = await ship_stored_job(
                self.store, job_id, self.request, self.settings, env=self.env
            )
        except ShipError as error:
            log.warning("job %s was not shipped ([ship] on_done): %s", job_id, error)
        except Exception:
            log.exception("shipping job %s ([ship] on_done) failed", job_id)
        else:
            log.info("job %s shipped: %s", job_id, ", ".join(self.request.steps()))
            del report

    async def idle(self) -> None:
        """Wait until every shipping started so far has ended."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def stop(self) -> None:
        """Let the shippings under way finish (a push is not cut in the middle)."""
        await self.idle()
