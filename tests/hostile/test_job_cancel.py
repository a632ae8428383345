"""A cancelled job does nothing more (issue 21 #3): the cancel wins over every later step.

Cancelled while it waited for a session, while its agent was starting (not at its prompt
yet), or while its first attempt ran and a retry was coming, a job's task was typed anyway and
the job could end `done`. Real PTYs with the scripted agent (tests/support/script_agent.py),
on the sqlite and postgres stores (the JobRunner job_rig of tests/routing/test_jobs.py). With a
long `cancel_poll` only the fresh read of the row right before typing can win: that is the
point of those cases.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.support.job_rig import TIMEOUT, JobRig, Setup
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(180)

REASON = "wrong repository"
NEVER = "[SEMO:DONE] the cancelled task ran"


async def _cancelled(setup: Setup, running: asyncio.Task[object]) -> None:
    """The job ended failed with the operator's reason; nothing was typed into any agent."""
    job = await asyncio.wait_for(running, TIMEOUT)
    row = await setup.job_rig.store.get_job(job.id)  # type: ignore[attr-defined]
    assert (row.status, row.failure_reason) == ("failed", f"cancelled: {REASON}")
    assert setup.prompts() == []
    assert "cancelling" in setup.steps(row)


async def test_cancel_while_waiting_for_a_session(job_rig: JobRig) -> None:
    setup = await job_rig.runner([NEVER], max_sessions=1, cancel_poll=0.1, acquire_wait=120)
    held = await setup.pool.acquire(agent_id=setup.agent.id, wait=TIMEOUT)  # the only one
    job = await setup.job()
    running = asyncio.create_task(setup.runner.execute_job(job.id))
    await eventually(lambda: setup.pool.status().waiting == 1, TIMEOUT)
    await job_rig.store.request_job_cancel(job.id, REASON)
    try:
        await _cancelled(setup, running)  # while the session is still held: no waiting on
    finally:
        setup.pool.release(held.session_id)
    await setup.released()
    # the session it waited for is free now: still nothing is typed
    session = held.session
    await session.deliver("ping", timeout=TIMEOUT)
    await eventually(lambda: setup.prompts() == ["ping"], TIMEOUT)  # ping alone, no task


@pytest.mark.parametrize("cancel_poll", [0.1, 60.0])
async def test_cancel_while_the_agent_is_starting(job_rig: JobRig, cancel_poll: float) -> None:
    go = job_rig.tmp / f"go-{cancel_poll}"
    setup = await job_rig.runner([NEVER], hold=go, cancel_poll=cancel_poll)
    job = await setup.job()
    running = asyncio.create_task(setup.runner.execute_job(job.id))
    await eventually(lambda: "started" in setup.steps(job), TIMEOUT)
    await eventually(lambda: setup.pool.status().starting == 1, TIMEOUT)  # its session
    await job_rig.store.request_job_cancel(job.id, REASON)
    go.touch()  # the agent reaches its prompt only now
    await _cancelled(setup, running)
    # its session reaches the pool, idle (a start the cancel cut short is released into it)
    await eventually(lambda: len(setup.pool.status().sessions) == 1, TIMEOUT)
    await setup.released()
    # the agent is at its prompt and nothing is queued for it
    [session_id] = setup.pool.status().sessions
    session = job_rig.manager.get(session_id)
    await session.deliver("ping", timeout=TIMEOUT)
    await eventually(lambda: setup.prompts() == ["ping"], TIMEOUT)  # ping alone, no task


async def test_cancel_before_the_retry(job_rig: JobRig) -> None:
    """The first attempt is busy when the cancel comes and times out; its retry (a new
    session: Ctrl+C ends this agent) is never typed, and the job does not end done."""
    setup = await job_rig.runner(
        [{"match": "Retry", "text": NEVER}, {"text": "a very slow reply", "delay": 60}],
        job_timeout=1.5,
        cancel_poll=60.0,
    )
    job = await setup.job()
    running = asyncio.create_task(setup.runner.execute_job(job.id))
    await eventually(lambda: "delivered" in setup.steps(job), TIMEOUT)
    await job_rig.store.request_job_cancel(job.id, REASON)
    done = await asyncio.wait_for(running, TIMEOUT)
    assert (done.status, done.failure_reason) == ("failed", f"cancelled: {REASON}")
    [first] = setup.prompts()
    assert "Retry" not in first
    await setup.released()
