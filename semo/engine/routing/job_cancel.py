"""An operator's cancel of a running job, watched for the job's whole run.

It wins over every later step (waiting for a session, for the agent's prompt, typing the task,
a retry).

    watch = CancelWatch(store, job_id, poll=1.0)
    lease = await watch.unless_cancelled(pool.acquire(...))      # JobCancelled if cancelled first
    await session.deliver(prompt, timeout=t, gate=watch.gate)    # re-read right before typing
    ...
    await watch.close()

`Store.request_job_cancel` records `cancel_reason` on the row; the watch reads the row at once
and then every `poll` seconds, and each step the runner waits on is raced against it. The task
is only typed after a fresh read of the row says it is still wanted (`gate`), so a cancel
recorded before the agent reached its prompt always wins, whatever the poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from semo.engine.store.base import Store, StoreError

log = logging.getLogger("semo.jobs")

T = TypeVar("T")


class JobCancelled(Exception):
    """The job was cancelled while the runner waited on a step (`reason`: the operator's)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CancelWatch:
    """Watches one running job's row for a cancel, from `start` to `close`."""

    def __init__(self, store: Store, job_id: str, *, poll: float) -> None:
        self.store = store
        self.job_id = job_id
        self.poll = poll
        self._task: asyncio.Task[str] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._watch(), name=f"job {self.job_id} cancel")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    @property
    def reason(self) -> str | None:
        """The cancel's reason once the watch saw it, else None."""
        task = self._task
        return task.result() if task is not None and task.done() and not task.cancelled() else None

    async def requested(self) -> str | None:
        """The row's cancel reason read now (None: not cancelled, or the store did not answer:
        the watch reads it again)."""
        try:
            row = await self.store.get_job(self.job_id)
        except StoreError as error:
            log.info("job %s: reading its row failed (%s); again later", self.job_id, error)
            return None
        return row.cancel_reason

    async def gate(self) -> str | None:
        """A prompt gate (AgentSession.deliver): why the job's prompt must not be typed now."""
        return self.reason or await self.requested()

    async def _watch(self) -> str:
        while True:
            reason = await self.requested()
            if reason is not None:
                return reason
            await asyncio.sleep(self.poll)

    async def unless_cancelled(
        self, step: Awaitable[T], undo: Callable[[T], object] | None = None
    ) -> T:
        """`step`'s result, or JobCancelled when the cancel comes first (the step is then
        cancelled; a result it still produced is given to `undo`, e.g. a lease released)."""
        assert self._task is not None, "start() first"
        task = asyncio.ensure_future(step)
        try:
            await asyncio.wait({task, self._task}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            await _cancel(task, undo)
            raise
        if task.done():
            return task.result()
        await _cancel(task, undo)
        raise JobCancelled(self._task.result())


async def _cancel(task: asyncio.Future[T], undo: Callable[[T], object] | None) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        result = await task
        if undo is not None:
            undo(result)
