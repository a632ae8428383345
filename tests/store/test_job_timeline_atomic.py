"""A job's status and the timeline step that says so are one transaction, on every backend:
`update_job(entry=...)` (the runner's done / failed), `request_job_cancel` (failed /
cancel_requested) and `recover_job(timeline=True)` (engine_died, then retry or failed).

Each is checked both ways: the step is there whenever the status is, and when the database
refuses the step (a trigger around the store), the status is not written either. Before
migration 0010 and the store changes with it, the steps were separate statements after the
status: the refusing tests failed (the status changed, no step)."""

from __future__ import annotations

import asyncio
import sqlite3

import psycopg
import pytest

from semo.engine.store.base import NotFound, Store, StoreConflict, StoreError
from semo.engine.store.models import Job, JobEntry, Office
from tests.store.conftest import Stores

REFUSED = "job_events refused by the test"


async def _job(store: Store, **changes: object) -> Job:
    office = await store.ensure_office(Office(name="o"))
    job = await store.create_job(Job(office_id=office.id, agent_id="a", task="t"))
    return await store.update_job(job.id, **changes) if changes else job


async def _steps(store: Store, job_id: str) -> list[tuple[str, str | None, str]]:
    return [(e.step, e.status, e.detail) for e in await store.list_job_entries(job_id)]


async def _refuse_entries(stores: Stores) -> None:
    """From now on the database refuses every new timeline row (around the store)."""
    if stores.backend == "sqlite":
        conn = sqlite3.connect(stores.target)
        try:
            conn.execute(
                "CREATE TRIGGER refuse_entries BEFORE INSERT ON job_events"
                f" BEGIN SELECT RAISE(ABORT, '{REFUSED}'); END"
            )
            conn.commit()
        finally:
            conn.close()
        return
    async with await psycopg.AsyncConnection.connect(stores.dsn, autocommit=True) as conn:
        await conn.execute(
            "create function refuse_entries() returns trigger language plpgsql as"
            f" $$ begin raise exception '{REFUSED}'; end $$;"
            "create trigger refuse_entries before insert on job_events"
            " for each row execute function refuse_entries()"
        )


async def test_update_job_writes_its_step_with_the_status(stores: Stores) -> None:
    store = await stores.new()
    job = await _job(store, status="running", attempts=1, session_id="s1")
    entry = JobEntry(job_id=job.id, office_id=job.office_id, step="done", detail="all green")
    done = await store.update_job(job.id, entry=entry, status="done")
    assert done.status == "done"
    [step] = await store.list_job_entries(job.id)
    # the row's status, attempts, session and agent, whatever the entry said
    assert (step.step, step.status, step.attempts, step.session_id, step.agent_id) == (
        "done",
        "done",
        1,
        "s1",
        "a",
    )
    assert step.detail == "all green"
    # an entry of another job is refused and nothing is written
    other = await _job(store)
    stray = JobEntry(job_id=other.id, office_id=other.office_id, step="done")
    with pytest.raises(StoreError, match="cannot be written with job"):
        await store.update_job(job.id, entry=stray, status="failed")
    assert (await store.get_job(job.id)).status == "done"
    assert await store.list_job_entries(other.id) == []


async def test_a_refused_step_leaves_the_status_unwritten(stores: Stores) -> None:
    store = await stores.new()
    job = await _job(store, status="running", engine_id="e1", attempts=1)
    pending = await _job(store)
    await _refuse_entries(stores)
    entry = JobEntry(job_id=job.id, office_id=job.office_id, step="done")
    with pytest.raises(StoreError, match=REFUSED):
        await store.update_job(job.id, entry=entry, status="done")
    with pytest.raises(StoreError, match=REFUSED):
        await store.request_job_cancel(pending.id, "not needed")
    with pytest.raises(StoreError, match=REFUSED):
        await store.recover_job(
            job.id,
            engine_id="e1",
            attempts=1,
            reason="engine e1 died",
            retry_reason="retrying",
            unless_alive=False,
            timeline=True,
        )
    assert (await store.get_job(job.id)).status == "running"
    assert (await store.get_job(pending.id)).status == "pending"
    # without a step the status is written as before
    assert (await store.update_job(job.id, status="done")).status == "done"


