"""Realtime refusals, classified (engine/store/refusals.py): a permanent one is reported once
and retried every `refusal_retry` seconds rather than every second, while the engine keeps
working by polling; a rate limit waits at least the server's Retry-After; both recover.

The attempts "over 60 s" are measured over a few seconds with the intervals scaled down
(`refusal_retry` 0.5 s instead of 300 s; the old watchdog retried every 50 ms to 1 s, here
`max_backoff` 0.05 s): the count bounds follow from the intervals, not from how fast the
machine is.
"""

from __future__ import annotations

import asyncio
import logging
import random

import psycopg
import pytest

from semo.engine.store.models import Office
from semo.engine.store.refusals import Backoff, Refusal, classify
from semo.engine.store.supabase import SupabaseStore
from tests.store.conftest import Stores
from tests.support.waiting import eventually

REASONS = {
    "ChannelRateLimitReached: Too many channels": ("permanent", "channel cap"),
    "Unauthorized: You do not have permissions to read from this Channel topic: office:x": (
        "permanent",
        "unauthorized",
    ),
    "InvalidJWTToken: Token has expired 12 seconds ago": ("permanent", "key"),
    "Unable to subscribe to changes with given parameters. Please check Realtime is enabled"
    " for the given connect parameters: [schema: public, table: user_questions]": (
        "permanent",
        "publication",
    ),
    "RealtimeDisabledForTenant": ("permanent", "realtime disabled"),
    "ClientJoinRateLimitReached: Too many joins per second": ("rate_limited", "rate limit"),
    "ConnectionRateLimitReached: Too many connected users": ("rate_limited", "rate limit"),
    "Too many messages per second": ("rate_limited", "rate limit"),
    "server rejected WebSocket connection: HTTP 429": ("rate_limited", "rate limit"),
    "the realtime socket is closed": ("transient", "transient"),
    "RealtimeRestarting": ("transient", "transient"),
    "server rejected WebSocket connection: HTTP 503": ("transient", "transient"),
}


@pytest.mark.parametrize("reason", list(REASONS))
def test_the_real_servers_reasons_are_classified(reason: str) -> None:
    refusal = classify(reason)
    assert (refusal.kind, refusal.code) == REASONS[reason]
    assert bool(refusal.advice) == (refusal.kind == "permanent")


def test_backoff_by_kind_with_jitter() -> None:
    backoff = Backoff(transient_max=1.0, rate_limited=30.0, permanent=300.0)
    rng = random.Random(7)
    transient, limited, permanent = (
        Refusal("transient", "t"),
        Refusal("rate_limited", "r"),
        Refusal("permanent", "p"),
    )
    assert backoff.delay(transient, 0, rng=rng) == 0.0  # the first reconnect is at once
    delays = [backoff.delay(transient, 3, rng=rng) for _ in range(50)]
    assert all(0.1 <= d <= 0.2 for d in delays) and len(set(delays)) > 1  # jittered
    assert all(0.5 <= backoff.delay(transient, 20, rng=rng) <= 1.0 for _ in range(50))
    assert all(30 <= backoff.delay(limited, 1, rng=rng) <= 45 for _ in range(50))
    assert all(60 <= backoff.delay(limited, 1, 60.0, rng=rng) <= 90 for _ in range(50))  # hint
    assert all(300 <= backoff.delay(permanent, 1, rng=rng) <= 360 for _ in range(50))


async def _plant(stores: Stores, sql: str) -> None:
    async with await psycopg.AsyncConnection.connect(stores.dsn, autocommit=True) as conn:
        await conn.execute(sql.encode())


async def test_a_permanent_refusal_is_reported_once_and_retried_slowly_while_polling(
    supabase_stores: Stores, caplog: pytest.LogCaptureFixture
) -> None:
    """user_questions outside the supabase_realtime publication: hosted Realtime fails the
    whole channel (the emulator too)."""
    emu = supabase_stores.emulator
    assert emu is not None
    await _plant(supabase_stores, "alter publication supabase_realtime drop table user_questions")
    caplog.set_level(logging.INFO, logger="semo.engine.store.supabase")
    engine = await supabase_stores.new(
        refusal_retry=0.5,
        max_backoff=0.05,
        channel_grace=0.1,
        degraded_interval=0.2,
        catch_up_interval=600.0,
    )
    client = await supabase_stores.new()
    assert isinstance(engine, SupabaseStore)
    office = await client.create_office(Office(name="refused"))
    await engine.wait_for_change(office.id, 0)  # starts watching
    await eventually(lambda: engine.stats.refusals.get("permanent publication", 0) >= 1)

    window, joins = 3.0, emu.stats().joins
    await asyncio.sleep(window)
    attempts = emu.stats().joins - joins
    # at most one join per refusal_retry (0.5 s) and the one under way; the old watchdog
    # rejoined every channel_grace + 50 ms here (about 20 in the window)
    assert 1 <= attempts <= window / 0.5 + 1, attempts
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    message = errors[0].getMessage()
    assert "(publication)" in message and "alter publication supabase_realtime add table" in message
    assert emu.service_role_key not in caplog.text

    # the engine keeps working: the degraded timer wakes it, the command is claimed
    command = await client.insert_command(office.id, "get_output", session_id="s")
    assert await engine.wait_for_change(office.id, 5) is True
    claimed = await engine.claim_next_command(office.id, "engine")
    assert claimed is not None and claimed.id == command.id

    # fixed: the next retry subscribes, and says so
    await _plant(supabase_stores, "alter publication supabase_realtime add table user_questions")
    await eventually(lambda: engine.subscribed(office.id), 10)
    await eventually(lambda: "accepts the office channels again" in caplog.text, 5)
    assert len([r for r in caplog.records if r.levelno >= logging.ERROR]) == 1


