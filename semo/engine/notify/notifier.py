"""The notifier: engine events in, notices out to every configured sink, never in the way.

    notifier = Notifier(bus, config.notify, office="acme", office_id=office.id, ...)
    notifier.start()          # subscribes to the bus; one worker task per sink
    notifier.notify(notice)   # also for what is not a bus event (engine death, breaker)
    await notifier.stop()     # what is queued gets `flush_timeout` seconds, then is dropped

How it works: docs/NOTIFY.md, "The notifier".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from semo.engine.bus import EventBus, Subscription
from semo.engine.logs import add_secret, discard_secret
from semo.engine.notify.models import WAITING, Notice
from semo.engine.notify.settings import NotifySink
from semo.engine.notify.sinks import Sink, SinkError, build_sink
from semo.engine.notify.sinks.console import ConsoleSink
from semo.engine.notify.sources import Waiting, from_event
from semo.engine.notify.text import redact
from semo.engine.notify.throttle import Throttle
from semo.engine.plain_text import plain

log = logging.getLogger("semo.notify")

#: notices a sink may have queued; more are dropped (and logged)
QUEUE_SIZE = 200
#: the bus events the notifier reads
KINDS = ("routing_step", "job", "session_status", "session_signal")

StillWaiting = Callable[[Notice], Awaitable[bool]]


@dataclass
class _Lane:
    """One sink, its throttle, queue and worker."""

    sink: Sink
    settings: NotifySink
    throttle: Throttle
    queue: asyncio.Queue[Notice | None] = field(default_factory=lambda: asyncio.Queue(QUEUE_SIZE))
    task: asyncio.Task[None] | None = None
    summary_timer: asyncio.TimerHandle | None = None
    sent: int = 0
    failed: int = 0
    dropped: int = 0


class Notifier:
    def __init__(
        self,
        bus: EventBus,
        sinks: list[NotifySink],
        *,
        office: str,
        office_id: str,
        role_of: Callable[[str | None], str] = lambda agent_id: agent_id or "",
        still_waiting: StillWaiting | None = None,
        secrets: list[str] | None = None,
        env: Mapping[str, str] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.bus = bus
        self.office = office
        self.office_id = office_id
        self.role_of = role_of
        self.still_waiting = still_waiting
        self.secrets = [s for s in (secrets or []) if s]
        self.settings = sinks
        self.env = dict(os.environ if env is None else env)
        self.lanes: list[_Lane] = []
        self._clock = clock
        self._loop: asyncio.AbstractEventLoop | None = None
        self._subscription: Subscription | None = None
        self._reader: asyncio.Task[None] | None = None
        #: open waits by their row's id: the timers of each delay, the asking session
        self._waits: dict[str, tuple[list[asyncio.TimerHandle], str | None]] = {}
        self._checks: set[asyncio.Task[None]] = set()

    # -- life cycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Build the sinks (one that cannot be built is logged and left out), subscribe to the
        bus and start the workers. Needs a running loop."""
        self._loop = asyncio.get_running_loop()
        for index, settings in enumerate(self.settings):
            label = settings.label(index)
            try:
                sink = build_sink(settings, label, bus=self.bus, env=self.env)
            except SinkError as error:
                log.error("notify: sink %s left out: %s", label, self._safe(str(error)))
                continue
            if isinstance(sink, ConsoleSink):
                sink.office_id = self.office_id
            self.secrets.extend(sink.secrets)
            for secret in sink.secrets:  # and out of every log line of the process
                add_secret(secret)
            lane = _Lane(
                sink, settings, Throttle(settings.max_messages, settings.window, settings.dedupe)
            )
            lane.task = self._loop.create_task(self._work(lane), name=f"semo-notify {label}")
            self.lanes.append(lane)
        self._subscription = self.bus.subscribe(kinds=KINDS, office_id=self.office_id)
        self._reader = self._loop.create_task(self._read(self._subscription), name="semo-notify")

    async def stop(self, flush_timeout: float = 3.0) -> None:
        """Stop reading events (those already published are read first, e.g. the jobs that
        failed as the engine stopped); what is queued gets `flush_timeout` seconds to go."""
        if self._subscription is not None:
            self._subscription.close()  # the reader ends once it has read what was queued
        if self._reader is not None:
            _, pending = await asyncio.wait({self._reader}, timeout=1.0)
            for reader in pending:
                reader.cancel()
                with contextlib.suppress(BaseException):
                    await reader
        for handles, _ in self._waits.values():
            for handle in handles:
                handle.cancel()
        self._waits.clear()
        for task in list(self._checks):
            task.cancel()
        tasks = []
        for lane in self.lanes:
            if lane.summary_timer is not None:
                lane.summary_timer.cancel()
            summary = lane.throttle.summary(self._now(), force=True)  # what is held, at once
            if summary is not None:
                self._queue(lane, summary)
            with contextlib.suppress(asyncio.QueueFull):
                lane.queue.put_nowait(None)
            if lane.task is not None:
                tasks.append(lane.task)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=flush_timeout)
            for task in pending:
                task.cancel()
            for task in pending:
                with contextlib.suppress(BaseException):
                    await task
        for lane in self.lanes:
            with contextlib.suppress(Exception):
                await lane.sink.close()
            for secret in lane.sink.secrets:
                discard_secret(secret)

    # -- input ---------------------------------------------------------------------------------

    def notify(self, notice: Notice) -> None:
        """Offer `notice` to every sink that wants its kind (waits are not applied: this is
        for what happened). Never blocks, never raises; callable from any thread."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not loop:
            loop.call_soon_threadsafe(self._offer_all, notice, None)
        else:
            self._offer_all(notice, None)

    async def _read(self, subscription: Subscription) -> None:
        async for event in subscription:
            try:
                self._event(event)
            except Exception:
                log.exception("notify: a %s event was not handled", getattr(event, "kind", "?"))

    def _event(self, event: object) -> None:
        ref = getattr(event, "ref_id", None)
        kind = getattr(event, "kind", None)
        if kind == "routing_step" and ref in self._waits:
            self._end_wait(ref)  # answered, cancelled, allowed, denied...: no longer waits
            return
        if kind == "session_status" and getattr(event, "status", None) == "terminated":
            session = getattr(event, "session_id", None)
            for wait_ref, (_, asked_in) in list(self._waits.items()):
                if asked_in == session:
                    self._end_wait(wait_ref)
        found = from_event(event, self.office, self.role_of)
        if isinstance(found, Waiting):
            self._wait(found)
        elif found is not None:
            self._offer_all(found, None)

    # -- waits ---------------------------------------------------------------------------------

    def _wait(self, waiting: Waiting) -> None:
        assert self._loop is not None
        self._end_wait(waiting.ref)  # asked again (a resumed session): one wait, not two
        delays = sorted(
            {
                lane.settings.wait_delay()
                for lane in self.lanes
                if waiting.notice.kind in lane.settings.events
            }
        )
        handles: list[asyncio.TimerHandle] = []
        for delay in delays:
            if delay <= 0:
                self._offer_all(waiting.notice, 0.0)
                continue
            handles.append(self._loop.call_later(delay, self._waited, waiting, delay))
        if handles:
            self._waits[waiting.ref] = (handles, waiting.session_id)

    def _end_wait(self, ref: str) -> None:
        handles, _ = self._waits.pop(ref, ([], None))
        for handle in handles:
            handle.cancel()

    def _waited(self, waiting: Waiting, delay: float) -> None:
        task = asyncio.get_running_loop().create_task(self._check(waiting, delay))
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    async def _check(self, waiting: Waiting, delay: float) -> None:
        if waiting.ref not in self._waits:
            return
        if self.still_waiting is not None:
            try:
                if not await self.still_waiting(waiting.notice):
                    self._end_wait(waiting.ref)
                    return
            except Exception:
                log.exception("notify: checking whether %s still waits failed", waiting.ref)
        handles, _ = self._waits.get(waiting.ref, ([], None))
        if all(h.when() <= asyncio.get_running_loop().time() for h in handles):
            self._waits.pop(waiting.ref, None)  # the last delay: the wait is over
        self._offer_all(waiting.notice, delay)

    # -- output --------------------------------------------------------------------------------

    def _offer_all(self, notice: Notice, delay: float | None) -> None:
        """To every lane that wants it (`delay`: only the lanes waiting that long)."""
        notice = self._redacted(notice)
        for lane in self.lanes:
            settings = lane.settings
            if notice.kind not in ("test", "summary") and notice.kind not in settings.events:
                continue
            if delay is not None and notice.kind in WAITING and settings.wait_delay() != delay:
                continue
            self._offer(lane, notice)

    def _offer(self, lane: _Lane, notice: Notice) -> None:
        verdict = lane.throttle.admit(notice, self._now())
        if verdict == "send":
            self._queue(lane, notice)
        elif verdict == "held":
            self._schedule_summary(lane)

    def _schedule_summary(self, lane: _Lane) -> None:
        if lane.summary_timer is not None or self._loop is None:
            return
        due = lane.throttle.due(self._now())
        if due is None:
            return
        lane.summary_timer = self._loop.call_later(
            max(0.0, due - self._now()), self._summary_due, lane
        )

    def _summary_due(self, lane: _Lane) -> None:
        lane.summary_timer = None
        summary = lane.throttle.summary(self._now())
        if summary is not None:
            self._queue(lane, summary)
        self._schedule_summary(lane)

    def _queue(self, lane: _Lane, notice: Notice) -> None:
        try:
            lane.queue.put_nowait(notice)
        except asyncio.QueueFull:
            lane.dropped += 1
            log.warning(
                "notify: %s is behind; a %s notice was dropped", lane.sink.label, notice.kind
            )

    async def _work(self, lane: _Lane) -> None:
        while True:
            notice = await lane.queue.get()
            if notice is None:
                return
            try:
                await deliver(lane.sink, notice, self._safe)
                lane.sent += 1
            except SinkError:
                lane.failed += 1
            except Exception:
                lane.failed += 1
                log.exception("notify: %s failed on a %s notice", lane.sink.label, notice.kind)

    # -- helpers -------------------------------------------------------------------------------

    def _now(self) -> float:
        if self._clock is not None:
            return self._clock()
        return (self._loop or asyncio.get_running_loop()).time()

    def _redacted(self, notice: Notice) -> Notice:
        if not self.secrets:
            return notice
        update = {
            name: redact(getattr(notice, name), self.secrets)
            for name in ("title", "text", "answer", "agent")
        }
        return notice.model_copy(update=update)

    def _safe(self, text: str) -> str:
        return plain(redact(text, self.secrets), one_line=True)


async def deliver(
    sink: Sink,
    notice: Notice,
    safe: Callable[[str], str] = str,
    *,
    retries: int | None = None,
) -> str:
    """Send `notice` with the sink's retries (or `retries`), backoff and timeout; what the
    last attempt said, or the SinkError of the last failure (each failure logged through
    `safe`)."""
    settings = sink.settings
    retries = settings.retries if retries is None else retries
    delay = settings.backoff
    attempt = 0
    while True:
        attempt += 1
        try:
            async with asyncio.timeout(settings.timeout):
                return await sink.send(notice)
        except TimeoutError:
            error = SinkError(f"no answer within {settings.timeout:g} s")
        except SinkError as failure:
            error = failure
        last = not error.retry or attempt > retries
        log.warning(
            "notify: %s: a %s notice failed (attempt %d%s): %s",
            sink.label,
            notice.kind,
            attempt,
            "" if last else f", again in {delay:g} s",
            safe(str(error)),
        )
        if last:
            raise error
        await asyncio.sleep(delay)
        delay *= 2
