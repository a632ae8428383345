"""A job taken over from a dead engine (`JobRunner.continue_job`), on real PTYs with the
scripted agent, on the sqlite and postgres stores.

- Its resumed session is leased first (`SessionPoolManager.acquire(prefer=...)`) and told to
  continue: the prompt says semo restarted and names the job, and is not the task again; the
  job is done in that session, its attempt count going on.
- When the resumed session is gone (the resume failed), a new session gets the whole task with
  a retry note that says the conversation could not be resumed and the other agents' work goes
  on.
- A preferred session that is leased to someone else is not taken.
- (A generic agent's turn reader after a reflow: no line judged twice.)
"""

from __future__ import annotations

import asyncio

from semo.engine.routing.jobs import _ScreenTurns
from semo.engine.store.models import Job
from semo.engine.terminal.screen import TerminalScreen
from semo.engine.terminal.stream import TerminalStream
from tests.support.job_rig import TIMEOUT, JobRig


async def _taken_over(job_rig: JobRig, agent_id: str, task: str) -> Job:
    job = Job(office_id=job_rig.office.id, agent_id=agent_id, task=task)
    job = await job_rig.store.create_job(job)
    return await job_rig.store.update_job(
        job.id, status="running", engine_id="dead+resuming", attempts=1, session_id="old-session"
    )


async def test_a_continued_job_goes_on_in_its_resumed_session(job_rig: JobRig) -> None:
    setup = await job_rig.runner(
        [{"match": "You were working on job", "text": "[SEMO:DONE] went on where I was"}]
    )
    lease = await setup.pool.acquire(agent_id=setup.agent.id)
    setup.pool.release(lease.session_id)  # the resumed session, idle in the pool
    job = await _taken_over(job_rig, setup.agent.id, "Add a GET /health endpoint")
    task, queued = setup.runner.continue_job(
        job, resumed=lease.session_id, note="Your question was asked again."
    )
    await asyncio.wait_for(queued.wait(), TIMEOUT)
    assert lease.session.queued == 1 or setup.prompts()  # its prompt is in the queue
    done = await asyncio.wait_for(task, 3 * TIMEOUT)
    assert (done.status, done.attempts, done.session_id) == ("done", 2, lease.session_id)
    assert done.engine_id == job_rig.manager.engine_id  # no longer the take-over's mark
    [prompt] = setup.prompts()
    assert "semo was restarted" in prompt and f"You were working on job {job.id}" in prompt
    assert "Add a GET /health endpoint" in prompt and "Your question was asked again." in prompt
    assert "You are be, the BE agent" not in prompt  # not the task prompt again
    assert setup.steps(job) == ["started", "session", "delivered", "done"]
    session_step = next(e for e in job_rig.events if e.job_id == job.id and e.step == "session")
    assert "resumed Claude Code conversation" in session_step.detail
    await setup.released()


async def test_a_continued_job_whose_conversation_is_gone_gets_a_new_session(
    job_rig: JobRig,
) -> None:
    setup = await job_rig.runner(
        [{"match": "Retry (attempt 2)", "text": "[SEMO:DONE] from scratch"}]
    )
    lease = await setup.pool.acquire(agent_id=setup.agent.id)
    await setup.pool.manager.terminate(lease.session_id, reason="the resume failed")
    job = await _taken_over(job_rig, setup.agent.id, "Add a GET /health endpoint")
    task, queued = setup.runner.continue_job(job, resumed=lease.session_id)
    done = await asyncio.wait_for(task, 3 * TIMEOUT)
    assert queued.is_set()
    assert (done.status, done.attempts) == ("done", 2)
    assert done.session_id not in (None, lease.session_id)
    [prompt] = setup.prompts()
    assert prompt.startswith("Add a GET /health endpoint")
    assert "could not be resumed" in prompt and "goes on" in prompt
    assert "You were working on job" not in prompt


async def test_a_preferred_session_leased_to_someone_else_is_not_taken(job_rig: JobRig) -> None:
    setup = await job_rig.runner([])
    held = await setup.pool.acquire(agent_id=setup.agent.id)
    other = await setup.pool.acquire(agent_id=setup.agent.id, prefer=held.session_id)
    assert other.session_id != held.session_id
    setup.pool.release(other.session_id)
    setup.pool.release(held.session_id)
    again = await setup.pool.acquire(agent_id=setup.agent.id, prefer=held.session_id)
    assert again.session_id == held.session_id  # free now: preferred over the other idle one
    setup.pool.release(again.session_id)


def test_a_generic_turn_reader_reads_no_line_twice_after_a_reflow() -> None:
    """A resize re-wraps a generic agent's screen and history (as tmux does): the rows the
    turn reader remembered name other lines then. It goes on from the cursor: lines already
    judged are not judged again (before: "fatal: first" came back as a new error after a
    narrowing), the lines of that turn are not judged, and later turns are read as before."""
    screen = TerminalScreen(30, 6)
    stream = TerminalStream(screen)
    stream.feed("".join(f"line {i} of earlier output\r\n" for i in range(8)))
    turns = _ScreenTurns(screen)
    stream.feed("fatal: first\r\n")
    assert [s.text for s in turns.read(0.0)] == ["fatal: first"]
    screen.resize(6, 12)  # narrower: every line re-wrapped
    stream.feed("ENOENT: during the resized turn\r\n")
    assert turns.read(1.0) == []
    stream.feed("Permission denied: later\r\n")
    assert [s.text for s in turns.read(2.0)] == ["Permission denied: later"]
