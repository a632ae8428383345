"""Engine events as Realtime broadcasts (seed 003 SE10) on the supabase backend.

The engine's SupabaseStore sends; an independent, unmodified `supabase` async client (as a web
app would use it: the anon key, signed in as a viewer of the office) joins the same private
channel `office:{id}` and listens with `on_broadcast`. The Supabase emulator relays broadcasts
between sockets joined to a topic, and lets only members of the office join it (migration
0007's Realtime Authorization policy).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from realtime import RealtimeSubscribeStates
from supabase import AsyncClient, acreate_client

from semo.engine.events import (
    BROADCAST_EVENT,
    CommandFinished,
    EventBus,
    EventForwarder,
    SessionOutput,
    SessionStatusChanged,
    event_from_json,
)
from semo.engine.store.models import Office
from semo.engine.store.supabase import SupabaseStore
from tests.store.conftest import Stores
from tests.support.supabase_emulator import SupabaseEmulator
from tests.support.waiting import eventually


def emulator(stores: Stores) -> SupabaseEmulator:
    assert stores.emulator is not None
    return stores.emulator


class Watcher:
    """A web app's view of an office: a channel joined with the anon key."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.states: list[RealtimeSubscribeStates] = []

    def events(self) -> list[dict[str, Any]]:
        return [m["payload"] for m in self.received if m["event"] == BROADCAST_EVENT]


@contextlib.asynccontextmanager
async def watcher(emu: SupabaseEmulator, office_id: str) -> AsyncIterator[Watcher]:
    email = f"viewer-{time.monotonic_ns()}@example.test"
    user_id = await asyncio.to_thread(emu.create_user, email, "secret-password")
    async with await psycopg.AsyncConnection.connect(emu.dsn, autocommit=True) as conn:
        await conn.execute(
            "insert into office_members (office_id, user_id, role) values (%s, %s, 'viewer')",
            (office_id, user_id),
        )
    client: AsyncClient = await acreate_client(emu.url, emu.anon_key)
    seen = Watcher()
    try:
        token = emu.sign_jwt({"role": "authenticated", "sub": user_id, "aud": "authenticated"})
        await client.realtime.set_auth(token)
        channel = client.channel(f"office:{office_id}", {"config": {"private": True}})
        channel.on_broadcast(BROADCAST_EVENT, lambda message: seen.received.append(message))
        channel.on_broadcast("other", lambda message: seen.received.append(message))
        await channel.subscribe(lambda state, error=None: seen.states.append(state))
        await eventually(lambda: RealtimeSubscribeStates.SUBSCRIBED in seen.states)
        yield seen
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.remove_all_channels(), 5)
        with contextlib.suppress(Exception):
            await client.realtime.close()
        with contextlib.suppress(Exception):
            await client.postgrest.aclose()


async def engine_store(stores: Stores) -> tuple[SupabaseStore, str]:
    store = await stores.new()
    assert isinstance(store, SupabaseStore)
    office = await store.create_office(Office(name="broadcasts"))
    return store, office.id


async def test_published_events_reach_an_independent_client(supabase_stores: Stores) -> None:
    store, office_id = await engine_store(supabase_stores)
    async with watcher(emulator(supabase_stores), office_id) as seen:
        status = SessionStatusChanged(
            office_id=office_id,
            session_id="s1",
            agent_id="a1",
            role="BE",
            status="executing",
            previous="ready",
            source="hook",
            reason="UserPromptSubmit",
        )
        finished = CommandFinished(
            office_id=office_id,
            command_id="c1",
            command_type="send_prompt",
            success=True,
            result={"delivered": True},
        )
        # the first publish starts watching the office and waits for its channel
        for event in (status, finished):
            assert await store.publish_event(
                office_id, BROADCAST_EVENT, event.model_dump(mode="json")
            )
        assert await store.publish_event(office_id, "other", {"n": 1})
        await eventually(lambda: len(seen.received) == 3)
        assert [m["event"] for m in seen.received] == [BROADCAST_EVENT, BROADCAST_EVENT, "other"]
        assert seen.events() == [status.model_dump(mode="json"), finished.model_dump(mode="json")]
        assert [event_from_json(p) for p in seen.events()] == [status, finished]
        assert seen.received[2]["payload"] == {"n": 1}
        assert store.stats.broadcasts == 3 and store.stats.broadcast_failures == 0

        # the office is now watched: its channel also carries the wake-ups
        command = await store.insert_command(office_id, "create_session", {"role": "BE"})
        assert await store.wait_for_change(office_id, 5) is True
        assert (await store.claim_next_command(office_id, "e1")).id == command.id  # type: ignore[union-attr]

        # another office's events go to another channel
        other = await store.create_office(Office(name="elsewhere"))
        assert await store.publish_event(other.id, BROADCAST_EVENT, {"kind": "x"})
        await asyncio.sleep(0.2)
        assert len(seen.received) == 3


