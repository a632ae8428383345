"""Jobs own their work (migration 0006, sqlite schema 5), on every backend: job ids on
invocations and results, cancelling a job's open work, the timeline, an operator's cancel, and
the one retry of a job a dead engine left."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from semo.engine.store.base import NotFound, Store, StoreConflict
from semo.engine.store.models import (
    Agent,
    AgentInvocation,
    AgentResult,
    Job,
    JobEntry,
    Office,
)
from semo.engine.store.sqlite import SCHEMA_VERSION, SqliteStore
from tests.support.sqlite_downgrades import downgrade_to_4


async def setup(store: Store) -> tuple[Office, Agent, Agent, Job]:
    office = await store.create_office(Office(name="jobs"))
    fe = await store.upsert_agent(Agent(office_id=office.id, name="FE", role="FE"))
    be = await store.upsert_agent(Agent(office_id=office.id, name="BE", role="BE"))
    job = await store.create_job(Job(office_id=office.id, agent_id=fe.id, task="build it"))
    return office, fe, be, job


async def test_cancel_job_work_cancels_only_the_jobs_open_work(store: Store) -> None:
    office, fe, be, job = await setup(store)
    other = await store.create_job(Job(office_id=office.id, agent_id=fe.id, task="other"))

    def invocation(job_id: str | None) -> AgentInvocation:
        return AgentInvocation(
            office_id=office.id,
            caller_agent_id=fe.id,
            target_agent_id=be.id,
            task="api",
            job_id=job_id,
        )

    pending = await store.create_invocation(invocation(job.id))
    running = await store.create_invocation(invocation(job.id))
    await store.update_invocation(running.id, status="running")
    delivered = await store.create_invocation(invocation(job.id))
    await store.update_invocation(delivered.id, status="delivered")
    foreign = await store.create_invocation(invocation(other.id))
    untracked = await store.create_invocation(invocation(None))
    assert pending.job_id == job.id

    def result(job_id: str | None, invocation_id: str | None) -> AgentResult:
        return AgentResult(
            office_id=office.id,
            invocation_id=invocation_id,
            sender_agent_id=be.id,
            recipient_agent_id=fe.id,
            summary="done",
            job_id=job_id,
        )

    open_result = await store.create_result(result(job.id, running.id))
    sent = await store.create_result(result(job.id, delivered.id))
    await store.mark_result_delivered(sent.id)
    foreign_result = await store.create_result(result(other.id, foreign.id))

    cancelled = await store.cancel_job_work(job.id, "attempt 1 crashed")
    assert sorted(i.id for i in cancelled.invocations) == sorted([pending.id, running.id])
    assert {i.status for i in cancelled.invocations} == {"cancelled"}
    assert {i.error for i in cancelled.invocations} == {"attempt 1 crashed"}
    assert [(r.id, r.status, r.cancel_reason) for r in cancelled.results] == [
        (open_result.id, "cancelled", "attempt 1 crashed")
    ]
    # idempotent; other jobs' and untracked work untouched; delivered work stays delivered
    assert (await store.cancel_job_work(job.id, "again")).invocations == []
    statuses = {i.id: i.status for i in await store.list_invocations(office.id)}
    assert statuses[delivered.id] == "delivered"
    assert statuses[foreign.id] == "pending" and statuses[untracked.id] == "pending"
    pending_results = await store.list_results(office.id, status="pending")
    assert [r.id for r in pending_results] == [foreign_result.id]
    assert [r.id for r in await store.list_results(office.id, status="cancelled")] == [
        open_result.id
    ]

    # a cancelled invocation cannot change again (a late "running"/"delivered" from a router)
    with pytest.raises(StoreConflict, match="cancelled \\(attempt 1 crashed\\)"):
        await store.update_invocation(running.id, status="delivered")
    with pytest.raises(StoreConflict):
        await store.mark_result_delivered(open_result.id)
    with pytest.raises(NotFound):
        await store.update_invocation("no-such-invocation", status="running")


async def test_the_timeline_keeps_its_order_and_reads_from_a_point(store: Store) -> None:
    office, fe, _, job = await setup(store)
    steps = ["started", "session", "delivered", "question_asked", "done"]
    written = [
        await store.add_job_entry(
            JobEntry(
                job_id=job.id,
                office_id=office.id,
                step=step,
                status="running",
                attempts=1,
                agent_id=fe.id,
                detail=f"{step} détail",
            )
        )
        for step in steps
    ]
    ids = [entry.id for entry in written]
    assert all(isinstance(i, int) for i in ids) and ids == sorted(ids)
    everything = await store.list_job_entries(job.id)
    assert [e.step for e in everything] == steps
    assert everything[0].detail == "started détail"
    later = await store.list_job_entries(job.id, after=ids[2])  # type: ignore[arg-type]
    assert [e.step for e in later] == ["question_asked", "done"]
    assert await store.list_job_entries("no-such-job") == []
    with pytest.raises(NotFound):
        await store.add_job_entry(JobEntry(job_id="no-such-job", office_id=office.id, step="x"))


async def test_an_operator_cancels_a_pending_job_at_once_and_a_running_one_by_request(
    store: Store,
) -> None:
    office, fe, _, pending = await setup(store)
    cancelled = await store.request_job_cancel(pending.id, "not needed")
    assert (cancelled.status, cancelled.failure_reason, cancelled.cancel_reason) == (
        "failed",
        "cancelled: not needed",
        "not needed",
    )
    with pytest.raises(StoreConflict, match="has ended \\(failed: cancelled: not needed\\)"):
        await store.request_job_cancel(pending.id, "again")

    running = await store.create_job(Job(office_id=office.id, agent_id=fe.id, task="t"))
    await store.update_job(running.id, status="running", engine_id="e1")
    asked = await store.request_job_cancel(running.id, "wrong task")
    assert (asked.status, asked.cancel_reason) == ("running", "wrong task")
    with pytest.raises(StoreConflict, match="being cancelled already \\(wrong task\\)"):
        await store.request_job_cancel(running.id, "twice")
    with pytest.raises(NotFound):
        await store.request_job_cancel("no-such-job", "x")


async def test_a_dead_engines_job_is_retried_once_with_a_run_job_command(store: Store) -> None:
    office, _, _, job = await setup(store)
    await store.update_job(job.id, status="running", engine_id="dead", attempts=1)
    reason = "engine dead stopped while running this job"
    await store.update_job(job.id, status="failed", failure_reason=reason)

    # wrong attempts, engine or reason: not the failure the caller saw, nothing happens
    for engine, attempts, failed in (("dead", 2, reason), ("other", 1, reason), ("dead", 1, "x")):
        command = await store.retry_job(
            job.id, engine_id=engine, attempts=attempts, failed_reason=failed, reason="retry"
        )
        assert command is None
    assert (await store.get_job(job.id)).status == "failed"

    command = await store.retry_job(
        job.id, engine_id="dead", attempts=1, failed_reason=reason, reason="retrying once"
    )
    assert command is not None
    assert (command.command_type, command.payload, command.status) == (
        "run_job",
        {"job_id": job.id},
        "pending",
    )
    retried = await store.get_job(job.id)
    assert (retried.status, retried.engine_id, retried.failure_reason, retried.attempts) == (
        "pending",
        None,
        "retrying once",
        1,
    )
    # a second engine doing the same pass finds it retried already
    again = await store.retry_job(
        job.id, engine_id="dead", attempts=1, failed_reason=reason, reason="retrying once"
    )
    assert again is None
    assert [c.id for c in await store.list_commands(office.id)] == [command.id]


async def test_a_job_being_cancelled_is_not_retried(store: Store) -> None:
    _, _, _, job = await setup(store)
    await store.update_job(job.id, status="running", engine_id="dead", attempts=1)
    await store.request_job_cancel(job.id, "stop")
    await store.update_job(job.id, status="failed", failure_reason="engine died")
    command = await store.retry_job(
        job.id, engine_id="dead", attempts=1, failed_reason="engine died", reason="retry"
    )
    assert command is None


async def test_sqlite_schema_4_upgrades_keeping_invocations_and_results(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = SqliteStore(path)
    async with store:
        office, fe, be, job = await setup(store)
        invocation = await store.create_invocation(
            AgentInvocation(
                office_id=office.id, caller_agent_id=fe.id, target_agent_id=be.id, task="api"
            )
        )
        result = await store.create_result(
            AgentResult(
                office_id=office.id,
                invocation_id=invocation.id,
                sender_agent_id=be.id,
                recipient_agent_id=fe.id,
            )
        )
    downgrade_to_4(path)
    async with SqliteStore(path) as upgraded:
        assert [i.id for i in await upgraded.list_invocations(office.id)] == [invocation.id]
        assert [r.id for r in await upgraded.list_results(office.id)] == [result.id]
        assert (await upgraded.get_job(job.id)).cancel_reason is None
        await upgraded.update_invocation(invocation.id, status="cancelled", error="x")
        await upgraded.add_job_entry(JobEntry(job_id=job.id, office_id=office.id, step="s"))
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert "agent_invocations_office_id_idx" in names and "agent_results_v4" not in names
    finally:
        conn.close()


async def test_an_engine_ended_by_another_is_dead_at_once(store: Store) -> None:
    office = await store.create_office(Office(name="engines"))
    await store.record_heartbeat(office.id, "e1", dead_after=600, starting=True)
    assert await store.expire_engine(office.id, "e1") is True
    [row] = await store.list_engines(office.id)
    assert (row.status, row.alive) == ("running", False)
    assert await store.expire_engine(office.id, "e1") is False  # not alive: nothing to do
    # an engine that is in fact alive beats again and is alive again
    await store.record_heartbeat(office.id, "e1", dead_after=600)
    assert [e.alive for e in await store.list_engines(office.id)] == [True]
    await store.mark_engine_stopped(office.id, "e1")
    assert await store.expire_engine(office.id, "e1") is False
    assert await store.expire_engine(office.id, "no-such-engine") is False
