"""The JobRunner job_rig of the job tests: a store, an office, a session manager, a bus, and
per test a scripted BE agent with its own pool and runner (`JobRig.runner`).

The `job_rig` fixture that builds it is in tests/conftest.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from semo.engine.events import EventBus
from semo.engine.routing.jobs import JobEvent, JobRunner
from semo.engine.sessions.breaker import CircuitBreaker
from semo.engine.sessions.manager import LaunchOptions, SessionManager
from semo.engine.sessions.pool import SessionPoolManager
from semo.engine.sessions.profiles import profile_named
from semo.engine.store.base import Store
from semo.engine.store.models import Agent, Job, Office
from tests.support.script_agent import logged_prompts
from tests.support.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 20.0


def agent_env() -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "PYTHONPATH": str(ROOT),  # the child runs `-m tests.support.script_agent` in its folder
    }


def launch_options(agent: Agent) -> LaunchOptions:
    """The job_rig's BE script agent stands in for a model (it reads prompts: semo's reminder and
    retry notes are typed into it); any other role is a plain program that does not."""
    return LaunchOptions(profile=profile_named("generic", reads_prompts=agent.role == "BE"))


@dataclass
class JobRig:
    store: Store
    office: Office
    manager: SessionManager
    bus: EventBus
    tmp: Path
    events: list[JobEvent] = field(default_factory=list)
    pools: list[SessionPoolManager] = field(default_factory=list)

    async def runner(
        self,
        replies: list[Any],
        *,
        breaker: CircuitBreaker | None = None,
        role: str = "BE",
        command: list[str] | None = None,
        max_sessions: int = 6,
        hold: Path | None = None,
        **options: Any,
    ) -> Setup:
        """A BE agent running `replies` (or `command`), its pool (no warm sessions, at most
        `max_sessions`) and a JobRunner. `hold`: each agent starts only once that file exists
        (until then its session is starting, not at its prompt)."""
        script = self.tmp / f"script-{len(self.pools)}.json"
        script.write_text(json.dumps(replies))
        log = self.tmp / f"prompts-{len(self.pools)}.jsonl"
        folder = self.tmp / f"work-{len(self.pools)}"
        folder.mkdir()
        command = command or [
            sys.executable,
            "-m",
            "tests.support.script_agent",
            "--script",
            str(script),
            "--log",
            str(log),
        ]
        if hold is not None:
            wait = f'while [ ! -e "{hold}" ]; do sleep 0.05; done; exec "$@"'
            command = ["sh", "-c", wait, "sh", *command]
        agent = await self.store.upsert_agent(
            Agent(office_id=self.office.id, name=role.lower(), role=role, command=command)
        )
        pool = SessionPoolManager(
            self.manager,
            {role: agent},
            warm_roles=(),
            max_sessions=max_sessions,
            breaker=breaker,
            folder_for=lambda _agent, _task: folder,
        )
        self.pools.append(pool)
        await pool.start()
        options.setdefault("job_timeout", TIMEOUT)
        options.setdefault("cancel_grace", 5.0)
        runner = JobRunner(
            self.store,
            pool,
            office_id=self.office.id,
            agents_by_id={agent.id: agent},
            bus=self.bus,
            **options,
        )
        return Setup(self, runner, pool, agent, log)


@dataclass
class Setup:
    job_rig: JobRig
    runner: JobRunner
    pool: SessionPoolManager
    agent: Agent
    log: Path

    async def job(self, task: str = "Add a GET /health endpoint", **fields: Any) -> Job:
        job = Job(office_id=self.job_rig.office.id, agent_id=self.agent.id, task=task, **fields)
        return await self.job_rig.store.create_job(job)

    async def run(self, task: str = "Add a GET /health endpoint", **fields: Any) -> Job:
        job = await self.job(task, **fields)
        return await asyncio.wait_for(self.runner.execute_job(job.id), 3 * TIMEOUT)

    def prompts(self) -> list[str]:
        return logged_prompts(self.log)

    def steps(self, job: Job) -> list[str]:
        return [event.step for event in self.job_rig.events if event.job_id == job.id]

    async def released(self) -> None:
        await eventually(lambda: self.pool.status().leased == 0, TIMEOUT)