async def test_a_rate_limited_handshake_waits_for_the_servers_hint_and_loses_nothing(
    supabase_stores: Stores,
) -> None:
    emu = supabase_stores.emulator
    assert emu is not None
    engine = await supabase_stores.new(
        rate_limit_backoff=0.1, max_backoff=0.05, catch_up_interval=600.0, degraded_interval=0.2
    )
    client = await supabase_stores.new()
    assert isinstance(engine, SupabaseStore)
    office = await client.create_office(Office(name="limited"))
    await engine.wait_for_change(office.id, 0)
    await eventually(lambda: engine.subscribed(office.id))

    emu.refuse_realtime(429, retry_after=1.0)
    emu.drop_sockets()
    await eventually(lambda: emu.stats().connections_refused >= 1)
    inserted = [
        (await client.insert_command(office.id, "get_output", session_id="s")).id for _ in range(3)
    ]
    window, refused = 3.0, emu.stats().connections_refused
    await asyncio.sleep(window)
    attempts = emu.stats().connections_refused - refused
    # Retry-After 1 s (jittered up to 1.5 s) rather than rate_limit_backoff's 0.1 s
    assert 1 <= attempts <= window / 1.0 + 1, attempts
    assert engine.stats.refusals.get("rate_limited rate limit", 0) >= 1

    emu.resume_realtime()
    await eventually(lambda: engine.subscribed(office.id), 10)
    claimed = []
    while (command := await engine.claim_next_command(office.id, "engine")) is not None:
        claimed.append(command.id)
    assert claimed == inserted


async def test_a_channel_shut_down_over_the_message_quota_recovers_and_loses_no_command(
    supabase_stores: Stores,
) -> None:
    """Broadcasts beyond the project's messages per second: Realtime shuts the channel down
    ("Too many messages per second"); the engine backs off (a rate limit), polls meanwhile,
    and rejoins; every command inserted meanwhile is claimed."""
    emu = supabase_stores.emulator
    assert emu is not None
    engine = await supabase_stores.new(
        rate_limit_backoff=0.5, channel_grace=0.1, catch_up_interval=600.0, degraded_interval=0.2
    )
    chatty = await supabase_stores.new()
    client = await supabase_stores.new()
    assert isinstance(engine, SupabaseStore)
    office = await client.create_office(Office(name="chatty"))
    await engine.wait_for_change(office.id, 0)
    await eventually(lambda: engine.subscribed(office.id))
    assert await chatty.publish_event(office.id, "semo_event", {"kind": "hello"}) is True

    emu.set_message_quota(20)
    for n in range(30):  # 30 broadcasts, each delivered to the engine: 60 messages
        await chatty.publish_event(office.id, "semo_event", {"kind": "session_output", "n": n})
    await eventually(lambda: emu.stats().quota_shutdowns >= 1)
    await eventually(lambda: engine.stats.refusals.get("rate_limited rate limit", 0) >= 1)
    inserted = [
        (await client.insert_command(office.id, "get_output", session_id="s")).id for _ in range(3)
    ]
    emu.set_message_quota(None)
    await eventually(lambda: engine.subscribed(office.id), 10)
    claimed = []
    while (command := await engine.claim_next_command(office.id, "engine")) is not None:
        claimed.append(command.id)
    assert claimed == inserted


async def test_broadcasts_beyond_the_engines_budget_are_not_sent(supabase_stores: Stores) -> None:
    """`broadcasts_per_second` 5: a burst of 20 sends about a second's worth (5, plus what
    refills during the burst) and drops the rest, counted; the server's quota is never hit."""
    emu = supabase_stores.emulator
    assert emu is not None
    engine = await supabase_stores.new(broadcasts_per_second=5)
    client = await supabase_stores.new()
    assert isinstance(engine, SupabaseStore)
    office = await client.create_office(Office(name="budget"))
    emu.set_message_quota(10)
    sent = [
        await engine.publish_event(office.id, "semo_event", {"kind": "session_output", "n": n})
        for n in range(20)
    ]
    assert 5 <= sent.count(True) <= 6, sent
    assert engine.stats.broadcasts_over_budget == sent.count(False)
    assert emu.stats().quota_shutdowns == 0
