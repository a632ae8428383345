"""What becomes of the jobs a dead engine was running (called by semo.engine.reconcile).

    jobs = await running_jobs_of(store, office_id, engine_id)   # before Store.end_engine
    recovered = await recover_jobs(store, jobs, engine_id, reason)
    ended = await store.end_engine(..., job_reason=reason)      # the rest of its work

How it works: docs/JOBS.md, "Recovering a dead engine's jobs".
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import NamedTuple

from semo.engine.routing.policy import Failure, decide
from semo.engine.store.base import Store, StoreError
from semo.engine.store.models import Job, JobEntry

log = logging.getLogger("semo.jobs")


async def running_jobs_of(store: Store, office_id: str, engine_id: str) -> list[Job]:
    """The office's running jobs recorded as run by `engine_id`."""
    return [
        job
        for job in await store.list_jobs(office_id, status="running")
        if job.engine_id == engine_id
    ]


class Recovered(NamedTuple):
    recovered: int = 0  # jobs this call ended or retried
    retried: int = 0  # of them, back to pending with a new run_job command


async def recover_jobs(
    store: Store, jobs: list[Job], engine_id: str, reason: str, *, unless_alive: bool = True
) -> Recovered:
    """Recover `jobs` (run by dead engine `engine_id`) with `reason`: each one's work cancelled
    and the job retried if the crash policy allows, else failed (`Store.recover_job`)."""
    recovered = retried = 0
    for job in jobs:
        try:
            outcome = await _recover(store, job, engine_id, reason, unless_alive)
        except StoreError as error:
            log.warning("job %s of dead engine %s: recovery failed: %s", job.id, engine_id, error)
            continue
        if outcome is not None:
            recovered += 1
            retried += outcome.status == "pending"
    return Recovered(recovered, retried)


async def _recover(
    store: Store, job: Job, engine_id: str, reason: str, unless_alive: bool
) -> Job | None:
    decision = decide(Failure(kind="crash", attempts=max(job.attempts, 1), detail=reason))
    note = f"{reason}; retrying once on a live engine"
    recovered = await store.recover_job(
        job.id,
        engine_id=engine_id,
        attempts=job.attempts,
        reason=reason,
        retry_reason=note if decision.retry else None,
        unless_alive=unless_alive,
        timeline=True,  # engine_died, then retry or failed, in the same transaction
    )
    if recovered is None:
        return None  # ended otherwise, another engine recovered it, or its engine lives
    if recovered.status == "pending":
        log.info("job %s of dead engine %s: retried", job.id, engine_id)
    return recovered


def job_entry(job: Job, step: str, *, session_id: str | None = None, detail: str = "") -> JobEntry:
    """The entry of `job`'s timeline for `step`: the job's status, attempts, agent and session
    (or `session_id`) as they are now."""
    return JobEntry(
        job_id=job.id,
        office_id=job.office_id,
        step=step,
        status=job.status,
        attempts=job.attempts,
        session_id=session_id or job.session_id,
        agent_id=job.agent_id,
        detail=detail,
    )


def taking_over(me: str) -> str:
    """The engine id a job taken over by engine `me` carries until its runner starts it: not
    `me` (reconcile ends what a run with this engine's own id left), and no live engine's, so
    if `me` dies before the runner writes `me`, any engine recovers it as a dead engine's."""
    return f"{me}+resuming"


async def take_over_jobs(
    store: Store, office_id: str, me: str, sessions: Mapping[str, str], reason: Callable[[str], str]
) -> list[Job]:
    """Before reconcile: the running jobs of dead engines whose session was a Claude Code
    conversation this engine resumes (`sessions`: the old session id -> the engine that ran
    it) are taken over by engine `me` instead of being recovered: they stay running, their
    open work (invocations, results) stays open, and the job runner continues each in its
    resumed conversation (or a fresh session if the resume fails). Only under the crash policy
    (one retry, `decide`) and unless an operator asked to cancel the job; those are left to
    reconcile, as any other job of a dead engine. `reason(engine_id)` words why. The jobs'
    engine becomes `taking_over(me)` (reconcile leaves them alone); the runner writes `me`.

    Each job is taken in one transaction with its `engine_died` step (`Store.take_over_job`:
    only while it still runs on the dead engine with the same attempts and no cancel asked
    for), so another host's engine recovering the same job meanwhile gets it or leaves it,
    never both; the `retry` step follows.
    """
    taken: list[Job] = []
    for job in await store.list_jobs(office_id, status="running"):
        engine_id = sessions.get(job.session_id or "")
        if engine_id is None or job.engine_id != engine_id or job.cancel_reason is not None:
            continue
        why = reason(engine_id)
        if not decide(Failure(kind="crash", attempts=max(job.attempts, 1), detail=why)).retry:
            continue
        died = JobEntry(job_id=job.id, office_id=job.office_id, step="engine_died", detail=why)
        try:
            row = await store.take_over_job(
                job.id,
                from_engine=engine_id,
                attempts=job.attempts,
                to_engine=taking_over(me),
                entry=died,
            )
        except StoreError as error:
            log.warning("job %s of dead engine %s: not taken over: %s", job.id, engine_id, error)
            continue
        if row is None:
            continue  # recovered or taken by another engine, ended, or a cancel was asked for
        log.info(
            "job %s of dead engine %s: taken over to continue its conversation", job.id, engine_id
        )
        note = f"{why}; continued on engine {me}, in its Claude Code conversation resumed"
        try:
            await store.add_job_entry(job_entry(row, "retry", detail=note))
        except StoreError as error:
            log.warning("job %s: its retry step not on the timeline: %s", job.id, error)
        taken.append(row)
    return taken
