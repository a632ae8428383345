"""JobRunner with a job branch, on a real bash in the pool's warm worktree of a real repository:
the job's work lands on semo/job/<id>, committed as the role; the next job of the role starts
clean at its base and the earlier leftovers are on a semo/saved branch; an agent's own
`git commit` works without any identity in git's config."""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from semo.engine.events import BaseEvent, EventBus, JobEvent
from semo.engine.jobwork.settings import GitSection
from semo.engine.jobwork.workspace import JobWorkspace
from semo.engine.routing.jobs import JobRunner
from semo.engine.sessions.manager import LaunchOptions, SessionManager
from semo.engine.sessions.pool import SessionPoolManager
from semo.engine.sessions.profiles import profile_named
from semo.engine.store.models import Agent, Job
from tests.jobwork.conftest import Office_
from tests.support.git_repo import git

TIMEOUT = 30.0
BASH = ["env", "PS1=$ ", "bash", "--norc", "--noprofile", "-i"]


@dataclass
class Rig:
    office: Office_
    runner: JobRunner
    pool: SessionPoolManager
    agent: Agent
    events: list[JobEvent]

    async def run(self, task: str) -> Job:
        job = await self.office.store.create_job(
            Job(office_id=self.office.office.id, agent_id=self.agent.id, task=task)
        )
        return await asyncio.wait_for(self.runner.execute_job(job.id), 3 * TIMEOUT)

    def details(self, job: Job, step: str) -> list[str]:
        return [e.detail for e in self.events if e.job_id == job.id and e.step == step]


@pytest.fixture
async def rig(office: Office_) -> AsyncIterator[Rig]:
    tmp = Path(tempfile.mkdtemp(prefix="semo-branch-"))
    home = tmp / "home"
    home.mkdir()
    strict = tmp / "gitconfig"  # git may not guess an identity: only one given counts
    strict.write_text("[user]\n\tuseConfigOnly = true\n")
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "GIT_CONFIG_GLOBAL": str(strict)}
    settings = GitSection()

    def launch(agent: Agent) -> LaunchOptions:
        profile = profile_named("generic", reads_prompts=False)
        return LaunchOptions(profile=profile, env=settings.identity(agent.role, agent.name))

    agent = await office.store.upsert_agent(
        Agent(office_id=office.office.id, name="sh", role="SH", command=BASH)
    )
    bus = EventBus()
    events: list[JobEvent] = []

    def listen(event: BaseEvent) -> None:
        if isinstance(event, JobEvent):
            events.append(event)

    bus.add_listener(listen)
    async with SessionManager(
        agent_env=env, runtime_dir=tmp / "run", launch_options=launch, worktrees=office.worktrees
    ) as manager:
        pool = SessionPoolManager(manager, {"SH": agent}, warm_roles=("SH",))
        await pool.start()
        workspace = JobWorkspace(
            office.store, office.repo, settings=settings, worktrees=office.worktrees
        )
        runner = JobRunner(
            office.store,
            pool,
            office_id=office.office.id,
            agents_by_id={agent.id: agent},
            bus=bus,
            job_timeout=TIMEOUT,
            workspace=workspace,
        )
        try:
            yield Rig(office, runner, pool, agent, events)
        finally:
            await runner.close()
            await pool.close()


async def test_a_jobs_work_lands_on_its_branch_and_the_next_job_starts_clean(rig: Rig) -> None:
    repo = rig.office.repo
    first = await rig.run("echo one > one.txt; echo '[SEMO:DONE]' ok")
    assert first.status == "done", first.failure_reason
    assert first.branch == f"semo/job/{first.id}" and first.base_branch == "main"
    assert git(repo, "show", f"{first.branch}:one.txt") == "one\n"
    author = git(repo, "log", "-1", "--format=%an <%ae>", first.branch).strip()
    assert author == "semo SH <sh@agents.semo.invalid>"
    [worktree_step] = rig.details(first, "worktree")
    assert f"SH works on semo/SH/job-{first.id}" in worktree_step
    [combined] = rig.details(first, "combined")
    assert "1 commit(s)" in combined and "1 file changed" in combined
    assert [s.step for s in await rig.office.store.list_job_entries(first.id)][-1] == "done"
    # something writes into the warm worktree after the job (an agent that goes on)
    warm = Path(first.work["roles"]["SH"]["worktree"]) if first.work else None
    assert warm is not None
    (warm / "leftover.txt").write_text("written after job 1\n")
    second = await rig.run("ls > seen.txt; echo '[SEMO:DONE]' ok")
    assert second.status == "done", second.failure_reason
    seen = git(repo, "show", f"{second.branch}:seen.txt").split()
    assert "leftover.txt" not in seen and "one.txt" not in seen and "app.py" in seen
    [saved_note] = [d for d in rig.details(second, "worktree") if "saved as" in d]
    saved = saved_note.rsplit("saved as ", 1)[1]
    assert saved.startswith("semo/saved/SH/")
    assert git(repo, "show", f"{saved}:leftover.txt") == "written after job 1\n"


async def test_an_agent_commits_with_its_own_identity(rig: Rig) -> None:
    job = await rig.run(
        "echo api > api.txt && git add api.txt && git commit -qm 'SH: the api' "
        "&& echo '[SEMO:DONE]' committed"
    )
    assert job.status == "done", job.failure_reason
    repo = rig.office.repo
    assert (
        git(repo, "log", "-1", "--format=%s|%an", f"semo/SH/job-{job.id}")
        == "SH: the api|semo SH\n"
    )
    assert git(repo, "show", f"{job.branch}:api.txt") == "api\n"
    assert rig.details(job, "committed") == []  # nothing was left to commit for it


async def test_a_failed_jobs_work_is_on_its_branch_too(rig: Rig) -> None:
    job = await rig.run("echo partial > partial.txt; echo 'fatal: the build broke'")
    assert job.status == "failed" and "fatal: the build broke" in (job.failure_reason or "")
    assert git(rig.office.repo, "show", f"{job.branch}:partial.txt") == "partial\n"
    [combined] = rig.details(job, "combined")
    assert "1 commit(s)" in combined
