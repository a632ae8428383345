"""A shipped job's world: a real repository on `main` with a local bare `origin`, the job's
branch with FE's commit, a sqlite store holding the job (done, with BE's result)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from semo.engine.ship.ship import ShipTarget, target_of
from semo.engine.store.base import Store
from semo.engine.store.models import Agent, AgentResult, Job, JobEntry, Office
from semo.engine.store.sqlite import SqliteStore
from tests.support.git_repo import AUTHOR, git, make_repo


@dataclass
class World:
    store: Store
    repo: Path
    origin: Path
    job: Job
    target: ShipTarget

    def commit(self, branch: str, name: str, text: str, message: str) -> str:
        """A commit of `name` on `branch` (checked out in a throwaway worktree)."""
        where = self.repo.parent / f"wt-{branch.replace('/', '-')}"
        if not where.exists():
            git(self.repo, "worktree", "add", "-q", str(where), branch)
        (where / name).write_text(text)
        git(where, "add", name)
        git(where, *AUTHOR, "commit", "-q", "-m", message)
        return git(where, "rev-parse", "HEAD").strip()


async def make_world(tmp_path: Path, *, summary: str = "GET /health added") -> World:
    repo = make_repo(tmp_path / "repo", {"README": "office repo\n", "app.py": "x = 1\n"})
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    git(repo, "remote", "add", "origin", str(origin))
    git(repo, "push", "-q", "origin", "main")
    store = SqliteStore(tmp_path / "semo.db")
    await store.open()
    office = await store.create_office(Office(name="ship", repository=str(repo)))
    fe = await store.upsert_agent(Agent(office_id=office.id, name="fe", role="FE"))
    be = await store.upsert_agent(Agent(office_id=office.id, name="be", role="BE"))
    job = await store.create_job(
        Job(office_id=office.id, agent_id=fe.id, task="Build the login page", status="done")
    )
    branch = f"semo/job/{job.id}"
    git(repo, "branch", branch, "main")
    job = await store.update_job(
        job.id,
        branch=branch,
        base_branch="main",
        base_commit=git(repo, "rev-parse", "main").strip(),
    )
    await store.add_job_entry(
        JobEntry(job_id=job.id, office_id=office.id, step="done", detail="login page built")
    )
    result = await store.create_result(
        AgentResult(
            office_id=office.id,
            sender_agent_id=be.id,
            recipient_agent_id=fe.id,
            summary=summary,
            job_id=job.id,
        )
    )
    assert result.job_id == job.id
    world = World(store, repo, origin, job, await target_of(store, job.id))
    world.commit(branch, "login.html", "<form>login</form>\n", "FE: the login page")
    return world


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    made = await make_world(tmp_path)
    try:
        yield made
    finally:
        await made.store.close()
