"""What a console reads from the engine's office snapshot, without pydantic.

The snapshot (`subscribe`) carries the store's rows and the pool's status as the models'
`model_dump(mode="json")`. The console shows them in its first frame, and importing pydantic
and the store's models costs more than the rest of the console's start (issue 14: attach
<= 300 ms from the command's start), so the client reads them as `Record`s: the same field
names as the models, `*_at` fields as datetimes. Answers, jobs and timelines, which a console
only asks for after it has drawn, come back as the real models (engine.control.client).

`EventBus` here is the part of engine.events.EventBus the console uses (subscribe with kinds,
listeners, publish), for the same reason: the events themselves are engine.events models,
imported when the first one arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

log = logging.getLogger("semo.control.client")


def _value(name: str, value: Any) -> Any:
    if isinstance(value, str) and name.endswith("_at"):
        with contextlib.suppress(ValueError):
            return datetime.fromisoformat(value)
    return value


class Record:
    """A row of the snapshot with attribute access: `record.created_at` is a datetime,
    a missing field is an AttributeError (as on the model)."""

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = {name: _value(name, value) for name, value in data.items()}

    def __getattr__(self, name: str) -> Any:
        try:
            return self._data[name]
        except KeyError:
            raise AttributeError(name) from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Record) and other._data == self._data

    def __hash__(self) -> int:
        return hash(self._data.get("id"))

    def __repr__(self) -> str:
        return f"Record({self._data!r})"

    def dump(self) -> dict[str, Any]:
        """The fields as given (datetimes parsed)."""
        return dict(self._data)


def pool_status(data: dict[str, Any]) -> Record:
    """engine.sessions.pool.PoolStatus's fields; `sessions` by id, each a Record."""
    from engine.protocol.state import AgentState

    sessions = {}
    for session_id, row in (data.get("sessions") or {}).items():
        record = Record(row)
        with contextlib.suppress(ValueError, KeyError):
            record._data["state"] = AgentState(row["state"])
        sessions[session_id] = record
    status = Record(data)
    status._data["sessions"] = sessions
    return status


class Subscription:
    """One subscriber's queue of events: an async iterator that ends once closed and drained.
    At `maxsize` the oldest event is dropped (a console only redraws from them)."""

    def __init__(self, bus: EventBus, kinds: Iterable[str] | None, maxsize: int) -> None:
        self._bus = bus
        self.kinds = None if kinds is None else frozenset(kinds)
        self.closed = False
        self.dropped = 0
        self._queue: deque[Any] = deque(maxlen=max(1, maxsize))
        self._ready = asyncio.Event()

    def _put(self, event: Any) -> None:
        if self.closed or (self.kinds is not None and event.kind not in self.kinds):
            return
        if len(self._queue) == self._queue.maxlen:
            self.dropped += 1
        self._queue.append(event)
        self._ready.set()

    async def get(self) -> Any | None:
        """The next event; None once closed and drained."""
        while not self._queue:
            if self.closed:
                return None
            self._ready.clear()
            await self._ready.wait()
        return self._queue.popleft()

    def close(self) -> None:
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
    """The events a client received, on the client's loop."""

    def __init__(self) -> None:
        self._subscriptions: set[Subscription] = set()
        self._listeners: list[Callable[[Any], None]] = []

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
        """`office_id` is accepted for engine.events.EventBus's signature: a client sees one
        office."""
        subscription = Subscription(self, kinds, maxsize)
        self._subscriptions.add(subscription)
        return subscription

    def add_listener(self, listener: Callable[[Any], None]) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self.remove_listener(listener)

    def remove_listener(self, listener: Callable[[Any], None]) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def publish(self, event: Any) -> None:
        """Queue `event` for the subscribers and call the listeners; never raises."""
        for subscription in tuple(self._subscriptions):
            subscription._put(event)
        for listener in tuple(self._listeners):
            try:
                listener(event)
            except Exception:
                log.exception("event listener %r failed", listener)
