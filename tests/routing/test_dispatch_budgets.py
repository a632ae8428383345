"""run_job commands have a slot budget of their own (`CommandDispatcher.max_jobs`), on sqlite and
postgres.

Jobs run long and wait for a free session of the pool; before, waiting run_job commands held
every dispatcher slot, and the terminate queued behind them (which would free the session they
waited for) was never claimed until they timed out. On the dispatcher with a real bash session,
the job runner stands for the engine's JobRunner waiting on a full pool (it returns once the
test says the pool has room): with both job slots taken by waiting jobs, a terminate inserted
after a third run_job is claimed and run at once, while that third job stays pending in its
place; once capacity is freed, every job runs, each once. On a real Engine: eight jobs wait for
a pool of one session held by an operator; the operator's terminate runs, and the jobs finish.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from semo.engine.config import (
    AgentConfig,
    EngineConfig,
    OfficeConfig,
    PoolConfig,
    SemoConfig,
    parse_config,
)
from semo.engine.engine import Engine
from semo.engine.office.job_ops import create_job
from semo.engine.store.base import Store
from semo.engine.store.models import AgentCommandResult, Job, RunJobPayload
from tests.store.conftest import Stores
from tests.support.dispatch_rig import TIMEOUT, Rig
from tests.support.waiting import eventually, eventually_value


async def test_terminate_is_never_queued_behind_waiting_jobs(rig: Rig) -> None:
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


async def test_jobs_do_not_take_the_slots_of_other_commands(rig: Rig) -> None:
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


async def test_a_real_engine_terminates_behind_eight_jobs_waiting_for_its_pool(
    stores: Stores,
    tmp_path: Path,
) -> None:
    """A real engine, pool of one bash session held by an operator's create_session: eight jobs
    (the default max_concurrent) wait for the pool, then the operator's terminate frees it. The
    terminate runs at once (before: the jobs held all eight slots for the pool's 30 s wait and
    failed, the terminate ran after them); then the jobs run, one after another, and finish."""
    store = await stores.new()
    bash = ["bash", "--norc", "--noprofile", "-i"]
    config = SemoConfig(
        office=OfficeConfig(name="o", repository=tmp_path, workspace_root=tmp_path / "ws"),
        engine=EngineConfig(id="me"),
        pool=PoolConfig(warm_roles=[], max_sessions=1),
        agents=[AgentConfig(role="SH", profile="generic", command=bash)],
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
        assert engine.office is not None
        office_id = engine.office.id
        held = await store.insert_command(office_id, "create_session", {"role": "SH"})
        created = await _result(store, held.id)
        assert created.success and created.result is not None, created.error
        session_id = created.result["session_id"]
        jobs = [
            (await create_job(store, office_id, role="SH", task=f"echo '[SEMO:DONE]' job-{n}"))[0]
            for n in range(8)
        ]
        # every job's run_job is claimed and waits for the pool before the terminate is inserted
        await eventually(lambda: _waiting(engine) == 8, TIMEOUT)
        terminate = await store.insert_command(office_id, "terminate", {}, session_id=session_id)
        ended = await _result(store, terminate.id)  # within TIMEOUT, far below the pool's wait
        assert ended.success, ended.error
        for job in jobs:
            done = await eventually_value(_ended(store, job.id), f"job {job.id}", 60)
            assert (done.status, done.attempts) == ("done", 1), done.failure_reason
    finally:
        await engine.stop("test over")


def _waiting(engine: Engine) -> int:
    dispatcher = engine.dispatcher
    return 0 if dispatcher is None else dispatcher.in_flight


def _ended(store: Store, job_id: str) -> Callable[[], Awaitable[Job | None]]:
    async def probe() -> Job | None:
        job = await store.get_job(job_id)
        return job if job.status in ("done", "failed") else None

    return probe


async def _result(store: Store, command_id: str) -> AgentCommandResult:
    async def probe() -> AgentCommandResult | None:
        return await store.get_result(command_id)

    return await eventually_value(probe, f"the result of command {command_id}", TIMEOUT)


async def test_the_engine_gives_its_dispatcher_the_configured_max_jobs(tmp_path: Path) -> None:
    """`[engine] max_jobs` of semo.toml reaches the engine's dispatcher (real engine, bash
    agents, no warm sessions)."""
    text = """
[office]
name = "budgets"

[store]
backend = "sqlite"
sqlite_path = "semo.db"

[engine]
max_jobs = 3

[pool]
warm_roles = []

[[agents]]
role = "A"
profile = "generic"
command = ["bash", "--norc", "--noprofile", "-i"]
"""
    config = parse_config(text, tmp_path / "semo.toml")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    engine = Engine(config, agent_env=env, folder_for=lambda _a, _t: tmp_path)
    await engine.start()
    try:
        assert engine.dispatcher is not None and engine.dispatcher.max_jobs == 3
    finally:
        await engine.stop("test over")
