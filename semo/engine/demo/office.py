"""The demo office: FE, BE and QA played by the bundled scripted demo agent, on the embedded store.

No network, no Claude Code: the office's repository is a small git repository semo makes under
the user's state directory (`demo-workspace/repo`, on `main`), each agent works in its worktree
there, and the store is whatever the environment selects (SQLite by default). The agents change
a file each, so the demo job ends with a branch and a diff to review (F5, then d).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from semo.engine.config import AgentConfig, EngineConfig, OfficeConfig, PoolConfig, SemoConfig
from semo.engine.gitsafe import git_argv, git_environment
from semo.engine.pycommand import python_module
from semo.engine.store.models import Job

if TYPE_CHECKING:
    from semo.engine.engine import Engine

DEMO_OFFICE = "demo"
ROLES = ("FE", "BE", "QA")
PERSONAS = {
    "FE": "Demo front-end agent: builds pages, asks the operator, invokes BE and QA.",
    "BE": "Demo back-end agent: adds API endpoints when invoked.",
    "QA": "Demo QA agent: runs the tests when invoked.",
}
DEMO_TASK = "build the login page"


async def new_demo_job(engine: Engine) -> Job | None:
    """FE's demo job, created unless one is still open: a demo engine started again after a
    SIGKILL has its recovery retry that one (a second job asked every question twice)."""
    fe = engine.agents.get("FE")
    if fe is None or engine.jobs is None:
        return None
    jobs = await engine.store.list_jobs(engine.office_id)
    if any(job.task == DEMO_TASK and job.status in ("pending", "running") for job in jobs):
        return None
    return await engine.store.create_job(
        Job(office_id=engine.office_id, agent_id=fe.id, task=DEMO_TASK)
    )


def demo_workspace() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(Path.home(), ".local", "state")
    return Path(base) / "semo" / "demo-workspace"


#: the demo agents' names (shown beside their roles: "FE #1 frontend")
DEMO_NAMES = {"FE": "frontend", "BE": "backend", "QA": "tester"}


def demo_config(*, steps: int = 2, delay: float = 0.3) -> SemoConfig:
    agents = [
        AgentConfig(
            role=role,
            name=DEMO_NAMES[role],
            profile="generic",
            command=python_module(
                "semo.engine.demo.agent",
                "--role",
                role,
                "--steps",
                str(steps),
                "--delay",
                str(delay),
            ),
            prompt=PERSONAS[role],
            reads_prompts=True,  # scripted stand-ins for models: semo's feedback goes to them
            cols=100,
            rows=24,
        )
        for role in ROLES
    ]
    return SemoConfig(
        office=OfficeConfig(
            name=DEMO_OFFICE, repository=demo_repository(), workspace_root=demo_workspace()
        ),
        engine=EngineConfig(command_timeout=30, shutdown_grace=2),
        pool=PoolConfig(max_sessions=6, warm_roles=list(ROLES)),
        agents=agents,
    )


def demo_repository() -> Path:
    """The demo office's git repository (made by `prepare_demo_repository`)."""
    return demo_workspace() / "repo"


#: The demo repository's first commit.
DEMO_FILES = {
    "README.md": "# demo shop\n\nThe repository of semo's demo office.\n",
    "web/index.html": "<h1>demo shop</h1>\n",
    "api/__init__.py": "",
}


def prepare_demo_repository() -> Path:
    """Make the demo's repository (one commit on `main`) unless it is there already."""
    repo = demo_repository()
    if (repo / ".git").exists():
        return repo
    repo.mkdir(parents=True, exist_ok=True)
    for name, text in DEMO_FILES.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    identity = {
        "GIT_AUTHOR_NAME": "semo demo",
        "GIT_AUTHOR_EMAIL": "demo@semo.invalid",
        "GIT_COMMITTER_NAME": "semo demo",
        "GIT_COMMITTER_EMAIL": "demo@semo.invalid",
    }
    for args in (("init", "-q", "-b", "main"), ("add", "-A"), ("commit", "-q", "-m", "demo shop")):
        subprocess.run(
            git_argv("git", repo, *args),
            env=git_environment(**identity),
            check=True,
            capture_output=True,
        )
    return repo
