"""An office of hostile scripted agents on a real engine, for the routing attack tests."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from semo.engine.config import AgentConfig, EngineConfig, OfficeConfig, PoolConfig, SemoConfig
from semo.engine.engine import Engine
from semo.engine.events import RoutingStep
from semo.engine.store.base import Store
from tests.support.script_agent import logged_prompts
from tests.support.waiting import eventually_value

REPO = Path(__file__).resolve().parents[2]


TIMEOUT = 20.0


def deliver(recipient: str, summary: str, invocation_id: str | None = None) -> str:
    body: dict[str, Any] = {"summary": summary}
    if invocation_id is not None:
        body["invocation_id"] = invocation_id
    return f"[DELIVER_RESULT:{recipient}]\n{json.dumps(body)}\n[/DELIVER_RESULT]"


def invoke(target: str, task: str) -> str:
    return f"[INVOKE:{target}]\n{json.dumps({'task': task})}\n[/INVOKE]"


def hostile(folder: Path, role: str, script: list[Any], reads_prompts: bool | None) -> AgentConfig:
    """A hostile agent of `role` answering prompts with `script` (prompts logged in ROLE.log)."""
    path = folder / f"{role}.json"
    path.write_text(json.dumps(script))
    command = [sys.executable, "-m", "tests.support.hostile_agent", "--script", str(path)]
    command += ["--log", str(folder / f"{role}.log")]
    return AgentConfig(
        role=role,
        profile="generic",
        command=command,
        env={"PYTHONPATH": str(REPO)},
        reads_prompts=reads_prompts,
        cols=200,
        rows=40,
    )


def office_config(
    folder: Path, agents: list[AgentConfig], engine_id: str, lease_seconds: float = 30
) -> SemoConfig:
    return SemoConfig(
        office=OfficeConfig(name="hostile", repository=folder, workspace_root=folder / "ws"),
        store={"backend": "sqlite", "sqlite_path": folder / "semo.db"},
        engine=EngineConfig(
            id=engine_id, command_timeout=10, shutdown_grace=1, lease_seconds=lease_seconds
        ),
        pool=PoolConfig(max_sessions=6, warm_roles=[a.role for a in agents]),
        agents=agents,
    )


def prompts(folder: Path, role: str) -> list[str]:
    return logged_prompts(folder / f"{role}.log")


@dataclass
class Office:
    engine: Engine
    folder: Path
    steps: list[RoutingStep] = field(default_factory=list)

    @property
    def store(self) -> Store:
        return self.engine.store

    def prompts(self, role: str) -> list[str]:
        return prompts(self.folder, role)

    def reasons(self, step: str) -> list[str]:
        return [s.detail for s in self.steps if s.step == step]

    async def turn(self, role: str, text: str) -> None:
        async def ready() -> str | None:
            for session in self.engine.sessions():
                if session.role == role and str(session.state) == "ready":
                    return session.session_id
            return None

        session_id = await eventually_value(ready, f"a ready {role} session")
        await self.engine.manager.get(session_id).deliver(text, timeout=TIMEOUT)  # type: ignore[union-attr]


@asynccontextmanager
async def running(
    make_store: Callable[[], Store], folder: Path, runtime: Path, config: SemoConfig
) -> AsyncIterator[Office]:
    work = folder / "work"
    work.mkdir(exist_ok=True)
    engine = Engine(
        config,
        store=make_store(),
        runtime_dir=runtime,
        folder_for=lambda _agent, _task: work,
        agent_env={"PATH": os.environ["PATH"], "HOME": str(folder)},
    )
    office = Office(engine, folder)
    engine.bus.add_listener(
        lambda e: office.steps.append(e) if isinstance(e, RoutingStep) else None
    )
    await engine.store.open()
    try:
        await engine.start()
        yield office
    finally:
        await engine.stop("test over")
        await engine.store.close()