async def test_publish_never_raises_on_a_closed_or_dead_store(
    supabase_stores: Stores, caplog: pytest.LogCaptureFixture
) -> None:
    emu = emulator(supabase_stores)
    never_opened = SupabaseStore(emu.url, emu.service_role_key)
    assert await never_opened.publish_event("o", BROADCAST_EVENT, {}) is False

    store, office_id = await engine_store(supabase_stores)
    caplog.set_level(logging.DEBUG, logger="semo.engine.store.supabase")
    async with watcher(emu, office_id) as seen:
        assert await store.publish_event(office_id, BROADCAST_EVENT, {"n": 1})
        await eventually(lambda: len(seen.events()) == 1)

        # the realtime server goes away: False at once (nothing is buffered), no exception
        emu.pause_realtime()
        emu.drop_sockets()
        await eventually(lambda: store._joined(store._watches[office_id]) is None)
        started = time.monotonic()
        assert await store.publish_event(office_id, BROADCAST_EVENT, {"n": 2}) is False
        assert time.monotonic() - started < 0.5
        assert store.stats.broadcast_failures >= 1

        # back: the watchdog rejoins and broadcasts flow again (the watcher rejoins too)
        emu.resume_realtime()
        await eventually(lambda: store._joined(store._watches[office_id]) is not None)
        await eventually(lambda: seen.states.count(RealtimeSubscribeStates.SUBSCRIBED) >= 2)
        assert await store.publish_event(office_id, BROADCAST_EVENT, {"n": 3})
        await eventually(lambda: len(seen.events()) == 2)
        assert seen.events() == [{"n": 1}, {"n": 3}]

    # a payload that is not JSON-able: False, not an exception
    assert await store.publish_event(office_id, BROADCAST_EVENT, {"x": object()}) is False

    await store.close()
    assert await store.publish_event(office_id, BROADCAST_EVENT, {"n": 4}) is False
    assert emu.service_role_key not in caplog.text
    assert "not sent" in caplog.text


async def test_first_publish_gives_up_when_realtime_is_down(supabase_stores: Stores) -> None:
    emu = emulator(supabase_stores)
    store = await supabase_stores.new(connect_timeout=0.5)
    assert isinstance(store, SupabaseStore)
    office = await store.create_office(Office(name="down"))
    emu.pause_realtime()
    started = time.monotonic()
    assert await store.publish_event(office.id, BROADCAST_EVENT, {}) is False
    assert time.monotonic() - started < 5
    # later publishes do not wait again while it stays down
    started = time.monotonic()
    assert await store.publish_event(office.id, BROADCAST_EVENT, {}) is False
    assert time.monotonic() - started < 0.5
    emu.resume_realtime()
    await eventually(lambda: store._joined(store._watches[office.id]) is not None)
    assert await store.publish_event(office.id, BROADCAST_EVENT, {})


async def test_the_forwarder_broadcasts_bus_events_with_output_coalesced(
    supabase_stores: Stores,
) -> None:
    store, office_id = await engine_store(supabase_stores)
    bus = EventBus()
    forwarder = EventForwarder(bus, store, office_id=office_id, interval=0.1)
    async with watcher(emulator(supabase_stores), office_id) as seen:
        forwarder.start()
        try:
            bus.publish(
                SessionStatusChanged(
                    office_id=office_id, session_id="s1", agent_id="a1", status="ready"
                )
            )
            await eventually(lambda: len(seen.events()) == 1)
            # 200 chunks within ~0.4 s
            for seq in range(200):
                bus.publish(
                    SessionOutput(office_id=office_id, session_id="s1", data=f"{seq},", seq=seq)
                )
                if seq % 10 == 9:
                    await asyncio.sleep(0.02)
            await asyncio.sleep(0.3)
        finally:
            await forwarder.stop()
        await eventually(lambda: sum(p["kind"] == "session_output" for p in seen.events()) > 0)
        await asyncio.sleep(0.2)
    events = seen.events()
    assert events[0]["kind"] == "session_status" and events[0]["status"] == "ready"
    outputs = [p for p in events if p["kind"] == "session_output"]
    assert "".join(p["data"] for p in outputs) == "".join(f"{i}," for i in range(200))
    assert 2 <= len(outputs) <= 15  # coalesced: far fewer broadcasts than chunks
    assert outputs[-1]["seq"] == 199 and not any(p["truncated"] for p in outputs)
    assert forwarder.sent == 1 + len(outputs) and forwarder.failed == 0
