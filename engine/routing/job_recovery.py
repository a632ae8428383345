"""What becomes of the jobs a dead engine was running (called by engine.reconcile).

    jobs = await running_jobs_of(store, office_id, engine_id)   # before Store.end_engine
    ended = await store.end_engine(..., job_reason=reason)      # fails them
    await recover_jobs(store, jobs, engine_id, reason)          # after, if the engine was dead

For each job the dead engine was running and `end_engine` failed:

- its open work is cancelled with the reason (`Store.cancel_job_work`): invocations and results
  it caused are never sent again, so no agent of a later engine works for a job that is over or
  starts again;
- under the crash policy (`engine.routing.policy.decide`, kind ``crash``: one retry while
  ``attempts`` is below ``MAX_ATTEMPTS``), and unless an operator asked to cancel it, it goes
  back to pending with a new ``run_job`` command (`Store.retry_job`, at most once for this
  failure even when several engines find the dead one at the same time); the engine whose
  dispatcher claims the command runs it from a new session, continuing the attempt count;
- both steps are on the job's timeline (``engine_died``, then ``retry`` or ``failed``).
"""

from __future__ import annotations

import logging

from engine.routing.policy import Failure, decide
from engine.store.base import Store, StoreError
from engine.store.models import Job, JobEntry

log = logging.getLogger("semo.jobs")


async def running_jobs_of(store: Store, office_id: str, engine_id: str) -> list[Job]:
    """The office's running jobs recorded as run by `engine_id`."""
    return [
        job
        for job in await store.list_jobs(office_id, status="running")
        if job.engine_id == engine_id
    ]


async def recover_jobs(store: Store, jobs: list[Job], engine_id: str, reason: str) -> int:
    """Cancel the open work of `jobs` (run by dead engine `engine_id`, failed with `reason`)
    and retry those the crash policy allows; how many were retried."""
    retried = 0
    for job in jobs:
        try:
            retried += await _recover(store, job, engine_id, reason)
        except StoreError as error:
            log.warning("job %s of dead engine %s: recovery failed: %s", job.id, engine_id, error)
    return retried


async def _recover(store: Store, job: Job, engine_id: str, reason: str) -> int:
    current = await store.get_job(job.id)
    if current.status != "failed" or current.failure_reason != reason:
        return 0  # ended otherwise, or another engine recovered it already
    await store.cancel_job_work(job.id, reason)
    await _entry(store, current, "engine_died", reason)
    if current.cancel_reason is not None:
        return 0
    decision = decide(Failure(kind="crash", attempts=max(current.attempts, 1), detail=reason))
    if not decision.retry:
        why = f"{reason} (attempt {current.attempts}, no retry left)"
        await _entry(store, current, "failed", why)
        return 0
    note = f"{reason}; retrying once on a live engine"
    command = await store.retry_job(
        job.id,
        engine_id=engine_id,
        attempts=current.attempts,
        failed_reason=reason,
        reason=note,
    )
    if command is None:
        return 0
    log.info("job %s of dead engine %s: retried (command %s)", job.id, engine_id, command.id)
    await _entry(store, current.model_copy(update={"status": "pending"}), "retry", note)
    return 1


async def _entry(store: Store, job: Job, step: str, detail: str) -> None:
    await store.add_job_entry(
        JobEntry(
            job_id=job.id,
            office_id=job.office_id,
            step=step,
            status=job.status,
            attempts=job.attempts,
            session_id=job.session_id,
            agent_id=job.agent_id,
            detail=detail,
        )
    )
