"""`semo migrate/command/sessions/questions/answer` against each backend, as a user runs them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from semo.engine.store.base import Store
from semo.engine.store.models import Agent, AgentSession, Office, UserQuestion
from tests.store.conftest import Stores, open_stores
from tests.support.semo_process import run_semo, semo_env
from tests.support.store_cli import semo


@pytest.fixture(params=["sqlite", "postgres", "supabase"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    async with open_stores(request.param, tmp_path) as stores:
        yield stores


async def seed(store: Store) -> tuple[Office, AgentSession, UserQuestion, UserQuestion]:
    office = await store.create_office(Office(name="acme"))
    agent = await store.upsert_agent(Agent(office_id=office.id, name="Frontend", role="FE"))
    session = await store.upsert_session(
        AgentSession(office_id=office.id, agent_id=agent.id, status="waiting_input")
    )
    choice = await store.create_question(
        UserQuestion(
            office_id=office.id,
            agent_id=agent.id,
            session_id=session.session_id,
            question_type="choice",
            question="Which DB?",
            options=["postgres", "sqlite"],
        )
    )
    text = await store.create_question(
        UserQuestion(office_id=office.id, agent_id=agent.id, question="Port?")
    )
    return office, session, choice, text


async def test_sessions_and_questions_list_rows(backend: Stores) -> None:
    store = await backend.new()
    _, session, choice, _ = await seed(store)
    sessions = json.loads((await semo(backend, "sessions", "--json")).stdout)
    assert [s["session_id"] for s in sessions] == [session.session_id]
    listing = await semo(backend, "questions")
    assert listing.returncode == 0 and "Which DB?" in listing.stdout
    rows = json.loads((await semo(backend, "questions", "--json")).stdout)
    assert {r["id"] for r in rows} >= {choice.id}


async def test_engines_lists_heartbeats(backend: Stores) -> None:
    store = await backend.new()
    office, *_ = await seed(store)
    await store.record_heartbeat(office.id, "engine-1", dead_after=60, starting=True)
    await store.record_heartbeat(office.id, "engine-2", dead_after=60, starting=True)
    await store.mark_engine_stopped(office.id, "engine-2")
    listing = await semo(backend, "engines")
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout.splitlines()[0].split() == [
        "engine_id", "state", "alive", "pid", "last_seen", "alive_until", "stopped_at",
        "dead_reason",
    ]  # fmt: skip
    await store.record_heartbeat(office.id, "engine-3", dead_after=60, starting=True)
    await store.expire_engine(office.id, "engine-3")  # ended by another engine
    rows = json.loads((await semo(backend, "engines", "--json")).stdout)
    assert [
        (r["engine_id"], r["status"], r["alive"], r["state"], r["pid"], r["dead_reason"])
        for r in rows
    ] == [
        ("engine-1", "running", True, "alive", None, None),
        ("engine-2", "stopped", False, "stopped", None, None),
        ("engine-3", "dead", False, "dead", None, "its heartbeat ran out"),  # never "running"
    ]
    unknown = await semo(backend, "engines", "--office", "nope")
    assert unknown.returncode == 2 and "no office 'nope'" in unknown.stderr


async def test_answer_by_option_and_by_text_then_twice_is_refused(backend: Stores) -> None:
    store = await backend.new()
    _, _, choice, text = await seed(store)
    picked = await semo(backend, "answer", choice.id, "--option", "2", "--json")
    assert picked.returncode == 0, picked.stderr
    assert json.loads(picked.stdout)["answer"] == "sqlite"
    assert (await store.get_question(choice.id)).status == "answered"
    typed = await semo(backend, "answer", text.id, "8080")
    assert typed.returncode == 0 and (await store.get_question(text.id)).answer == "8080"
    again = await semo(backend, "answer", choice.id, "postgres")
    assert again.returncode == 2 and "already answered" in again.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--option", "3"], "the option must be 1..2"),
        (["mysql"], "not one of the options"),
        ([], "give the answer text or an option number"),
    ],
)
async def test_bad_answers_are_clear_errors(backend: Stores, args, message) -> None:
    store = await backend.new()
    _, _, choice, _ = await seed(store)
    result = await semo(backend, "answer", choice.id, *args)
    assert result.returncode == 2 and message in result.stderr
    assert (await store.get_question(choice.id)).status == "pending"


async def test_answer_for_an_ended_session_is_refused(backend: Stores) -> None:
    store = await backend.new()
    _, session, choice, _ = await seed(store)
    await store.set_session_status(session.session_id, "terminated", reason="test")
    result = await semo(backend, "answer", choice.id, "--option", "1")
    assert result.returncode == 2 and "has ended" in result.stderr


async def test_command_insert_and_wait_for_the_engine_result(backend: Stores) -> None:
    store = await backend.new()
    office, session, _, _ = await seed(store)
    payload = json.dumps({"prompt": "hello"})
    waiting = asyncio.create_task(
        semo(backend, "command", "send_prompt", "--session", session.session_id,
             "--payload", payload, "--wait", "--timeout", "20", "--json")
    )  # fmt: skip
    engine = await backend.new()
    claimed = None
    while claimed is None:
        claimed = await engine.claim_next_command(office.id, "engine-1")
        if claimed is None:
            # a CLI that ended without inserting the command is a failure, not a long wait
            assert not waiting.done(), waiting.result().stderr
            await engine.wait_for_change(office.id, 1.0)
    assert claimed.payload == {"prompt": "hello"}
    await engine.complete_command(claimed.id, "engine-1", success=True, result={"delivered": True})
    done = await waiting
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == {"delivered": True}


async def test_command_wait_timeout_names_the_command(backend: Stores) -> None:
    store = await backend.new()
    await seed(store)
    result = await semo(backend, "command", "create_session", "--payload", '{"role": "FE"}',
                        "--wait", "--timeout", "1")  # fmt: skip
    assert result.returncode == 4
    assert "no result within 1 s" in result.stderr and "is pending" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bogus"], "unknown command type 'bogus'"),
        (["send_prompt", "--payload", '{"prompt": "x"}'], "send_prompt needs a session_id"),
        (["send_prompt", "--session", "s", "--payload", "{}"], "bad payload for send_prompt"),
        (["get_output", "--session", "s", "--payload", "[1]"], "must be a JSON object"),
        (["get_output", "--session", "s", "--payload", "{nope"], "--payload is not JSON"),
        (["cancel", "--session", "s", "--office", "nope"], "no office 'nope'"),
    ],
)
async def test_bad_commands_are_clear_errors(backend: Stores, args, message) -> None:
    store = await backend.new()
    office, *_ = await seed(store)
    result = await semo(backend, "command", *args)
    assert result.returncode == 2, result.stdout
    assert message in result.stderr and "Traceback" not in result.stderr
    assert await store.list_commands(office.id) == []


async def test_no_office_yet_says_how_to_make_one(backend: Stores) -> None:
    result = await semo(backend, "sessions")
    assert result.returncode == 2 and "no office yet" in result.stderr


async def test_migrate_is_idempotent(backend: Stores) -> None:
    first = await semo(backend, "migrate")
    assert first.returncode == 0, first.stderr
    if backend.backend in ("postgres", "supabase"):
        assert "up to date" in first.stdout  # the fixture already migrated this database
    else:
        assert "creates its schema itself" in first.stdout


async def test_unreachable_postgres_is_exit_code_3(tmp_path: Path) -> None:
    dsn = "postgresql://semo:secret@127.0.0.1:1/semo?connect_timeout=1"
    result = await run_semo("sessions", env=semo_env(SEMO_STORE="postgres", SEMO_DATABASE_URL=dsn))
    assert result.returncode == 3 and "store unavailable" in result.stderr
    assert "secret" not in result.stderr


async def test_end_session_ends_a_gone_engines_session(backend: Stores) -> None:
    store = await backend.new()
    office, session, choice, _ = await seed(store)
    queued = await store.insert_command(office.id, "get_output", session_id=session.session_id)
    ended = await semo(
        backend, "end-session", session.session_id, "--reason", "host lost", "--json"
    )
    assert ended.returncode == 0, ended.stderr
    row = json.loads(ended.stdout)
    assert (row["status"], row["end_reason"]) == ("terminated", "host lost")
    question = await store.get_question(choice.id)
    assert question.status == "cancelled"
    assert question.cancel_reason == f"session {session.session_id} has ended: host lost"
    # the queued command fails at the next claim, whichever engine makes it
    assert await store.claim_next_command(office.id, "any-engine") is None
    result = await store.get_result(queued.id)
    assert result is not None and result.error is not None and "host lost" in result.error
    again = await semo(backend, "end-session", session.session_id)
    assert again.returncode == 2 and "has already ended (host lost)" in again.stderr
    missing = await semo(backend, "end-session", "no-such-session")
    assert missing.returncode == 2 and "no session no-such-session" in missing.stderr
