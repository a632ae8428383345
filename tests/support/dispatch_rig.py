"""A `CommandDispatcher` rig for routing tests: a store, an office, bash sessions, a bus.

The `stores` and `rig` fixtures that build it are in tests/routing/conftest.py.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from semo.engine.events import EventBus
from semo.engine.routing import CommandDispatcher
from semo.engine.sessions.agent_session import AgentSession
from semo.engine.sessions.manager import SessionManager
from semo.engine.store.base import Store
from semo.engine.store.models import Agent, AgentCommandResult, CreateSessionPayload, Office
from tests.store.conftest import Stores
from tests.support.waiting import eventually

TIMEOUT = 15.0
BASH = ["bash", "--norc", "--noprofile", "-i"]
#: the dispatchers poll once an hour: what they run promptly came through a wake-up
NO_POLL = 3600.0


def bash_env() -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PS1": "$ ",
        "HOME": os.environ.get("HOME", "/tmp"),
    }


@dataclass
class Rig:
    stores: Stores
    store: Store
    office: Office
    manager: SessionManager
    bus: EventBus
    folder: Path
    dispatchers: list[CommandDispatcher] = field(default_factory=list)

    def dispatcher(
        self, *, store: Store | None = None, engine_id: str = "engine-1", **options: Any
    ) -> CommandDispatcher:
        options.setdefault("poll_interval", NO_POLL)
        dispatcher = CommandDispatcher(
            store or self.store,
            self.manager,
            office_id=self.office.id,
            engine_id=engine_id,
            bus=self.bus,
            create_session=self.create,
            **options,
        )
        self.dispatchers.append(dispatcher)
        return dispatcher

    async def create(self, payload: CreateSessionPayload) -> AgentSession:
        """The test's create_session (the engine's goes through the pool)."""
        if payload.role == "BOOM":
            raise RuntimeError("boom")
        if payload.role not in (None, "SH"):
            raise LookupError(f"no agent with role {payload.role!r}")
        agent = Agent(office_id=self.office.id, name="shell", role="SH", command=BASH)
        session = await self.manager.create(agent, working_dir=self.folder, cols=80, rows=24)
        await session.wait_ready(TIMEOUT)
        return session

    async def insert(
        self, command_type: str, payload: dict[str, Any] | None = None, session: str | None = None
    ) -> str:
        command = await self.store.insert_command(
            self.office.id, command_type, payload, session_id=session
        )
        return command.id

    async def result(self, command_id: str, timeout: float = TIMEOUT) -> AgentCommandResult:
        result: AgentCommandResult = await eventually(
            lambda: self.store.get_result(command_id),
            timeout,
            what=f"the result of command {command_id}",
            until=lambda found: found is not None,
            interval=0.02,
        )
        return result

    async def run(
        self, command_type: str, payload: dict[str, Any] | None = None, session: str | None = None
    ) -> AgentCommandResult:
        return await self.result(await self.insert(command_type, payload, session))

    async def output_until(self, session: str, predicate: Callable[[list[str]], bool]) -> None:
        """get_output commands until the screen satisfies `predicate`."""

        async def lines() -> list[str]:
            result = await self.run("get_output", {}, session)
            assert result.success, result.error
            assert result.result is not None
            return result.result["lines"]

        await eventually(lines, TIMEOUT, what="the screen", until=predicate, interval=0.05)
