"""run_job commands have a slot budget of their own (`CommandDispatcher.max_jobs`), on sqlite and
postgres with a real bash session.

Jobs run long and wait for a free session of the pool; before, waiting run_job commands held
every dispatcher slot, and the terminate queued behind them (which would free the session they
waited for) was never claimed until they timed out. Here the job runner stands for the engine's
JobRunner waiting on a full pool: it returns only once the pool has room (an event the test
sets after the terminate). Checked: with both job slots taken by waiting jobs, a terminate
inserted after a third run_job is claimed and run at once, while that third job stays pending in
its place; once capacity is freed, every job runs, each once.
"""

from __future__ import annotations

import asyncio
from typing import Any

from engine.store.models import RunJobPayload
from tests.routing.test_dispatcher import Rig, rig, stores  # noqa: F401 (fixtures)


async def test_terminate_is_never_queued_behind_waiting_jobs(rig: Rig) -> None:  # noqa: F811
    room = asyncio.Event()  # the pool has a free session
    started: list[str] = []

    async def run_job(payload: RunJobPayload) -> dict[str, Any]:
        started.append(payload.job_id)
        await room.wait()
        return {"job_id": payload.job_id, "status": "done"}

    dispatcher = rig.dispatcher(run_job=run_job, max_concurrent=2, max_jobs=2)
    dispatcher.start()
    created = await rig.run("create_session", {"role": "SH"})
    assert created.success and created.result is not None
    session_id = created.result["session_id"]

    jobs = [await rig.insert("run_job", {"job_id": f"job-{n}"}) for n in range(3)]
    terminate = await rig.insert("terminate", {}, session_id)
    ended = await rig.result(terminate)  # not behind the jobs that wait for room
    assert ended.success and ended.result == {"terminated": True}
    assert session_id not in rig.manager.sessions
    # two jobs wait in their slots; the third was skipped, not claimed: it keeps its place
    assert sorted(started) == ["job-0", "job-1"]
    assert (await rig.store.get_command(jobs[2])).status == "pending"

    room.set()
    results = [await rig.result(job) for job in jobs]
    assert [r.success for r in results] == [True, True, True]
    assert sorted(started) == ["job-0", "job-1", "job-2"]  # each once


async def test_jobs_do_not_take_the_slots_of_other_commands(rig: Rig) -> None:  # noqa: F811
    room = asyncio.Event()

    async def run_job(payload: RunJobPayload) -> dict[str, Any]:
        await room.wait()
        return {"job_id": payload.job_id}

    dispatcher = rig.dispatcher(run_job=run_job, max_concurrent=1, max_jobs=1)
    dispatcher.start()
    job = await rig.insert("run_job", {"job_id": "job-0"})
    created = await rig.run("create_session", {"role": "SH"})  # its own slot, not the job's
    assert created.success and created.result is not None
    output = await rig.run("get_output", {}, created.result["session_id"])
    assert output.success
    assert (await rig.store.get_command(job)).status == "processing"
    room.set()
    assert (await rig.result(job)).success