async def test_a_cancel_writes_its_step(stores: Stores) -> None:
    store = await stores.new()
    pending = await _job(store)
    running = await _job(store, status="running", attempts=1)
    assert (await store.request_job_cancel(pending.id, "not needed")).status == "failed"
    assert (await store.request_job_cancel(running.id, "stop")).status == "running"
    assert await _steps(store, pending.id) == [("failed", "failed", "cancelled: not needed")]
    assert await _steps(store, running.id) == [("cancel_requested", "running", "stop")]


async def test_recovery_writes_its_steps(stores: Stores) -> None:
    store = await stores.new()
    retried = await _job(store, status="running", engine_id="dead", attempts=1)
    spent = await _job(store, status="running", engine_id="dead", attempts=2)
    cancelled = await _job(store, status="running", engine_id="dead", attempts=1)
    await store.request_job_cancel(cancelled.id, "stop")
    untold = await _job(store, status="running", engine_id="dead", attempts=1)

    async def recover(job: Job, retry: str | None, *, timeline: bool = True) -> Job | None:
        return await store.recover_job(
            job.id,
            engine_id="dead",
            attempts=job.attempts,
            reason="engine dead died",
            retry_reason=retry,
            unless_alive=False,
            timeline=timeline,
        )

    assert (await recover(retried, "engine dead died; retrying")).status == "pending"  # type: ignore[union-attr]
    assert (await recover(spent, None)).status == "failed"  # type: ignore[union-attr]
    assert (await recover(cancelled, "retrying")).status == "failed"  # type: ignore[union-attr]
    assert (await recover(untold, None, timeline=False)).status == "failed"  # type: ignore[union-attr]
    assert await recover(retried, "again") is None  # recovered already: no second step
    assert await _steps(store, retried.id) == [
        ("engine_died", "failed", "engine dead died"),
        ("retry", "pending", "engine dead died; retrying"),
    ]
    assert await _steps(store, spent.id) == [
        ("engine_died", "failed", "engine dead died"),
        ("failed", "failed", "engine dead died (attempt 2, no retry left)"),
    ]
    # its cancel says why it ended: no failed step of the recovery's own
    assert [s[0] for s in await _steps(store, cancelled.id)] == ["cancel_requested", "engine_died"]
    assert await _steps(store, untold.id) == []


async def test_a_reader_never_sees_the_status_without_its_step(stores: Stores) -> None:
    """A second store instance (another engine, the console) reads the job, then its steps,
    while the first finishes jobs: whenever it sees a job done, the done step is there."""
    writer, reader = await stores.new(), await stores.new()
    jobs = [await _job(writer, status="running", attempts=1) for _ in range(20)]
    seen_done: list[str] = []
    missing: list[str] = []
    finished = asyncio.Event()

    async def read() -> None:
        while not finished.is_set():
            for job in jobs:
                if (await reader.get_job(job.id)).status != "done":
                    continue
                steps = [e.step for e in await reader.list_job_entries(job.id)]
                (seen_done if "done" in steps else missing).append(job.id)

    async def finish() -> None:
        for job in jobs:
            entry = JobEntry(job_id=job.id, office_id=job.office_id, step="done")
            await writer.update_job(job.id, entry=entry, status="done")
        finished.set()

    await asyncio.gather(read(), finish())
    assert missing == []
    assert seen_done  # the reader did look at finished jobs


