"""The supabase store under Realtime faults, injected by the Supabase emulator.

Each test watches an office with one store (the engine) and writes with another (a client, through
PostgREST), then breaks Realtime: dropped or frozen sockets, lost events, a message that kills
realtime-py's listener, a server that refuses connections for 20 s (realtime-py alone gives up
after `max_retries`). Every pending command must still reach the engine, and the watchdog must
bring the channel back quickly. Timers are set long where a test proves another path delivered.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from semo.engine.store.base import StoreError, StoreUnavailable
from semo.engine.store.models import Office
from semo.engine.store.supabase import SupabaseStore
from tests.store.conftest import Stores
from tests.support.supabase_emulator import SupabaseEmulator
from tests.support.waiting import eventually

#: no timer wake-up within a test: what arrives came through Realtime or a catch-up read
NO_TIMER = {"catch_up_interval": 600.0, "degraded_interval": 600.0}


async def engine_and_client(stores: Stores, **options: Any) -> tuple[SupabaseStore, Any, str]:
    engine = await stores.new(**options)
    client = await stores.new()
    assert isinstance(engine, SupabaseStore)
    office = await client.create_office(Office(name="faults"))
    assert await engine.wait_for_change(office.id, 0) is False  # starts watching
    await eventually(lambda: subscribed(engine, office.id))
    await asyncio.sleep(0.05)
    return engine, client, office.id


def subscribed(store: SupabaseStore, office_id: str) -> bool:
    return store.subscribed(office_id)


async def drain(store: SupabaseStore, office_id: str, engine_id: str = "engine") -> list[str]:
    claimed = []
    while (command := await store.claim_next_command(office_id, engine_id)) is not None:
        claimed.append(command.id)
        await store.complete_command(command.id, engine_id, success=True)
    return claimed


async def settle(store: SupabaseStore, office_id: str) -> None:
    """Consume the hints already due (results of what was just done, resubscriptions)."""
    while await store.wait_for_change(office_id, 0.3):
        pass


def emulator(stores: Stores) -> SupabaseEmulator:
    assert stores.emulator is not None
    return stores.emulator


def send_raw(emu: SupabaseEmulator, message: dict[str, Any]) -> int:
    """Make the emulator write `message` on every Realtime socket (a misbehaving server)."""
    core = emu._core
    assert core is not None

    def send() -> int:
        sockets = [s for s in core.sockets if not s.closed]
        for sock in sockets:
            channel = sock.channels.get(message["topic"])
            sock.send({**message, "join_ref": channel.join_ref if channel else None})
        return len(sockets)

    return emu._in_loop(send)


async def test_commands_inserted_while_sockets_are_down_are_claimed(
    supabase_stores: Stores,
) -> None:
    emu = emulator(supabase_stores)
    engine, client, office = await engine_and_client(supabase_stores, **NO_TIMER)
    emu.pause_realtime()
    assert emu.drop_sockets() == 1
    await eventually(lambda: not subscribed(engine, office))
    inserted = [
        (await client.insert_command(office, "get_output", session_id="s")).id for _ in range(5)
    ]
    await asyncio.sleep(0.3)  # nobody listens: these inserts never become events
    assert emu.stats().events_sent == 0
    resumed = time.monotonic()
    emu.resume_realtime()
    assert await engine.wait_for_change(office, 5) is True  # the catch-up after SUBSCRIBED
    assert time.monotonic() - resumed < 2.0
    assert engine.stats.resubscribed >= 1 and engine.stats.timer == 0
    assert await drain(engine, office) == inserted

    # and events flow again on the new connection
    await settle(engine, office)
    waiting = asyncio.create_task(engine.wait_for_change(office, 10))
    await asyncio.sleep(0.05)
    events = engine.stats.events
    late = await client.insert_command(office, "get_output", session_id="s")
    assert await asyncio.wait_for(waiting, 5) is True
    assert engine.stats.events > events
    assert await drain(engine, office) == [late.id]


async def test_drop_during_inserts_loses_nothing(supabase_stores: Stores) -> None:
    emu = emulator(supabase_stores)
    engine, client, office = await engine_and_client(supabase_stores, **NO_TIMER)
    inserted: list[str] = []
    claimed: list[str] = []

    async def insert() -> None:
        for i in range(60):
            inserted.append((await client.insert_command(office, "get_output", session_id="s")).id)
            if i % 10 == 5:
                await asyncio.to_thread(emu.drop_sockets)

    async def work() -> None:
        while len(claimed) < 60:
            assert await engine.wait_for_change(office, 10) is True
            claimed.extend(await drain(engine, office))

    await asyncio.wait_for(asyncio.gather(insert(), work()), 30)
    assert sorted(claimed) == sorted(inserted) and len(set(claimed)) == 60
    assert engine.stats.timer == 0 and engine.stats.resubscribed >= 1


async def test_total_event_loss_still_delivers_through_the_timer(supabase_stores: Stores) -> None:
    emu = emulator(supabase_stores)
    engine, client, office = await engine_and_client(
        supabase_stores, catch_up_interval=1.0, degraded_interval=1.0
    )
    emu.set_event_loss(1.0, seed=1)
    assert await engine.wait_for_change(office, 0) is False
    started = time.monotonic()
    command = await client.insert_command(office, "get_output", session_id="s")
    assert await engine.wait_for_change(office, 5) is True
    assert time.monotonic() - started < 2.0
    assert engine.stats.events == 0 and engine.stats.timer >= 1
    assert emu.stats().events_dropped >= 1 and emu.stats().events_sent == 0
    assert await drain(engine, office) == [command.id]


async def test_a_message_that_kills_the_listener_does_not_stop_wake_ups(
    supabase_stores: Stores,
) -> None:
    """realtime-py raises KeyError on a presence_state entry without `phx_ref` (its type says
    the key is optional); the exception ends its listener silently, like a raising callback."""
    emu = emulator(supabase_stores)
    engine, client, office = await engine_and_client(supabase_stores, **NO_TIMER)
    old = engine._rt
    assert old is not None and old._listen_task is not None
    listener = old._listen_task
    message = {
        "topic": f"realtime:office:{office}",
        "event": "presence_state",
        "payload": {"somebody": {"metas": [{"status": "online"}]}},
        "ref": None,
    }
    killed = time.monotonic()
    assert send_raw(emu, message) == 1
    await eventually(listener.done, timeout=5)
    assert isinstance(listener.exception(), KeyError)
    await eventually(lambda: engine._rt is not old and subscribed(engine, office), timeout=5)
    assert time.monotonic() - killed < 1.5
    assert any("listener stopped" in reason for reason in engine.stats.reasons)

    await settle(engine, office)  # the resubscription hints
    waiting = asyncio.create_task(engine.wait_for_change(office, 10))
    await asyncio.sleep(0.05)
    events = engine.stats.events
    command = await client.insert_command(office, "get_output", session_id="s")
    assert await asyncio.wait_for(waiting, 5) is True
    assert engine.stats.events > events  # through Realtime, not a timer
    assert await drain(engine, office) == [command.id]


async def test_watchdog_recovers_within_a_second_of_the_server_coming_back(
    supabase_stores: Stores,
) -> None:
    """realtime-py alone gives up after `max_retries` (5 attempts over ~15 s) and never tries
    again; the watchdog keeps trying (backoff capped at 1 s) for as long as it takes."""
    emu = emulator(supabase_stores)
    engine, client, office = await engine_and_client(supabase_stores, **NO_TIMER)
    emu.pause_realtime()
    emu.drop_sockets()
    command = await client.insert_command(office, "get_output", session_id="s")
    await asyncio.sleep(20)
    refused = emu.stats().connections_refused
    assert refused >= 15  # still trying after 20 s, about once a second
    subscriptions = len(engine.stats.subscribed_at)
    resumed = time.monotonic()
    emu.resume_realtime()
    await eventually(lambda: len(engine.stats.subscribed_at) > subscriptions, timeout=5)
    recovered = engine.stats.subscribed_at[-1] - resumed
    print(f"refused {refused} connections in 20 s; SUBSCRIBED {recovered * 1000:.0f} ms after")
    assert recovered < 1.2, recovered
    assert await engine.wait_for_change(office, 5) is True
    assert engine.stats.timer == 0
    assert await drain(engine, office) == [command.id]


async def test_a_kicked_channel_is_back_within_a_second(supabase_stores: Stores) -> None:
    """phx_error on the channel: realtime-py would rejoin after 1 s by itself; the watchdog
    does not wait that long (channel_grace 0.5 s)."""
    emu = emulator(supabase_stores)
    engine, client, office = await engine_and_client(supabase_stores, **NO_TIMER)
    subscriptions = len(engine.stats.subscribed_at)
    kicked = time.monotonic()
    assert emu.kick_channels() == 1
    command = await client.insert_command(office, "get_output", session_id="s")  # in the gap
    await eventually(lambda: len(engine.stats.subscribed_at) > subscriptions, timeout=5)
    assert engine.stats.subscribed_at[-1] - kicked < 1.0
    assert await engine.wait_for_change(office, 5) is True
    assert await drain(engine, office) == [command.id]


async def test_a_frozen_socket_is_noticed_by_the_ping(supabase_stores: Stores) -> None:
    """A half-open socket goes unnoticed by realtime-py for ~50 s; the watchdog's ping sees
    it within ping_interval + ping_timeout."""
    emu = emulator(supabase_stores)
    engine, client, office = await engine_and_client(
        supabase_stores, ping_interval=0.5, ping_timeout=0.5, **NO_TIMER
    )
    subscriptions = len(engine.stats.subscribed_at)
    assert emu.freeze_sockets() == 1
    command = await client.insert_command(office, "get_output", session_id="s")
    await eventually(lambda: len(engine.stats.subscribed_at) > subscriptions, timeout=5)
    assert any("ping" in reason for reason in engine.stats.reasons)
    assert await engine.wait_for_change(office, 5) is True
    assert await drain(engine, office) == [command.id]


@pytest.mark.parametrize("status", [500, 502, 503, 504])
async def test_server_errors_are_unavailable_and_pass(supabase_stores: Stores, status: int) -> None:
    emu = emulator(supabase_stores)
    store = await supabase_stores.new()
    office = await store.create_office(Office(name="5xx"))
    emu.fail_rest(1, status)
    with pytest.raises(StoreUnavailable, match=str(status)) as raised:
        await store.get_office(office.id)  # not retried: the caller decides
    assert emu.service_role_key not in str(raised.value)
    emu.fail_rest(1, status)
    with pytest.raises(StoreUnavailable):
        await store.claim_next_command(office.id, "engine")
    assert (await store.get_office(office.id)).id == office.id


async def test_a_wrong_key_is_a_clear_error(supabase_stores: Stores) -> None:
    emu = emulator(supabase_stores)
    wrong = "not-the-service-role-key"
    with pytest.raises(StoreError, match="refused the key") as raised:
        await SupabaseStore(emu.url, wrong).open()
    assert wrong not in str(raised.value)


async def test_faults_never_log_the_key(
    supabase_stores: Stores, caplog: pytest.LogCaptureFixture
) -> None:
    emu = emulator(supabase_stores)
    caplog.set_level(logging.INFO)
    engine, _client, office = await engine_and_client(supabase_stores, **NO_TIMER)
    emu.pause_realtime()
    emu.drop_sockets()
    await asyncio.sleep(1.5)
    emu.resume_realtime()
    emu.kick_channels()
    await eventually(lambda: subscribed(engine, office), timeout=5)
    assert caplog.records  # the reconnects were logged
    key = emu.service_role_key
    assert all(key not in record.getMessage() for record in caplog.records)
    assert key not in repr(engine)
