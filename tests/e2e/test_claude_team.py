"""The whole team on the real Claude Code CLI: a job for FE that needs a human and two peers.

Three Claude Code sessions (FE, BE, QA), each in its own git worktree made by the engine,
each talking to its own scripted Messages API. The flow (seed 002 + 003):

    run_job command -> FE gets the task -> FE asks a choice question (ASK_USER)
    -> the answer arrives (sqlite: through `semo answer`; supabase: a web app's UPDATE of the
       row, reaching the engine through Realtime) -> FE invokes BE -> BE delivers a result to
       FE -> FE invokes QA -> QA reports tests passed -> FE prints [SEMO:DONE] -> job done.

Asserted: the store rows (question, invocations, results, the command and its result, the job),
the prompts each model received, and each persona's text reaching its model.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from semo.engine.config import AgentConfig, EngineConfig, OfficeConfig, PoolConfig, SemoConfig
from semo.engine.engine import Engine
from semo.engine.store.base import Store
from semo.engine.store.models import Job, UserQuestion
from semo.engine.store.sqlite import SqliteStore
from tests.store.conftest import open_stores
from tests.support.claude_home import claude_env
from tests.support.git_repo import make_repo
from tests.support.scripted_api import ScriptedMessagesAPI
from tests.support.temp_dirs import short_temp_dir
from tests.support.waiting import eventually_value

pytestmark = pytest.mark.claude

TIMEOUT = 90.0
ROLES = ("FE", "BE", "QA")
PERSONAS = {
    "FE": "You build the web front end. Your badge is fe-badge-61c2.",
    "BE": "You build the HTTP API. Your badge is be-badge-0d7e.",
    "QA": "You test everything. Your badge is qa-badge-93aa.",
}


def block(tag: str, body: dict[str, Any], close: str) -> str:
    return f"[{tag}]\n{json.dumps(body)}\n[/{close}]"


def invocation_id(request: dict[str, Any]) -> str:
    text = json.dumps(request)
    match = re.search(r"Invocation ([0-9a-f-]{36}) from FE", text)
    assert match, "the invocation prompt names its id"
    return match.group(1)


def be_reply(request: dict[str, Any]) -> str:
    body = {"invocation_id": invocation_id(request), "summary": "GET /health added"}
    return "Done.\n\n" + block("DELIVER_RESULT:FE", body, "DELIVER_RESULT")


def qa_reply(request: dict[str, Any]) -> str:
    body = {"invocation_id": invocation_id(request), "summary": "All tests passed (12)"}
    return "All tests passed\n\n" + block("DELIVER_RESULT:FE", body, "DELIVER_RESULT")


FE_REPLIES = [
    "I need a decision first.\n\n"
    + block(
        "ASK_USER",
        {"type": "choice", "question": "Which database?", "options": ["postgres", "sqlite"]},
        "ASK_USER",
    ),
    "Asking BE for the API.\n\n"
    + block("INVOKE:BE", {"task": "Add GET /health", "context": {"db": "postgres"}}, "INVOKE"),
    "Now QA.\n\n" + "[INVOKE:QA]\nRun the whole test suite\n[/INVOKE]",
    "[SEMO:DONE] login page built on postgres",
]


@pytest.fixture
def runtime_dir() -> Iterator[Path]:
    with short_temp_dir("semo-team-") as path:  # short: Unix socket paths
        yield path


def make_office_repo(folder: Path) -> Path:
    return make_repo(folder / "repo", {"README.md": "# the office's product\n"})


def team_config(folder: Path, apis: dict[str, ScriptedMessagesAPI], db: Path) -> SemoConfig:
    return SemoConfig(
        office=OfficeConfig(
            name="team", repository=make_office_repo(folder), workspace_root=folder / "workspace"
        ),
        store={"backend": "sqlite", "sqlite_path": db},
        engine=EngineConfig(id="team-engine", command_timeout=60),
        pool=PoolConfig(max_sessions=6, warm_roles=list(ROLES)),
        agents=[
            AgentConfig(
                role=role,
                name=f"{role} agent",
                prompt=PERSONAS[role],
                env={"ANTHROPIC_BASE_URL": apis[role].base_url},
                cols=100,
                rows=30,
            )
            for role in ROLES
        ],
    )


@asynccontextmanager
async def team(
    tmp_path: Path, runtime_dir: Path, store: Store | None = None
) -> AsyncIterator[tuple[Engine, dict[str, ScriptedMessagesAPI]]]:
    replies = {"FE": FE_REPLIES, "BE": [be_reply], "QA": [qa_reply]}
    apis = {role: ScriptedMessagesAPI(replies=replies[role]).start() for role in ROLES}
    try:
        config = team_config(tmp_path, apis, tmp_path / "semo.db")
        env = claude_env(tmp_path / "elsewhere", tmp_path / "home", apis["FE"])
        engine = Engine(config, store=store, agent_env=env, runtime_dir=runtime_dir)
        await engine.start()
        try:
            yield engine, apis
        finally:
            await engine.stop("test over")
    finally:
        for api in apis.values():
            api.close()


async def pending_question(store: Store, office_id: str) -> UserQuestion:
    async def probe() -> UserQuestion | None:
        pending = await store.list_questions(office_id, status="pending")
        return pending[0] if pending else None

    return await eventually_value(probe, "FE's question", TIMEOUT)


async def finished_job(store: Store, job_id: str) -> Job:
    async def probe() -> Job | None:
        job = await store.get_job(job_id)
        return job if job.status in ("done", "failed") else None

    return await eventually_value(probe, "the job's end", TIMEOUT)


async def run_flow(engine: Engine, apis: dict[str, ScriptedMessagesAPI], answer: Any) -> None:
    store, office_id = engine.store, engine.office_id
    fe = engine.agents["FE"]
    job = await store.create_job(Job(office_id=office_id, agent_id=fe.id, task="Build login"))
    command = await store.insert_command(office_id, "run_job", {"job_id": job.id})

    question = await pending_question(store, office_id)
    assert (question.question_type, question.options) == ("choice", ["postgres", "sqlite"])
    assert question.agent_id == fe.id
    await answer(question)

    done = await finished_job(store, job.id)
    assert done.status == "done", done.failure_reason
    assert (await store.get_question(question.id)).answer == "postgres"

    invocations = await store.list_invocations(office_id)
    targets = {i.target_agent_id: i for i in invocations}
    assert set(targets) == {engine.agents["BE"].id, engine.agents["QA"].id}
    assert all(i.status == "delivered" and i.caller_agent_id == fe.id for i in invocations)
    assert targets[engine.agents["BE"].id].context == {"db": "postgres"}
    results = await store.list_results(office_id)
    assert sorted(r.summary for r in results) == ["All tests passed (12)", "GET /health added"]
    assert all(r.status == "delivered" and r.recipient_agent_id == fe.id for r in results)
    assert {r.invocation_id for r in results} == {i.id for i in invocations}

    result = await eventually_value(lambda: store.get_result(command.id), "run_job result", 10)
    assert result.success and result.result is not None and result.result["status"] == "done"

    fe_users = [r.last_user_text() for r in apis["FE"].main_requests]
    assert "Build login" in fe_users[0]
    assert f"Answer to your question {question.id}: postgres" in fe_users[1]
    assert "from BE: GET /health added" in fe_users[2]
    assert "from QA: All tests passed (12)" in fe_users[3]
    assert len(fe_users) == 4
    (be_request,) = apis["BE"].main_requests
    assert "Add GET /health" in be_request.last_user_text()
    (qa_request,) = apis["QA"].main_requests
    assert "Run the whole test suite" in qa_request.last_user_text()
    for role in ROLES:
        body = apis[role].main_requests[0].body_text()
        assert PERSONAS[role] in body, f"{role}'s persona reached its model"
        assert "[DELIVER_RESULT:" in body  # the protocol section
    paths = {s.role: s.cwd for s in engine.sessions()}
    assert len(set(paths.values())) == 3
    assert all(p is not None and "/workspace/agent/" in str(p) for p in paths.values())


async def test_team_flow_with_semo_answer(tmp_path: Path, runtime_dir: Path) -> None:
    async with team(tmp_path, runtime_dir) as (engine, apis):
        assert isinstance(engine.store, SqliteStore)
        db = tmp_path / "semo.db"

        async def answer_with_cli(question: UserQuestion) -> None:
            env = {k: v for k, v in os.environ.items() if not k.startswith("SEMO_")}
            env |= {"SEMO_STORE": "sqlite", "SEMO_SQLITE_PATH": str(db)}
            semo = Path(sys.executable).with_name("semo")
            child = await asyncio.create_subprocess_exec(
                str(semo),
                "answer",
                question.id,
                "--option",
                "1",
                env=env,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            _, err = await child.communicate()
            assert child.returncode == 0, err.decode()

        await run_flow(engine, apis, answer_with_cli)


async def test_team_flow_on_supabase_with_a_realtime_answer(
    tmp_path: Path, runtime_dir: Path
) -> None:
    async with open_stores("supabase", tmp_path) as stores:
        store = await stores.new()
        emulator = stores.emulator
        assert emulator is not None
        from supabase import acreate_client

        web = await acreate_client(emulator.url, emulator.service_role_key)

        events_before_answer: list[int] = []

        async def answer_from_web_app(question: UserQuestion) -> None:
            events_before_answer.append(store.stats.events)
            now = datetime.now(UTC).isoformat()
            update = {"status": "answered", "answer": "postgres", "answered_at": now}
            await web.table("user_questions").update(update).eq("id", question.id).execute()

        async with team(tmp_path, runtime_dir, store=store) as (engine, apis):
            await run_flow(engine, apis, answer_from_web_app)
            # the UPDATE reached the engine as a Realtime postgres_changes event
            assert store.stats.events > events_before_answer[0]
