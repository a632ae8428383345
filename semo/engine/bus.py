"""The in-process event bus: subscribers with bounded queues, and listeners.

Events are any objects with a `kind` (and, to be filtered by office, an `office_id`): the
engine's pydantic events (semo.engine.events) and the records a console client reads from the
control socket (semo.engine.control.views) go through the same bus. A subscriber's full queue drops
its oldest `session_output` event first, never any other kind (the queue grows past maxsize
instead): output can be read again from the screen, a command or a question cannot.
Standard library only: the console imports it before its first frame."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

log = logging.getLogger("semo.events")

#: the kind of the events a full queue drops first
OUTPUT_KIND = "session_output"

Listener = Callable[[Any], None]


class Subscription:
    """One subscriber's bounded queue of events; an async iterator that ends once the
    subscription is closed and drained. Leaving `with`/`async with` unsubscribes."""

    def __init__(
        self,
        bus: EventBus,
        kinds: Iterable[str] | None,
        office_id: str | None,
        maxsize: int,
    ) -> None:
        self._bus = bus
        self.kinds = None if kinds is None else frozenset(kinds)
        self.office_id = office_id
        self.maxsize = max(1, maxsize)
        #: SessionOutput events dropped because the queue was full
        self.dropped = 0
        self.closed = False
        self._seq = 0
        # two queues in publish order (entries carry a sequence number): the oldest output
        # event is dropped in O(1)
        self._outputs: deque[tuple[int, Any]] = deque()
        self._others: deque[tuple[int, Any]] = deque()
        self._ready = asyncio.Event()

    def __len__(self) -> int:
        return len(self._outputs) + len(self._others)

    def wants(self, event: Any) -> bool:
        return (self.kinds is None or event.kind in self.kinds) and (
            self.office_id is None or getattr(event, "office_id", None) == self.office_id
        )

    def _put(self, event: Any) -> None:
        if self.closed:
            return
        output = getattr(event, "kind", None) == OUTPUT_KIND
        if len(self) >= self.maxsize:
            if self._outputs:
                self._outputs.popleft()
                self.dropped += 1
            elif output:  # the newest output is the only one: it goes
                self.dropped += 1
                return
            # else: only status/command events queued: grow past maxsize
        self._seq += 1
        (self._outputs if output else self._others).append((self._seq, event))
        self._ready.set()

    def get_nowait(self) -> Any:
        """The next event, or None when none is queued."""
        outputs, others = self._outputs, self._others
        if outputs and (not others or outputs[0][0] < others[0][0]):
            return outputs.popleft()[1]
        if others:
            return others.popleft()[1]
        return None

    async def get(self, timeout: float | None = None) -> Any:
        """The next event; None on timeout, or when the subscription is closed and drained."""
        deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
        while True:
            event = self.get_nowait()
            if event is not None or self.closed:
                return event
            self._ready.clear()
            try:
                async with asyncio.timeout_at(deadline):
                    await self._ready.wait()
            except TimeoutError:
                return self.get_nowait()

    def close(self) -> None:
        """Unsubscribe: no new events; what is queued can still be read."""
        if not self.closed:
            self.closed = True
            self._bus._subscriptions.discard(self)
            self._ready.set()

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Any:
        event = await self.get()
        if event is None:
            raise StopAsyncIteration
        return event

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class EventBus:
    """In-process pub/sub on one asyncio loop. `publish` from another thread is handed to the
    loop the first subscription was made on."""

    def __init__(self) -> None:
        self._subscriptions: set[Subscription] = set()
        self._listeners: list[Listener] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def subscriber_count(self) -> int:
        return len(self._subscriptions)

    def subscribe(
        self,
        *,
        kinds: Iterable[str] | None = None,
        office_id: str | None = None,
        maxsize: int = 1000,
    ) -> Subscription:
        with contextlib.suppress(RuntimeError):
            self._loop = asyncio.get_running_loop()
        subscription = Subscription(self, kinds, office_id, maxsize)
        self._subscriptions.add(subscription)
        return subscription

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        """Call `listener(event)` synchronously for every event (its exceptions are logged);
        returns a function that removes it."""
        self._listeners.append(listener)
        return lambda: self.remove_listener(listener)

    def remove_listener(self, listener: Listener) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def publish(self, event: Any) -> None:
        """Queue `event` for every matching subscriber and call the listeners. Never blocks,
        never raises."""
        try:
            loop = self._loop
            if loop is not None and not loop.is_closed() and _running_loop() is not loop:
                loop.call_soon_threadsafe(self._dispatch, event)
            else:
                self._dispatch(event)
        except Exception:
            with contextlib.suppress(Exception):
                log.exception("semo: publishing %r failed", getattr(event, "kind", event))

    def _dispatch(self, event: Any) -> None:
        for subscription in tuple(self._subscriptions):
            try:
                if subscription.wants(event):
                    subscription._put(event)
            except Exception:
                log.exception("semo: queueing a %s event failed", getattr(event, "kind", "?"))
        for listener in tuple(self._listeners):
            try:
                listener(event)
            except Exception:
                with contextlib.suppress(Exception):
                    log.exception(
                        "semo: event listener %r failed on a %s event",
                        listener,
                        getattr(event, "kind", "?"),
                    )


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
