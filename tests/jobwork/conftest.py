"""An office's real git repository (on `main`, a bare `origin`), a sqlite store with one job,
the WorktreeManager the pool uses, and the JobWorkspace under test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from semo.engine.jobwork.workspace import JobWorkspace
from semo.engine.sessions.worktrees import WorktreeManager
from semo.engine.store.models import Agent, Job, Office
from semo.engine.store.sqlite import SqliteStore
from tests.support.git_repo import git, make_repo


@dataclass
class Office_:
    store: SqliteStore
    repo: Path
    origin: Path
    office: Office
    fe: Agent
    be: Agent
    worktrees: WorktreeManager
    workspace: JobWorkspace

    async def job(self, task: str = "Build the login page", agent: Agent | None = None) -> Job:
        job = await self.store.create_job(
            Job(office_id=self.office.id, agent_id=(agent or self.fe).id, task=task)
        )
        return await self.workspace.start(job)

    async def worktree(self, role: str, task_id: str) -> Path:
        return (await self.worktrees.create(role, task_id)).path


def log(path: Path, revs: str) -> list[str]:
    """Subjects of `revs` in `path`, oldest first."""
    return git(path, "log", "--reverse", "--format=%s", revs).splitlines()


@pytest.fixture
async def office(tmp_path: Path) -> AsyncIterator[Office_]:
    async with office_at(tmp_path) as made:
        yield made


@asynccontextmanager
async def office_at(tmp_path: Path) -> AsyncIterator[Office_]:
    """The office of the `office` fixture, made under `tmp_path`."""
    repo = make_repo(tmp_path / "repo", {"README": "office repo\n", "app.py": "x = 1\n"})
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    git(repo, "remote", "add", "origin", str(origin))
    git(repo, "push", "-q", "origin", "main")
    store = SqliteStore(tmp_path / "semo.db")
    await store.open()
    try:
        row = await store.create_office(
            Office(name="o", repository=str(repo), workspace_root=str(tmp_path / "workspace"))
        )
        fe = await store.upsert_agent(Agent(office_id=row.id, name="fe", role="FE"))
        be = await store.upsert_agent(Agent(office_id=row.id, name="be", role="BE"))
        worktrees = WorktreeManager(repo, tmp_path / "workspace")
        yield Office_(store, repo, origin, row, fe, be, worktrees, JobWorkspace(store, repo))
    finally:
        await store.close()


def config_for(office: Office_, tmp_path: Path) -> str:
    path = tmp_path / "semo.toml"
    path.write_text(
        f'[office]\nname = "o"\nrepository = "{office.repo}"\n'
        f'[store]\nbackend = "sqlite"\nsqlite_path = "{office.store.path}"\n'
    )
    return str(path)
