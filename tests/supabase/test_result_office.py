"""Results carry their command's office (migration 0020): the database sets
`agent_command_results.office_id` whatever was sent, and an engine watching two offices hears
of a result on that office's channel only (its binding is filtered by office)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from semo.engine.store.models import Office
from semo.engine.store.supabase import SupabaseStore
from tests.store.conftest import Stores, open_stores
from tests.support.waiting import eventually


@pytest.fixture
async def supabase(tmp_path: Path) -> AsyncIterator[Stores]:
    async with open_stores("supabase", tmp_path) as stores:
        yield stores


async def test_a_result_is_delivered_on_its_offices_channel_only(supabase: Stores) -> None:
    emu = supabase.emulator
    assert emu is not None
    engine = await supabase.new(catch_up_interval=600.0, degraded_interval=600.0)
    client = await supabase.new()
    assert isinstance(engine, SupabaseStore)
    first = await client.create_office(Office(name="first"))
    second = await client.create_office(Office(name="second"))
    for office in (first, second):
        await engine.wait_for_change(office.id, 0)
        await eventually(lambda office=office: engine.subscribed(office.id))
    command = await client.insert_command(first.id, "get_output", session_id="s")
    claimed = await client.claim_next_command(first.id, "other-engine")
    assert claimed is not None and claimed.id == command.id
    await asyncio.sleep(0.5)  # the insert's and claim's events are in
    sent = emu.stats().events_sent
    await client.complete_command(command.id, "other-engine", success=True, result={"ok": 1})
    await eventually(lambda: emu.stats().events_sent > sent)
    await asyncio.sleep(0.5)  # anything else the result would cause has arrived
    assert emu.stats().events_sent == sent + 1  # not once per watched office

    async with await psycopg.AsyncConnection.connect(supabase.dsn, autocommit=True) as conn:
        row = await (
            await conn.execute(
                "select office_id from agent_command_results where command_id = %s", [command.id]
            )
        ).fetchone()
        assert row == (first.id,)
        await conn.execute(
            "update agent_command_results set office_id = %s where command_id = %s",
            [second.id, command.id],
        )
        row = await (
            await conn.execute(
                "select office_id from agent_command_results where command_id = %s", [command.id]
            )
        ).fetchone()
    assert row == (first.id,)  # the database keeps it the command's
