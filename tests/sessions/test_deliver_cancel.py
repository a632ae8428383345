"""A caller of `AgentSession.deliver` cancelled at the moment its prompt is delivered.

On Python 3.11 `asyncio.wait_for` returns the result when a cancellation meets the awaited
future's completion, so the cancelled caller went on as if nothing happened (and whoever
cancelled it, e.g. terminate(), waited for it forever). The cancel here is requested from a
session listener in the same step that resolves the delivery: deterministic, no timing.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from semo.engine.sessions.agent_session import AgentSession, PromptDelivered, SessionEvent
from semo.engine.sessions.manager import SessionManager
from semo.engine.store.models import Agent

TIMEOUT = 10.0


@pytest.fixture
async def manager(tmp_path: Path) -> AsyncIterator[SessionManager]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PS1": "$ ", "HOME": str(tmp_path)}
    async with SessionManager(agent_env=env, runtime_dir=tmp_path / "run") as manager:
        yield manager


async def test_a_caller_cancelled_as_its_delivery_completes_is_cancelled(
    manager: SessionManager, tmp_path: Path
) -> None:
    agent = Agent(
        office_id="office", name="shell", role="SH", command=["bash", "--norc", "--noprofile", "-i"]
    )
    session = await manager.create(agent, working_dir=tmp_path, cols=80, rows=24)
    await session.wait_ready(TIMEOUT)
    went_on: list[PromptDelivered] = []

    async def caller() -> None:
        went_on.append(await session.deliver("echo delivered", timeout=TIMEOUT))

    task = asyncio.create_task(caller())

    def cancel_on_delivery(_session: AgentSession, event: SessionEvent) -> None:
        if isinstance(event, PromptDelivered):
            task.cancel()  # the delivery's future is already resolved: both meet

    session.add_listener(cancel_on_delivery)
    with pytest.raises(asyncio.CancelledError):
        await task
    assert went_on == []  # the caller did not go on as if it had not been cancelled
    assert session.delivered == 1  # the prompt itself was typed once
