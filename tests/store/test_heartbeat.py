"""An engine's heartbeat (`engine.heartbeat.Heartbeat`) on every backend, and the engine's
periodic pass that ends what engines whose heartbeat ran out left (`Engine._recover_once`).

No timing is asserted: beats are waited for, and `steady()` runs on a hand-driven clock."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from semo.engine.config import AgentConfig, EngineConfig, OfficeConfig, PoolConfig, SemoConfig
from semo.engine.engine import Engine
from semo.engine.heartbeat import BEATS_PER_LEASE, LEASES_UNTIL_DEAD, Heartbeat
from semo.engine.store.base import NotFound, StoreError, StoreUnavailable
from semo.engine.store.models import AgentSession, EngineHeartbeat, Office
from tests.store.conftest import Stores
from tests.support.waiting import eventually, eventually_value


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FailingStore:
    """Refuses every heartbeat, as a database that went away would."""

    async def record_heartbeat(self, *args: Any, **kw: Any) -> EngineHeartbeat:
        raise StoreUnavailable("the database went away")

    async def mark_engine_stopped(self, *args: Any, **kw: Any) -> EngineHeartbeat:
        raise StoreUnavailable("the database went away")


async def test_a_heartbeat_records_start_beats_and_a_clean_stop(stores: Stores) -> None:
    store = await stores.new()
    office = await store.create_office(Office(name="o"))
    heartbeat = Heartbeat(store, office.id, "engine-1", lease_seconds=0.3)
    assert heartbeat.interval == pytest.approx(0.3 / BEATS_PER_LEASE)
    assert heartbeat.dead_after == pytest.approx(0.3 * LEASES_UNTIL_DEAD)

    started = await heartbeat.start()
    assert started.alive and started.status == "running" and heartbeat.running

    async def beaten() -> EngineHeartbeat | None:
        [row] = await store.list_engines(office.id)
        return row if row.last_seen > started.last_seen else None

    beat = await eventually_value(beaten, "a second beat")
    assert beat.started_at == started.started_at

    await heartbeat.stop()
    assert not heartbeat.running and not heartbeat.steady()
    [row] = await store.list_engines(office.id)
    assert (row.status, row.alive) == ("stopped", False) and row.stopped_at is not None
    assert heartbeat.last == row


async def test_a_heartbeat_for_an_unknown_office_is_a_clear_error(stores: Stores) -> None:
    store = await stores.new()
    heartbeat = Heartbeat(store, "no-such-office", "engine-1", lease_seconds=30)
    with pytest.raises(NotFound, match="office no-such-office not found"):
        await heartbeat.start()
    assert not heartbeat.running
    await heartbeat.stop()  # nothing was recorded: nothing to mark
    with pytest.raises(ValueError, match="lease_seconds"):
        Heartbeat(store, "o", "engine-1", lease_seconds=0)


async def test_steady_after_a_whole_limit_of_beats_without_a_gap(stores: Stores) -> None:
    store = await stores.new()
    office = await store.create_office(Office(name="o"))
    clock = Clock()
    heartbeat = Heartbeat(store, office.id, "engine-1", lease_seconds=30, clock=clock)
    assert not heartbeat.steady()
    await heartbeat._beat(starting=True)
    clock.now += heartbeat.dead_after - 1
    assert not heartbeat.steady()
    clock.now += 1
    assert heartbeat.steady()

    # a failed beat (the database was away): not steady until a whole limit has passed again
    heartbeat.store = FailingStore()  # type: ignore[assignment]
    with pytest.raises(StoreError):
        await heartbeat._beat()
    assert not heartbeat.steady()
    heartbeat.store = store
    await heartbeat._beat()
    assert not heartbeat.steady()
    clock.now += heartbeat.dead_after
    assert heartbeat.steady()
    await heartbeat.stop(mark_stopped=False)
    [row] = await store.list_engines(office.id)
    assert row.status == "running"


async def test_a_stop_that_cannot_be_recorded_is_logged(
    stores: Stores, caplog: pytest.LogCaptureFixture
) -> None:
    store = await stores.new()
    office = await store.create_office(Office(name="o"))
    heartbeat = Heartbeat(store, office.id, "engine-1", lease_seconds=30)
    await heartbeat.start()
    heartbeat.store = FailingStore()  # type: ignore[assignment]
    await heartbeat.stop()
    assert "could not record engine engine-1 as stopped" in caplog.text


def engine_for(store: Any, folder: Path, lease_seconds: float = 30) -> Engine:
    config = SemoConfig(
        office=OfficeConfig(name="o", repository=folder, workspace_root=folder / "ws"),
        engine=EngineConfig(id="me", lease_seconds=lease_seconds),
    )
    return Engine(config, store=store, runtime_dir=folder / "run")


async def test_the_engine_ends_silent_engines_sessions_only_while_steady(
    stores: Stores, tmp_path: Path
) -> None:
    store = await stores.new()
    office = await store.create_office(Office(name="o"))
    await store.record_heartbeat(office.id, "silent", dead_after=60)
    await stores.age_heartbeat(office.id, "silent", 61)
    session = await store.upsert_session(
        AgentSession(office_id=office.id, agent_id="a", engine_id="silent", status="ready")
    )
    engine = engine_for(store, tmp_path)
    engine.office = office
    clock = Clock()
    engine.heartbeat = Heartbeat(store, office.id, "me", lease_seconds=30, clock=clock)
    await engine.heartbeat._beat(starting=True)

    # just started (or back after an outage): others' silence proves nothing yet
    await engine._recover_once()
    assert (await store.get_session(session.session_id)).status == "ready"

    clock.now += engine.heartbeat.dead_after
    await engine._recover_once()
    ended = await store.get_session(session.session_id)
    assert ended.status == "terminated"
    assert ended.end_reason is not None and ended.end_reason.startswith(
        "engine silent stopped answering (last seen "
    )


async def test_the_engine_beats_while_running_and_records_a_clean_stop(
    stores: Stores, tmp_path: Path
) -> None:
    store = await stores.new()
    engine = engine_for(store, tmp_path)
    await engine.start()
    try:
        [row] = await store.list_engines(engine.office_id)
        assert (row.engine_id, row.status, row.alive) == ("me", "running", True)
        assert engine.heartbeat is not None and engine.heartbeat.running
        assert engine.heartbeat.dead_after == 12 and engine.heartbeat.interval == 3
    finally:
        await engine.stop("test over")
    [row] = await store.list_engines(engine.office_id)
    assert (row.status, row.alive) == ("stopped", False)


async def test_a_start_that_fails_after_the_first_beat_stops_the_heartbeat(
    stores: Stores, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await stores.new()
    engine = engine_for(store, tmp_path)

    async def reconcile_fails(*args: Any) -> None:
        raise StoreUnavailable("the database went away while reconciling")

    monkeypatch.setattr("semo.engine.engine.reconcile", reconcile_fails)
    with pytest.raises(StoreUnavailable, match="while reconciling"):
        await engine.start()
    assert engine.heartbeat is not None and not engine.heartbeat.running
    [row] = await store.list_engines(engine.office_id)
    assert (row.engine_id, row.status, row.alive) == ("me", "stopped", False)
    await engine.stop("the caller stops it too")  # as `semo engine` does: nothing more happens
    [again] = await store.list_engines(engine.office_id)
    assert again == row


class BrokenDispatcher:
    async def stop(self, grace: float) -> None:
        raise RuntimeError("the dispatcher would not stop")


async def test_a_failing_stop_step_still_stops_the_heartbeat(
    stores: Stores, tmp_path: Path
) -> None:
    store = await stores.new()
    office = await store.create_office(Office(name="o"))
    engine = engine_for(store, tmp_path)
    engine.office = office
    engine.heartbeat = Heartbeat(store, office.id, "me", lease_seconds=30)
    await engine.heartbeat.start()
    engine.dispatcher = BrokenDispatcher()  # type: ignore[assignment]

    with pytest.raises(RuntimeError, match="would not stop"):
        await engine.stop()
    assert not engine.heartbeat.running
    [row] = await store.list_engines(office.id)
    assert row.status == "stopped"


async def test_stopping_the_heartbeat_keeps_the_callers_cancellation(stores: Stores) -> None:
    store = await stores.new()
    office = await store.create_office(Office(name="o"))
    heartbeat = Heartbeat(store, office.id, "engine-1", lease_seconds=30)
    await heartbeat.start()
    stopping = asyncio.create_task(heartbeat.stop())
    await asyncio.sleep(0)  # it has cancelled the beats and waits for them to end
    assert not stopping.done()
    stopping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopping
    assert not heartbeat.running


async def test_a_session_ended_in_the_store_by_someone_else_stops_here_too(
    stores: Stores, tmp_path: Path
) -> None:
    """Another engine took this one for dead (or `semo end-session` ran): the agent stops."""
    store = await stores.new()
    bash = ["bash", "--norc", "--noprofile", "-i"]
    config = SemoConfig(
        office=OfficeConfig(name="o", repository=tmp_path, workspace_root=tmp_path / "ws"),
        engine=EngineConfig(id="me"),
        pool=PoolConfig(warm_roles=[]),
        agents=[AgentConfig(role=role, profile="generic", command=bash) for role in ("A", "B")],
    )
    env = {"PATH": os.environ["PATH"], "PS1": "$ ", "HOME": str(tmp_path)}
    engine = Engine(
        config,
        store=store,
        agent_env=env,
        runtime_dir=tmp_path / "run",
        folder_for=lambda _agent, _task: tmp_path,
    )
    await engine.start()
    try:
        kept = await engine.new_session("A")
        lost = await engine.new_session("B")
        await kept.wait_ready(10)
        await lost.wait_ready(10)
        await store.set_session_status(lost.session_id, "terminated", reason="host lost")
        await engine._recover_once()
        assert lost.ended and engine.manager is not None
        assert set(engine.manager.sessions) == {kept.session_id}
        assert not kept.ended
        row = await store.get_session(lost.session_id)
        assert row.end_reason == "host lost"  # the first reason stays
    finally:
        await engine.stop("test over")


async def test_a_failing_recovery_pass_is_logged_and_the_next_one_runs(
    stores: Stores, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    engine = engine_for(await stores.new(), tmp_path, lease_seconds=0.1)
    passes: list[int] = []

    async def flaky_pass() -> None:
        passes.append(len(passes))
        if len(passes) == 1:
            raise RuntimeError("boom")

    engine._recover_once = flaky_pass  # type: ignore[method-assign]
    await engine.start()
    try:
        await eventually(lambda: len(passes) >= 3)
    finally:
        await engine.stop("test over")
    assert "a recovery pass failed" in caplog.text
    assert engine._recovery is not None and engine._recovery.done()  # stopped with the engine
