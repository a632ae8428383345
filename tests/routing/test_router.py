"""The router on real PTYs: three scripted agents (tests/support/script_agent.py) as generic
sessions, a real pool and the sqlite store.

Checked: the whole seed-002 flow (ASK_USER answered through the store, INVOKE, DELIVER_RESULT,
DONE from an invoked agent) with every row and every prompt each agent received; unknown target,
self-invocation, a cycle and a malformed message are refused with the reason sent to the
sender; two invocations of one target run one after another; an engine restart between INVOKE
and DELIVER_RESULT loses nothing and delivers nothing twice.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from semo.engine.events import EventBus, RoutingStep
from semo.engine.office.operations import answer_question
from semo.engine.routing.router import Router
from semo.engine.sessions.manager import LaunchOptions, SessionManager
from semo.engine.sessions.pool import SessionPoolManager
from semo.engine.sessions.profiles import profile_named
from semo.engine.store.models import Agent, AgentResult, Office, UserQuestion
from semo.engine.store.sqlite import SqliteStore
from tests.support.markers import ask, invoke
from tests.support.script_agent import logged_prompts
from tests.support.waiting import eventually, eventually_value

REPO = Path(__file__).resolve().parents[2]
ROLES = ("FE", "BE", "QA")
TIMEOUT = 15.0
#: the scripted agents stand for models: semo's feedback is typed into them
READS_PROMPTS = profile_named("generic", reads_prompts=True)


def deliver(recipient: str, summary: str) -> str:
    return f"[DELIVER_RESULT:{recipient}]\n{json.dumps({'summary': summary})}\n[/DELIVER_RESULT]"


@dataclass
class Office3:
    store: SqliteStore
    office: Office
    agents: dict[str, Agent]
    folder: Path

    def prompts(self, role: str) -> list[str]:
        return logged_prompts(self.folder / f"{role}.log")


async def make_office(folder: Path, scripts: dict[str, list[Any]]) -> Office3:
    store = SqliteStore(folder / "semo.db")
    await store.open()
    office = await store.create_office(Office(name="routing"))
    agents = {}
    for role in ROLES:
        script = folder / f"{role}.json"
        script.write_text(json.dumps(scripts.get(role, [])))
        command = [sys.executable, "-m", "tests.support.script_agent", "--script", str(script)]
        command += ["--log", str(folder / f"{role}.log")]
        agent = Agent(office_id=office.id, name=f"agent {role}", role=role, command=command)
        agents[role] = await store.upsert_agent(agent)
    return Office3(store, office, agents, folder)


@asynccontextmanager
async def running(
    office: Office3, runtime_dir: Path, bus: EventBus | None = None
) -> AsyncIterator[tuple[Router, SessionPoolManager]]:
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "HOME": str(office.folder)}
    manager = SessionManager(
        store=office.store,
        office_id=office.office.id,
        agent_env=env,
        runtime_dir=runtime_dir,
        launch_options=lambda _agent: LaunchOptions(profile=READS_PROMPTS),
    )
    folders = office.folder / "work"
    folders.mkdir(exist_ok=True)
    pool = SessionPoolManager(
        manager, office.agents, warm_roles=ROLES, folder_for=lambda _a, _t: folders
    )
    await manager.start()
    await pool.start()
    router = Router(
        office.store, manager, pool, office_id=office.office.id, agents=office.agents, bus=bus
    )
    router.start()
    try:
        yield router, pool
    finally:
        await router.stop()
        await pool.close()
        await manager.close()


async def start_task(router: Router, pool: SessionPoolManager, role: str, task: str) -> None:
    pooled = await pool.acquire(role=role)
    await pooled.session.deliver(task, timeout=TIMEOUT)


async def test_ask_invoke_deliver_done(tmp_path: Path, runtime_dir: Path) -> None:
    scripts = {
        "FE": [
            {"match": "build the login page", "text": ask("Which DB?", "postgres", "sqlite")},
            {"match": "Answer to your question", "text": invoke("BE", "Add /health", db="pg")},
            {"match": "from BE", "text": invoke("QA", "Run the tests")},
            {"match": "from QA", "text": "[SEMO:DONE] login page built"},
        ],
        "BE": [{"match": "Add /health", "text": deliver("FE", "health added")}],
        "QA": [{"match": "Run the tests", "text": "All tests passed\n[SEMO:DONE] 12 passed"}],
    }
    office = await make_office(tmp_path, scripts)
    async with running(office, runtime_dir) as (router, pool):
        await start_task(router, pool, "FE", "build the login page")
        store, office_id = office.store, office.office.id

        async def asked() -> list[Any] | None:
            return await store.list_questions(office_id) or None

        question = (await eventually_value(asked, "FE's question"))[0]
        assert (question.question_type, question.options) == ("choice", ["postgres", "sqlite"])
        await answer_question(store, question.id, option=1)  # what `semo answer` does

        await eventually(
            lambda: any("[SEMO:DONE]" not in p and "from QA" in p for p in office.prompts("FE")),
            TIMEOUT,
        )
        fe = office.prompts("FE")
        assert fe[0] == "build the login page"
        assert fe[1].startswith(f"[semo] Answer to your question {question.id}: postgres")
        assert "Result of invocation" in fe[2] and "from BE: health added" in fe[2]
        assert "from QA: 12 passed" in fe[3]
        assert len(fe) == 4
        be, qa = office.prompts("BE"), office.prompts("QA")
        assert len(be) == 1 and "Add /health" in be[0] and '"db": "pg"' in be[0]
        assert len(qa) == 1 and "Run the tests" in qa[0]

        async def both_delivered() -> list[Any] | None:
            # marked once each agent confirmed the prompt: a moment after the agent read it
            invocations = await store.list_invocations(office_id)
            done = [i.status for i in invocations] == ["delivered", "delivered"]
            return invocations if done else None

        invocations = await eventually_value(both_delivered, "both invocations delivered")
        assert len(invocations) == 2
        results = await store.list_results(office_id)
        assert sorted(r.summary for r in results) == ["12 passed", "health added"]
        assert all(r.status == "delivered" for r in results)
        assert (await store.get_question(question.id)).status == "answered"
    await office.store.close()


async def test_bad_invocations_are_refused_and_the_sender_told(
    tmp_path: Path, runtime_dir: Path
) -> None:
    scripts = {
        "FE": [
            {"match": "go", "text": invoke("XX", "anything")},
            {"match": "no agent XX", "text": invoke("FE", "myself")},
            {"match": "invoke itself", "text": "[INVOKE:BE]\n{bad json\n[/INVOKE]"},
        ],
    }
    office = await make_office(tmp_path, scripts)
    async with running(office, runtime_dir) as (router, pool):
        await start_task(router, pool, "FE", "go")
        await eventually(lambda: len(office.prompts("FE")) == 4, TIMEOUT)
        fe = office.prompts("FE")
        assert "refused: there is no agent XX (known: BE, FE, QA)" in fe[1]
        assert "refused: an agent cannot invoke itself" in fe[2]
        assert fe[3].startswith("semo could not read your [INVOKE:BE] message")
        assert await office.store.list_invocations(office.office.id) == []
    await office.store.close()


async def test_a_cycle_is_refused(tmp_path: Path, runtime_dir: Path) -> None:
    scripts = {
        "FE": [{"match": "go", "text": invoke("BE", "step one")}],
        "BE": [{"match": "step one", "text": invoke("QA", "step two")}],
        "QA": [{"match": "step two", "text": invoke("FE", "step three")}],
    }
    office = await make_office(tmp_path, scripts)
    async with running(office, runtime_dir) as (router, pool):
        await start_task(router, pool, "FE", "go")
        await eventually(lambda: len(office.prompts("QA")) == 2, TIMEOUT)
        refusal = office.prompts("QA")[1]
        assert "that would wait on itself (QA -> FE -> BE -> QA)" in refusal
        assert len(office.prompts("FE")) == 1  # FE was never sent the cyclic task
        invocations = await office.store.list_invocations(office.office.id)
        assert len(invocations) == 2
    await office.store.close()


async def test_invocations_of_one_target_run_one_after_another(
    tmp_path: Path, runtime_dir: Path
) -> None:
    scripts = {
        "FE": [{"match": "go", "text": invoke("BE", "task from FE")}],
        "QA": [{"match": "go", "text": invoke("BE", "task from QA")}],
        # BE answers whichever task it is given (FE's and QA's INVOKE may be routed in either
        # order), slowly, so that the other one has to wait for it
        "BE": [
            {"match": "task from FE", "text": deliver("FE", "FE's done"), "delay": 0.5},
            {"match": "task from QA", "text": deliver("QA", "QA's done"), "delay": 0.5},
        ],
    }
    office = await make_office(tmp_path, scripts)
    bus = EventBus()
    steps: list[RoutingStep] = []
    bus.add_listener(lambda e: steps.append(e) if isinstance(e, RoutingStep) else None)
    async with running(office, runtime_dir, bus) as (router, pool):
        await start_task(router, pool, "FE", "go")
        await start_task(router, pool, "QA", "go")
        await eventually(
            lambda: len(office.prompts("QA")) == 2 and len(office.prompts("FE")) == 2, TIMEOUT
        )
        order = [
            (s.step, s.detail) for s in steps if s.step in ("invocation_sent", "result_created")
        ]
        assert [step for step, _ in order] == [
            "invocation_sent",
            "result_created",
            "invocation_sent",
            "result_created",
        ]
        assert len(office.prompts("BE")) == 2
    await office.store.close()


async def test_restart_between_invoke_and_deliver_loses_nothing(
    tmp_path: Path, runtime_dir: Path
) -> None:
    scripts = {
        "FE": [{"match": "go", "text": invoke("BE", "slow task")}],
        "BE": [{"match": "slow task", "text": deliver("FE", "too late"), "delay": 30}],
    }
    office = await make_office(tmp_path, scripts)
    async with running(office, runtime_dir) as (router, pool):
        await start_task(router, pool, "FE", "go")
        await eventually(lambda: len(office.prompts("BE")) == 1, TIMEOUT)
    # the engine is gone; BE's new session will answer at once
    (tmp_path / "BE.json").write_text(
        json.dumps([{"match": "slow task", "text": deliver("FE", "done after restart")}])
    )
    (tmp_path / "FE.json").write_text(json.dumps([]))
    async with running(office, runtime_dir) as (router, pool):
        await router.resume()
        await eventually(
            lambda: any("done after restart" in p for p in office.prompts("FE")), TIMEOUT
        )
        results = await office.store.list_results(office.office.id)
        assert [r.summary for r in results] == ["done after restart"]
    fe = office.prompts("FE")
    assert sum("done after restart" in p for p in fe) == 1
    assert len(office.prompts("BE")) == 2  # the task was sent again to the new BE session
    restarted = "semo was restarted while this invocation was being worked on"
    assert restarted not in office.prompts("BE")[0] and restarted in office.prompts("BE")[1]
    await office.store.close()


async def test_a_pending_result_is_delivered_once_after_a_restart(
    tmp_path: Path, runtime_dir: Path
) -> None:
    office = await make_office(tmp_path, {})
    agents = office.agents
    result = await office.store.create_result(
        AgentResult(
            office_id=office.office.id,
            sender_agent_id=agents["BE"].id,
            recipient_agent_id=agents["FE"].id,
            summary="left over",
            payload={"summary": "left over"},
        )
    )
    async with running(office, runtime_dir) as (router, _pool):
        await router.resume()
        await eventually(lambda: len(office.prompts("FE")) == 1, TIMEOUT)
        await router.sweep()
        await router.resume()
        assert (await office.store.list_results(office.office.id))[0].status == "delivered"
    assert len(office.prompts("FE")) == 1
    assert "left over" in office.prompts("FE")[0]
    assert "it was waiting for you when semo restarted" in office.prompts("FE")[0]
    assert result.status == "pending"
    await office.store.close()


async def test_an_answer_for_a_resumed_conversation_is_typed_into_it(
    tmp_path: Path, runtime_dir: Path
) -> None:
    """A question asked by a dead engine's session, answered but not delivered: the session
    that resumed its conversation (`Router.resumed`) gets the answer, once, with a note."""
    office = await make_office(tmp_path, {})
    question = await office.store.create_question(
        UserQuestion(
            office_id=office.office.id,
            agent_id=office.agents["FE"].id,
            session_id="dead-engines-session",
            question="Which colour?",
        )
    )
    await office.store.answer_question(question.id, "teal")  # before its engine died
    async with running(office, runtime_dir) as (router, pool):
        fe = await pool.acquire(role="FE")
        pool.release(fe.session_id)
        await router.sweep()
        assert office.prompts("FE") == []  # not this engine's session: not delivered
        router.resumed("dead-engines-session", fe.session_id)
        await router.resume()
        await eventually(lambda: len(office.prompts("FE")) == 1, TIMEOUT)
        [prompt] = office.prompts("FE")
        assert f"Answer to your question {question.id}" in prompt and "teal" in prompt
        assert "waiting for you when semo restarted" in prompt

        async def marked() -> bool | None:
            row = await office.store.get_question(question.id)
            return True if row.answer_delivered_at is not None else None

        await eventually_value(marked, "the answer marked delivered", TIMEOUT)
        await router.sweep()
    assert len(office.prompts("FE")) == 1
    await office.store.close()