async def test_a_dead_engines_job_is_taken_over_once_with_its_step(stores: Stores) -> None:
    store, other = await stores.new(), await stores.new()
    job = await _job(store, status="running", engine_id="dead", attempts=1, session_id="s1")
    cancelled = await _job(store, status="running", engine_id="dead", attempts=1)
    await store.request_job_cancel(cancelled.id, "stop")

    def step(of: Job) -> JobEntry:
        return JobEntry(job_id=of.id, office_id=of.office_id, step="retry", detail="continued")

    taken = await store.take_over_job(
        job.id, from_engine="dead", attempts=1, to_engine="me", entry=step(job)
    )
    assert taken is not None and (taken.status, taken.engine_id, taken.attempts) == (
        "running",
        "me",
        1,
    )
    # a second engine racing for it finds it taken; so does a wrong attempt count
    assert await other.take_over_job(job.id, from_engine="dead", attempts=1, to_engine="x") is None
    assert await other.take_over_job(job.id, from_engine="me", attempts=2, to_engine="x") is None
    assert await _steps(store, job.id) == [("retry", "running", "continued")]
    [entry] = await store.list_job_entries(job.id)
    assert (entry.session_id, entry.agent_id, entry.attempts) == ("s1", "a", 1)
    # an operator asked to cancel it: not taken over, no step
    assert (
        await store.take_over_job(
            cancelled.id, from_engine="dead", attempts=1, to_engine="me", entry=step(cancelled)
        )
        is None
    )
    assert [s[0] for s in await _steps(store, cancelled.id)] == ["cancel_requested"]
    assert (await store.get_job(cancelled.id)).engine_id == "dead"
    with pytest.raises(StoreError, match="cannot be written with job"):
        await store.take_over_job(
            job.id, from_engine="me", attempts=1, to_engine="x", entry=step(cancelled)
        )
    assert (await store.get_job(job.id)).engine_id == "me"


async def test_a_refused_step_leaves_the_job_with_its_engine(stores: Stores) -> None:
    store = await stores.new()
    job = await _job(store, status="running", engine_id="dead", attempts=1)
    await _refuse_entries(stores)
    entry = JobEntry(job_id=job.id, office_id=job.office_id, step="retry")
    with pytest.raises(StoreError, match=REFUSED):
        await store.take_over_job(
            job.id, from_engine="dead", attempts=1, to_engine="me", entry=entry
        )
    assert (await store.get_job(job.id)).engine_id == "dead"


async def test_a_job_is_submitted_with_its_command_and_created_step(stores: Stores) -> None:
    store = await stores.new()
    office = await store.create_office(Office(name="o"))
    job = Job(office_id=office.id, agent_id="a", task="Build it")
    created = JobEntry(job_id=job.id, office_id=office.id, step="created", detail="Build it")
    written, command = await store.submit_job(job, created)
    assert (written.id, written.status) == (job.id, "pending")
    assert (command.command_type, command.payload, command.status) == (
        "run_job",
        {"job_id": job.id},
        "pending",
    )
    [step] = await store.list_job_entries(job.id)
    assert (step.step, step.status, step.ref_id, step.agent_id, step.detail) == (
        "created",
        "pending",
        command.id,
        "a",
        "Build it",
    )
    claimed = await store.claim_next_command(office.id, "e1")
    assert claimed is not None and claimed.id == command.id
    # nothing is half-written: a job id that exists, an unknown office, a refused step
    with pytest.raises(StoreConflict):
        await store.submit_job(job, created)
    stray = Job(office_id="no-such-office", agent_id="a", task="t")
    with pytest.raises(NotFound):
        await store.submit_job(stray, created.model_copy(update={"job_id": stray.id}))
    await _refuse_entries(stores)
    refused = Job(office_id=office.id, agent_id="a", task="t")
    with pytest.raises(StoreError, match=REFUSED):
        await store.submit_job(refused, created.model_copy(update={"job_id": refused.id}))
    assert [j.id for j in await store.list_jobs(office.id)] == [job.id]
    assert [c.id for c in await store.list_commands(office.id)] == [command.id]
