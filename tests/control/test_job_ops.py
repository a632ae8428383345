"""The job operations of the control socket (`jobs`, `job`, `create_job`, `cancel_job`) on a real
engine (bash agents in PTYs), through a real `EngineClient`, as the console's jobs view uses them.

- `create_job` makes a pending job for the role's agent; the engine runs it (bash never ends it).
- `jobs` lists it with its role; `job` gives its timeline, starting with `created`.
- `cancel_job` ends it: the job fails with the reason, and the timeline says so.
- Bad requests get the engine's clear message and change nothing: an unknown role (the message
  names the known roles), an empty task, an unknown job id, cancelling a job twice.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from semo.engine.engine import Engine
from semo.engine.store.models import Job
from tests.control.office import engine_in_process
from tests.support.control_engine import client_of
from tests.support.waiting import eventually_value

pytestmark = pytest.mark.timeout(120)


async def test_a_console_creates_follows_and_cancels_a_job(engine: Engine) -> None:
    client = client_of(engine)
    await client.start()
    try:
        job = await client.create_job("A", "echo job-task\nsecond line")
        assert job.status == "pending"
        listed = await client.list_jobs()
        assert [(j.id, j.role) for j in listed] == [(job.id, "A")]
        timeline = await client.job_timeline(job.id)
        assert timeline.job.task == "echo job-task\nsecond line"
        assert timeline.entries[0].step == "created"

        async def in_state(status: str) -> Job | None:
            found = (await client.job_timeline(job.id)).job
            return found if found.status == status else None

        await eventually_value(lambda: in_state("running"), "the job running", 30)
        cancelled = await client.cancel_job(job.id, "not needed")
        assert cancelled.cancel_reason == "not needed"

        await eventually_value(lambda: in_state("failed"), "the job failed", 30)
        timeline = await client.job_timeline(job.id)
        steps = [entry.step for entry in timeline.entries]
        assert "cancel_requested" in steps and steps[-1] == "failed"
        assert "not needed" in (timeline.job.failure_reason or "")
        assert [j.id for j in await client.list_jobs(include_ended=False)] == []
        assert [j.id for j in await client.list_jobs()] == [job.id]
    finally:
        await client.close()


async def test_bad_job_requests_are_refused_with_a_clear_message(engine: Engine) -> None:
    client = client_of(engine)
    await client.start()
    try:
        with pytest.raises(RuntimeError, match=r"no agent with role 'Z'.*roles: A, B"):
            await client.create_job("Z", "anything")
        with pytest.raises(RuntimeError, match="empty"):
            await client.create_job("A", "   ")
        with pytest.raises(RuntimeError, match="no job"):
            await client.job_timeline("no-such-job")
        with pytest.raises(RuntimeError, match="cancel_job needs a job id"):
            await client.request({"op": "cancel_job"})
        assert await client.list_jobs() == []  # nothing was created
    finally:
        await client.close()


async def test_an_attached_console_shows_a_job_and_follows_it(engine: Engine) -> None:
    """Over the socket: F5 lists the job an engine-side caller created, with its timeline, and
    the view follows the job's cancellation from the job events the client receives."""
    from semo.console.app import SemoApp
    from semo.console.screens.jobs import JobsScreen
    from semo.console.widgets.terminal_pane import TerminalPane
    from tests.support.waiting import eventually

    client = client_of(engine)
    app = SemoApp(client)
    async with app.run_test(size=(120, 40)) as pilot:
        await eventually(lambda: len(app.screen.query(TerminalPane)) == 2, 20)
        job = await engine.create_job("B", "say hello")
        await pilot.press("f5")
        await eventually(lambda: isinstance(app.screen, JobsScreen), 20)
        jobs = app.screen
        assert isinstance(jobs, JobsScreen)
        await eventually(lambda: f"job {job.id[:8]}" in jobs.timeline_text, 20)
        assert "task: say hello" in jobs.timeline_text
        await engine.cancel_job(job.id, "from elsewhere")
        await eventually(lambda: "from elsewhere" in jobs.timeline_text, 20)
        await pilot.press("escape")


async def test_a_stopping_engine_writes_its_jobs_timeline_and_leaves_no_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rows a job's end queues while the engine stops are written before the store closes:
    no timeline writer is left pending (it was, every time: 'Task was destroyed but it is
    pending' at the loop's end)."""
    async with engine_in_process(tmp_path, monkeypatch, PS1="$ ") as engine_:
        client = client_of(engine_)
        await client.start()
        try:
            job = await client.create_job("A", "echo stays-running")

            async def running() -> Job | None:
                found = (await client.job_timeline(job.id)).job
                return found if found.status == "running" else None

            await eventually_value(running, "the job running", 30)
        finally:
            await client.close()
    assert not [t for t in asyncio.all_tasks() if t.get_name() == "job timeline" and not t.done()]
