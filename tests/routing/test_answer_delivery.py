"""Answers are typed once across a router restart, on sqlite and postgres.

The router marks an answer delivered when the agent took it (migration 0008), and its sweep
reads only answered-but-undelivered questions. A router that restarts (a new `Router`, no memory,
the agent's session still running) does not type an answer a second time; an answer written
while no router ran (or before the agent took it) is still typed, once. Real PTYs and the
scripted agent (tests/support/script_agent.py), which logs every prompt it receives.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from semo.engine.routing.router import Router
from semo.engine.sessions.manager import LaunchOptions, SessionManager
from semo.engine.sessions.pool import SessionPoolManager
from semo.engine.sessions.profiles import profile_named
from semo.engine.store.base import Store
from semo.engine.store.models import Agent, Office, UserQuestion
from tests.store.conftest import open_stores
from tests.support.markers import ask
from tests.support.script_agent import logged_prompts
from tests.support.waiting import eventually, eventually_value

REPO = Path(__file__).resolve().parents[2]

TIMEOUT = 15.0
#: the scripted agent stands for a model: answers are typed into it as prompts
READS_PROMPTS = profile_named("generic", reads_prompts=True)


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    async with open_stores(request.param, tmp_path) as stores:
        yield await stores.new()


def prompts(log: Path) -> list[str]:
    return logged_prompts(log)


@asynccontextmanager
async def fe_session(
    store: Store, folder: Path, runtime: Path
) -> AsyncIterator[tuple[Office, Agent, SessionManager, SessionPoolManager]]:
    """An office with one scripted FE agent that asks a question when told `go`."""
    office = await store.create_office(Office(name="answers"))
    script = folder / "FE.json"
    script.write_text(json.dumps([{"match": "go", "text": ask("Which colour?", "red", "blue")}]))
    command = [sys.executable, "-m", "tests.support.script_agent", "--script", str(script)]
    command += ["--log", str(folder / "FE.log")]
    agent = await store.upsert_agent(
        Agent(office_id=office.id, name="agent FE", role="FE", command=command)
    )
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "HOME": str(folder)}
    manager = SessionManager(
        store=store,
        office_id=office.id,
        agent_env=env,
        runtime_dir=runtime,
        launch_options=lambda _agent: LaunchOptions(
            profile=profile_named("generic", reads_prompts=True)
        ),
    )
    pool = SessionPoolManager(
        manager, {"FE": agent}, warm_roles=("FE",), folder_for=lambda _a, _t: folder
    )
    await manager.start()
    await pool.start()
    try:
        yield office, agent, manager, pool
    finally:
        await pool.close()
        await manager.close()


def router_for(
    store: Store, office: Office, agent: Agent, manager: SessionManager, pool: SessionPoolManager
) -> Router:
    return Router(store, manager, pool, office_id=office.id, agents={"FE": agent})


def asked(store: Store, office: Office) -> Callable[[], Awaitable[list[UserQuestion] | None]]:
    async def probe() -> list[UserQuestion] | None:
        return await store.list_questions(office.id) or None

    return probe


def answers_typed(folder: Path) -> int:
    return sum("Answer to your question" in p for p in prompts(folder / "FE.log"))


async def test_an_answer_typed_before_a_restart_is_not_typed_again(
    store: Store,
    tmp_path: Path,
    runtime_dir: Path,
) -> None:
    async with fe_session(store, tmp_path, runtime_dir) as (office, agent, manager, pool):
        router = router_for(store, office, agent, manager, pool)
        router.start()
        pooled = await pool.acquire(role="FE")
        await pooled.session.deliver("go", timeout=TIMEOUT)
        [question] = await eventually_value(asked(store, office), "the question", TIMEOUT)
        await store.answer_question(question.id, "blue")
        await eventually(lambda: answers_typed(tmp_path) == 1, TIMEOUT)
        await router.settle()
        assert (await store.get_question(question.id)).answer_delivered_at is not None
        await router.stop()
        # a new router (an engine restarted around the same live session): nothing to type
        again = router_for(store, office, agent, manager, pool)
        again.start()
        await again.sweep()
        await again.resume()
        await again.sweep()
        await again.settle()
        await again.stop()
        assert await store.list_questions(office.id, status="answered", undelivered=True) == []
    assert answers_typed(tmp_path) == 1


async def test_an_answer_not_typed_before_a_restart_is_typed_once_after(
    store: Store,
    tmp_path: Path,
    runtime_dir: Path,
) -> None:
    async with fe_session(store, tmp_path, runtime_dir) as (office, agent, manager, pool):
        router = router_for(store, office, agent, manager, pool)
        router.start()
        pooled = await pool.acquire(role="FE")
        await pooled.session.deliver("go", timeout=TIMEOUT)
        [question] = await eventually_value(asked(store, office), "the question", TIMEOUT)
        await router.stop()  # the engine is gone before the operator answers
        await store.answer_question(question.id, "red")
        assert answers_typed(tmp_path) == 0
        again = router_for(store, office, agent, manager, pool)
        again.start()
        await again.sweep()
        await eventually(lambda: answers_typed(tmp_path) == 1, TIMEOUT)
        await again.settle()
        await again.sweep()
        await again.settle()
        await again.stop()
        delivered = await store.get_question(question.id)
        assert delivered.answer_delivered_at is not None
    assert answers_typed(tmp_path) == 1
    assert "red" in next(p for p in prompts(tmp_path / "FE.log") if "Answer" in p)
