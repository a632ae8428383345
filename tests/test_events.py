"""The event bus, the event models and the forwarder's coalescing (with a recording store)."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import threading
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from semo.engine.events import (
    BROADCAST_EVENT,
    EVENT_KINDS,
    MAX_TEXT,
    AgentMessage,
    BaseEvent,
    CommandClaimed,
    CommandFinished,
    EngineStatus,
    EventBus,
    EventForwarder,
    JobEvent,
    MalformedAgentMessage,
    Notification,
    RoutingStep,
    SessionOutput,
    SessionSignal,
    SessionStatusChanged,
    event_from_json,
    fit_output,
)
from semo.engine.protocol.state import AgentState
from semo.engine.store.base import Store


def status(office: str = "o1", session: str = "s1", new: str = "ready", **kw: Any) -> Any:
    return SessionStatusChanged(
        office_id=office, session_id=session, agent_id="a1", status=new, **kw
    )


def output(seq: int, data: str = "x", office: str = "o1", session: str = "s1") -> SessionOutput:
    return SessionOutput(office_id=office, session_id=session, data=data, seq=seq)


def claimed(n: int, office: str = "o1") -> CommandClaimed:
    return CommandClaimed(office_id=office, command_id=f"c{n}", command_type="send_prompt")


ONE_OF_EACH: list[BaseEvent] = [
    SessionStatusChanged(
        office_id="o",
        session_id="s",
        agent_id="a",
        role="BE",
        status="executing",
        previous="ready",
        source="hook",
        reason="UserPromptSubmit",
    ),
    SessionOutput(office_id="o", session_id="s", data="\x1b[1mhé\r\n", seq=7),
    CommandClaimed(office_id="o", command_id="c", command_type="send_prompt", session_id="s"),
    CommandClaimed(office_id="o", command_id="c2", command_type="create_session"),
    CommandFinished(
        office_id="o",
        command_id="c",
        command_type="get_output",
        success=True,
        result={"lines": 3, "nested": {"ok": [1, 2]}},
    ),
    CommandFinished(
        office_id="o", command_id="c", command_type="send_keys", success=False, error="no session"
    ),
    AgentMessage(
        office_id="o", session_id="s", agent_id="a", message_kind="ASK_USER", summary="Which DB?"
    ),
    MalformedAgentMessage(office_id="o", session_id="s", error="bad JSON in [INVOKE:BE]"),
    EngineStatus(office_id="o", engine_id="e1", status="running", detail="3 sessions"),
    SessionSignal(
        office_id="o",
        session_id="s",
        signal_kind="completion",
        pattern="semo_done",
        source="model_text",
        text="[SEMO:DONE]",
    ),
    RoutingStep(office_id="o", step="invoked", ref_id="i1", session_id="s", detail="FE -> BE"),
    JobEvent(office_id="o", job_id="j", agent_id="a", step="retry", status="running", attempts=1),
    Notification(office_id="o", notice_kind="question", headline="semo o: FE asks you", ref="q"),
]


# -- models ------------------------------------------------------------------------------------


def test_every_kind_round_trips_through_json() -> None:
    assert {e.kind for e in ONE_OF_EACH} == EVENT_KINDS
    for event in ONE_OF_EACH:
        as_dict = event.model_dump(mode="json")
        json.dumps(as_dict)  # JSON-able as it is
        assert as_dict["kind"] == event.kind and as_dict["office_id"] == "o"
        assert event_from_json(as_dict) == event
        assert event_from_json(event.model_dump_json()) == event
        assert event_from_json(event.model_dump_json().encode()) == event
        assert type(event_from_json(as_dict)) is type(event)


def test_models_are_frozen_utc_and_validated() -> None:
    event = status()
    with pytest.raises(ValidationError):
        event.status = "error"  # type: ignore[misc]
    assert event.at.tzinfo is UTC and abs(event.at - datetime.now(UTC)) < timedelta(seconds=5)
    local = datetime(2024, 1, 1, 12, tzinfo=timezone(timedelta(hours=9)))
    assert status(at=local).at == local and status(at=local).at.tzinfo is UTC
    assert status(at=datetime(2024, 1, 1)).at.tzinfo is UTC  # naive = UTC
    assert status(new=AgentState.WAITING_INPUT).model_dump(mode="json")["status"] == "waiting_input"
    with pytest.raises(ValidationError):
        status(new="sleeping")
    with pytest.raises(ValidationError):
        event_from_json({"kind": "no_such_event", "office_id": "o"})
    with pytest.raises(ValidationError):
        EngineStatus(office_id="o", engine_id="e", status="exploded")
    # text is capped; a big result summary is replaced by a note
    assert len(status(reason="r" * 100_000).reason) == MAX_TEXT
    big = CommandFinished(
        office_id="o", command_id="c", command_type="x", success=True, result={"t": "x" * 10**6}
    )
    assert big.result == {"truncated": True, "bytes": 10**6 + 9}


def test_fit_output_cuts_the_oldest_data() -> None:
    small = output(0, "hello")
    assert fit_output(small, 1000) is small
    data = "".join(f"{i:05d}\x1b[0mé" for i in range(20_000))
    fitted = fit_output(output(1, data), 4096)
    payload = fitted.model_dump(mode="json")
    size = len(json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode())
    assert 4096 - 8 <= size <= 4096 and len(fitted.model_dump_json().encode()) <= 4096
    assert fitted.truncated and data.endswith(fitted.data) and fitted.data.endswith("19999\x1b[0mé")


# -- the bus -----------------------------------------------------------------------------------


async def test_subscribers_get_events_in_publish_order() -> None:
    bus = EventBus()
    first, second = bus.subscribe(), bus.subscribe()
    events = [status(), output(0), claimed(1), output(1), status(new="executing")]
    for event in events:
        bus.publish(event)
    for subscription in (first, second):
        got = [await subscription.get(timeout=1) for _ in events]
        assert got == events
        assert await subscription.get(timeout=0.01) is None


async def test_async_iteration_waits_for_events_and_ends_on_close() -> None:
    bus = EventBus()
    subscription = bus.subscribe()
    received: list[BaseEvent] = []

    async def consume() -> None:
        async for event in subscription:
            received.append(event)

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.01)
    bus.publish(claimed(1))
    await asyncio.sleep(0.01)
    bus.publish(claimed(2))
    bus.publish(claimed(3))
    subscription.close()  # what was queued is still read, then the iteration ends
    await asyncio.wait_for(task, 1)
    assert [e.command_id for e in received] == ["c1", "c2", "c3"]  # type: ignore[attr-defined]
    bus.publish(claimed(4))
    assert subscription.get_nowait() is None


async def test_filters_by_kind_and_office() -> None:
    bus = EventBus()
    statuses = bus.subscribe(kinds={"session_status"})
    office2 = bus.subscribe(office_id="o2")
    both = bus.subscribe(kinds=["command_claimed", "session_output"], office_id="o1")
    events = [
        status(),
        status(office="o2"),
        claimed(1),
        claimed(2, "o2"),
        output(0),
        output(0, office="o2"),
    ]
    for event in events:
        bus.publish(event)

    def drain(subscription: Any) -> list[BaseEvent]:
        got = []
        while (event := subscription.get_nowait()) is not None:
            got.append(event)
        return got

    assert drain(statuses) == [events[0], events[1]]
    assert drain(office2) == [events[1], events[3], events[5]]
    assert drain(both) == [events[2], events[4]]


async def test_a_full_queue_drops_the_oldest_output_only() -> None:
    bus = EventBus()
    subscription = bus.subscribe(maxsize=5)
    bus.publish(output(0))
    bus.publish(status(new="executing"))
    for seq in range(1, 5):
        bus.publish(output(seq))
    # full (5): output 0 went for output 4
    assert subscription.dropped == 1 and len(subscription) == 5
    bus.publish(claimed(1))  # a command event pushes out the oldest output (1)
    bus.publish(status(new="ready"))  # and so does a status event (2)
    assert subscription.dropped == 3 and len(subscription) == 5
    got = [subscription.get_nowait() for _ in range(5)]
    assert [(e.kind, getattr(e, "seq", None)) for e in got] == [  # type: ignore[union-attr]
        ("session_status", None),
        ("session_output", 3),
        ("session_output", 4),
        ("command_claimed", None),
        ("session_status", None),
    ]


async def test_a_queue_full_of_status_events_grows_instead_of_dropping_them() -> None:
    bus = EventBus()
    subscription = bus.subscribe(maxsize=3)
    for n in range(10):
        bus.publish(claimed(n))
    assert len(subscription) == 10 and subscription.dropped == 0
    bus.publish(output(0))  # no room, no older output: the new output is the one dropped
    assert len(subscription) == 10 and subscription.dropped == 1
    got = [subscription.get_nowait() for _ in range(10)]
    assert [e.command_id for e in got] == [f"c{n}" for n in range(10)]  # type: ignore[union-attr]
    assert subscription.get_nowait() is None


async def test_a_slow_subscriber_does_not_slow_the_others_or_publish() -> None:
    bus = EventBus()
    slow = bus.subscribe(maxsize=10)
    fast = bus.subscribe(maxsize=100_000)
    for seq in range(50_000):
        bus.publish(output(seq))
    assert len(slow) == 10 and slow.dropped == 49_990
    assert [slow.get_nowait().seq for _ in range(10)] == list(range(49_990, 50_000))  # type: ignore[union-attr]
    assert len(fast) == 50_000 and fast.dropped == 0


async def test_listener_exceptions_are_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    bus = EventBus()
    seen: list[str] = []

    def broken(event: BaseEvent) -> None:
        raise RuntimeError("listener bug")

    bus.add_listener(broken)
    remove = bus.add_listener(lambda event: seen.append(event.kind))
    subscription = bus.subscribe()
    event = status()
    with caplog.at_level(logging.ERROR, logger="semo.events"):
        bus.publish(event)  # does not raise
    # the other listener and the subscribers still got it
    assert seen == ["session_status"] and subscription.get_nowait() is event
    assert any(
        r.name == "semo.events" and "listener bug" in (r.exc_text or "") for r in caplog.records
    )
    remove()
    bus.publish(claimed(1))
    assert seen == ["session_status"]
    bus.publish("not an event")  # type: ignore[arg-type]  # still no exception


async def test_leaving_the_context_unsubscribes() -> None:
    bus = EventBus()
    first = claimed(1)
    with bus.subscribe() as subscription:
        assert bus.subscriber_count == 1
        bus.publish(first)
    assert bus.subscriber_count == 0 and subscription.closed
    async with bus.subscribe(kinds={"command_claimed"}) as other:
        assert bus.subscriber_count == 1
    assert bus.subscriber_count == 0 and other.closed
    bus.publish(claimed(2))  # nobody gets it
    assert subscription.get_nowait() is first and subscription.get_nowait() is None
    assert await asyncio.wait_for(other.get(), 1) is None  # closed and empty: at once


async def test_publish_from_another_thread_is_delivered_on_the_loop() -> None:
    bus = EventBus()
    subscription = bus.subscribe()
    threads: list[int] = []
    bus.add_listener(lambda event: threads.append(threading.get_ident()))
    worker = threading.Thread(target=lambda: [bus.publish(claimed(n)) for n in range(3)])
    worker.start()
    worker.join()
    got = [await subscription.get(timeout=1) for _ in range(3)]
    assert [e.command_id for e in got] == ["c0", "c1", "c2"]  # type: ignore[union-attr]
    assert threads == [threading.get_ident()] * 3


async def test_get_times_out() -> None:
    bus = EventBus()
    subscription = bus.subscribe()
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await subscription.get(timeout=0.05) is None
    assert 0.04 <= loop.time() - started < 1


# -- the forwarder (coalescing, with a store that records what it is asked to send) ----------


class RecordingStore:
    def __init__(self, *, ok: bool = True) -> None:
        self.sent: list[tuple[float, str, str, dict[str, Any]]] = []
        self.ok = ok

    async def publish_event(self, office_id: str, event: str, payload: dict[str, Any]) -> bool:
        self.sent.append((asyncio.get_running_loop().time(), office_id, event, payload))
        return self.ok


def forwarder(bus: EventBus, store: RecordingStore, **kw: Any) -> EventForwarder:
    return EventForwarder(bus, store, **kw)  # type: ignore[arg-type]


async def test_forwarder_sends_each_event_as_its_json() -> None:
    bus, store = EventBus(), RecordingStore()
    fwd = forwarder(bus, store)
    fwd.start()
    for event in ONE_OF_EACH:
        bus.publish(event)
    await fwd.stop()
    assert [(o, e) for _, o, e, _ in store.sent] == [("o", BROADCAST_EVENT)] * len(ONE_OF_EACH)
    assert [event_from_json(p) for *_, p in store.sent] == ONE_OF_EACH
    assert fwd.sent == len(ONE_OF_EACH) and fwd.failed == 0 and not fwd.running


async def test_forwarder_coalesces_output_per_session() -> None:
    bus, store = EventBus(), RecordingStore()
    fwd = forwarder(bus, store, interval=0.1)
    fwd.start()
    # 3 s of output, two sessions, a chunk every 5 ms each
    for seq in range(60):
        bus.publish(output(seq, f"a{seq};", session="s1"))
        bus.publish(output(seq, f"b{seq};", session="s2"))
        if seq == 30:
            bus.publish(status(session="s1", new="waiting_input"))
        await asyncio.sleep(0.005)
    await asyncio.sleep(0.2)  # everything went out on its own (stop() flushes at once)
    await fwd.stop()
    outputs = [(t, p) for t, _, _, p in store.sent if p["kind"] == "session_output"]
    for session, letter in (("s1", "a"), ("s2", "b")):
        mine = [(t, p) for t, p in outputs if p["session_id"] == session]
        # the data arrives complete and in order
        assert "".join(p["data"] for _, p in mine) == "".join(f"{letter}{i};" for i in range(60))
        assert not any(p["truncated"] for _, p in mine)
        # ranges are contiguous
        expected = 0
        for _, p in mine:
            first = p["seq"] if p["first_seq"] is None else p["first_seq"]
            assert first == expected
            expected = p["seq"] + 1
        assert expected == 60
        # at most one per 100 ms (loop clock; a little slack for float rounding)
        times = [t for t, _ in mine]
        assert all(b - a >= 0.099 for a, b in itertools.pairwise(times)), times
        assert 2 <= len(mine) <= 10  # about 0.4 s of output: coalesced, not one per chunk
    assert sum(1 for *_, p in store.sent if p["kind"] == "session_status") == 1


async def test_forwarder_first_chunk_goes_at_once() -> None:
    bus, store = EventBus(), RecordingStore()
    fwd = forwarder(bus, store, interval=10.0)
    fwd.start()
    bus.publish(output(0, "prompt> "))
    for _ in range(100):
        if store.sent:
            break
        await asyncio.sleep(0.005)
    assert [p["data"] for *_, p in store.sent] == ["prompt> "]
    bus.publish(output(1, "l"))
    bus.publish(output(2, "s"))
    await asyncio.sleep(0.05)
    assert len(store.sent) == 1  # held for the interval...
    await fwd.stop()  # ...and flushed on stop
    assert store.sent[-1][3]["data"] == "ls" and store.sent[-1][3]["first_seq"] == 1


async def test_forwarder_caps_a_broadcast_and_flags_it() -> None:
    bus, store = EventBus(), RecordingStore()
    fwd = forwarder(bus, store, interval=0.2, max_bytes=64 * 1024)
    fwd.start()
    bus.publish(output(0, "start"))
    await asyncio.sleep(0.02)
    chunk = "é" * 4000 + "\n"
    for seq in range(1, 40):  # ~300 KiB within one interval
        bus.publish(output(seq, chunk))
    await fwd.stop()
    first, second = (p for *_, p in store.sent)
    assert first["data"] == "start" and not first["truncated"]
    assert second["truncated"] and second["first_seq"] == 1 and second["seq"] == 39
    size = len(json.dumps(second, ensure_ascii=False, separators=(",", ":")).encode())
    assert 60 * 1024 < size <= 64 * 1024
    assert (chunk * 39).endswith(second["data"])
    assert fwd.truncated == 1


async def test_forwarder_flags_chunks_the_bus_dropped() -> None:
    bus, store = EventBus(), RecordingStore()
    fwd = forwarder(bus, store, interval=0.05)
    fwd.start()
    bus.publish(output(0, "a"))
    await asyncio.sleep(0.01)
    bus.publish(output(1, "b"))
    bus.publish(output(3, "d"))  # 2 never came
    await fwd.stop()
    assert [(p["data"], p["truncated"]) for *_, p in store.sent] == [("a", False), ("bd", True)]


async def test_forwarder_counts_failures_and_keeps_going() -> None:
    bus, store = EventBus(), RecordingStore(ok=False)
    fwd = forwarder(bus, store, office_id="o1", kinds={"command_claimed"})
    fwd.start()
    bus.publish(claimed(1))
    bus.publish(claimed(2, office="o2"))  # another office: not forwarded
    bus.publish(status())  # not a forwarded kind
    await asyncio.sleep(0.05)
    store.ok = True
    bus.publish(claimed(3))
    await fwd.stop()
    assert [p["command_id"] for *_, p in store.sent] == ["c1", "c3"]
    assert fwd.failed == 1 and fwd.sent == 1
    assert bus.subscriber_count == 0


async def test_forwarder_survives_a_store_that_raises(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(RecordingStore):
        async def publish_event(self, *args: Any) -> bool:
            raise RuntimeError("store bug")

    bus = EventBus()
    store = Broken()
    fwd = forwarder(bus, store)
    fwd.start()
    with caplog.at_level(logging.ERROR, logger="semo.events"):
        bus.publish(claimed(1))
        await asyncio.sleep(0.1)
    assert fwd.running
    await fwd.stop()
    assert "store bug" in caplog.text


async def test_stores_without_a_broadcast_channel_return_false(tmp_path: Any) -> None:
    from semo.engine.store.sqlite import SqliteStore

    store: Store = SqliteStore(str(tmp_path / "semo.db"))
    async with store:
        assert await store.publish_event("o", BROADCAST_EVENT, {"kind": "x"}) is False
