"""A recovering engine that dies half-way through recovering a dead engine's job, on every
backend: the job is never left failed without its retry.

Recovery (`engine.routing.job_recovery`, `Store.recover_job`) cancels the job's work and
retries or fails it in one transaction, before the dead engine's end (`Store.end_engine`). The
recovering engine's death is simulated by an exception (not a StoreError: nothing handles it)
raised by the store call it would have made next; another engine's pass then runs on the real
store. Before this, the job was failed by `end_engine` and retried by a second step: dying
between the two left it failed, and no later pass retried it (the first test failed).
"""

from __future__ import annotations

import os
import socket
from typing import Any

import pytest

from semo.engine.reconcile import reconcile
from semo.engine.store.base import Store
from semo.engine.store.models import Job, Office
from tests.support.pids import dead_pid


class Died(BaseException):
    """The recovering engine's process ended here."""


class DiesAt:
    """`store`, except that the first call of one of `methods` ends the 'process'."""

    def __init__(self, store: Store, *methods: str) -> None:
        self._store, self._methods = store, methods

    def __getattr__(self, name: str) -> Any:
        if name in self._methods:

            async def die(*_args: Any, **_kwargs: Any) -> None:
                raise Died(name)

            return die
        return getattr(self._store, name)


async def _dead_engines_job(store: Store) -> tuple[Office, str, Job]:
    dead = f"{socket.gethostname()}-{dead_pid()}"
    office = await store.create_office(Office(name="o"))
    await store.record_heartbeat(office.id, dead, dead_after=600, starting=True)
    job = await store.create_job(Job(office_id=office.id, agent_id="a", task="t"))
    job = await store.update_job(job.id, status="running", engine_id=dead, attempts=1)
    return office, dead, job


async def _run_job_commands(store: Store, office_id: str, job_id: str) -> int:
    commands = await store.list_commands(office_id, status=None)
    return sum(c.command_type == "run_job" and c.payload.get("job_id") == job_id for c in commands)


async def test_dying_before_the_job_is_recovered_leaves_it_to_the_next_pass(store: Store) -> None:
    office, dead, job = await _dead_engines_job(store)
    first = f"{socket.gethostname()}-{os.getpid()}"  # a live engine on this host
    dying = DiesAt(store, "recover_job", "cancel_job_work", "retry_job")
    with pytest.raises(Died):
        await reconcile(dying, office.id, first)  # type: ignore[arg-type]
    # nothing of the job was changed, or all of it: here nothing, it still runs on the dead one
    assert (await store.get_job(job.id)).status == "running"
    await reconcile(store, office.id, "next")
    after = await store.get_job(job.id)
    assert after.status == "pending" and after.engine_id is None
    assert await _run_job_commands(store, office.id, job.id) == 1
    assert [e.step for e in await store.list_job_entries(job.id)] == ["engine_died", "retry"]
    assert dead in [e.engine_id for e in await store.list_engines(office.id) if not e.alive]


async def test_dying_after_the_job_is_recovered_retries_it_once(store: Store) -> None:
    office, _dead, job = await _dead_engines_job(store)
    first = f"{socket.gethostname()}-{os.getpid()}"
    with pytest.raises(Died):
        await reconcile(DiesAt(store, "end_engine"), office.id, first)  # type: ignore[arg-type]
    assert (await store.get_job(job.id)).status == "pending"  # retried in the one transaction
    await reconcile(store, office.id, "next")  # ends the dead engine; the job is not touched
    await reconcile(store, office.id, "later")
    assert (await store.get_job(job.id)).status == "pending"
    assert await _run_job_commands(store, office.id, job.id) == 1
    assert [e.step for e in await store.list_job_entries(job.id)] == ["engine_died", "retry"]


async def test_a_job_is_recovered_once_when_two_engines_race(store: Store) -> None:
    office, dead, job = await _dead_engines_job(store)
    reason = f"engine {dead} stopped while running this job"
    # its heartbeat has not run out: a dead run found by its pid is recovered regardless
    first, second = [
        await store.recover_job(
            job.id,
            engine_id=dead,
            attempts=1,
            reason=reason,
            retry_reason="retry",
            unless_alive=False,
        )
        for _ in range(2)
    ]
    assert first is not None and first.status == "pending" and second is None
    assert await _run_job_commands(store, office.id, job.id) == 1


async def test_a_live_engines_job_and_a_cancelled_job_are_not_retried(store: Store) -> None:
    office, dead, job = await _dead_engines_job(store)
    # alive: a heartbeat that has not run out, unless_alive (the default) leaves it alone
    await store.record_heartbeat(office.id, "alive", dead_after=600, starting=True)
    live = await store.create_job(Job(office_id=office.id, agent_id="a", task="t"))
    live = await store.update_job(live.id, status="running", engine_id="alive", attempts=1)
    assert (
        await store.recover_job(
            live.id, engine_id="alive", attempts=1, reason="r", retry_reason="retry"
        )
        is None
    )
    assert (await store.get_job(live.id)).status == "running"
    # an operator asked to cancel it: failed with the reason, no run_job command
    await store.request_job_cancel(job.id, "not needed")
    failed = await store.recover_job(
        job.id,
        engine_id=dead,
        attempts=1,
        reason="engine died",
        retry_reason="retry",
        unless_alive=False,
    )
    assert failed is not None and (failed.status, failed.failure_reason) == (
        "failed",
        "engine died",
    )
    assert await _run_job_commands(store, office.id, job.id) == 0
