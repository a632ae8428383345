"""Listings under Supabase's row cap ("Max rows", 1000 on a new project; the emulator's default).

An office with 5,000 old rows in each table the engine reads (answered questions, delivered
results, finished invocations, completed commands): what is new is still found, on every
backend (sqlite, postgres, supabase through the emulator with the cap on), and whole listings
come back complete, in order, without a row twice (keyset pagination; old rows share their
timestamps ten by ten, so the tie-breaking key matters).

Before paging, the supabase store read the first 1000 rows oldest first: a new answer, result
or invocation behind 1000 old ones was never seen.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from semo.engine.store.base import LIST_PAGE_ROWS, StoreError
from semo.engine.store.models import (
    Agent,
    AgentInvocation,
    AgentResult,
    AgentSession,
    Office,
    UserQuestion,
)
from semo.engine.store.supabase import SupabaseStore
from tests.store.conftest import Stores, open_stores
from tests.support.old_rows import OLD, insert_postgres, old_rows


@pytest.fixture(
    params=["sqlite", "postgres", "supabase", "supabase-max-rows-100", "supabase-max-rows-250"]
)
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    """Every backend; supabase with its default "Max rows" (1000), and with 100 and 250,
    below the stores' page of LIST_PAGE_ROWS (a short page is not the last one there)."""
    backend, _, cap = request.param.partition("-max-rows-")
    async with open_stores(backend, tmp_path) as factory:
        if factory.emulator is not None:
            assert factory.emulator.max_rows == 1000  # the cap is on by default
            if cap:
                factory.emulator.set_max_rows(int(cap))
        yield factory


def insert_sqlite(path: str, rows: dict[str, list[dict[str, Any]]]) -> None:
    conn = sqlite3.connect(path)
    try:
        with conn:
            for table, items in rows.items():
                names = list(items[0])
                conn.executemany(
                    f"INSERT INTO {table} ({', '.join(names)})"
                    f" VALUES ({', '.join('?' for _ in names)})",
                    [
                        [
                            v.strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")
                            if isinstance(v, datetime)
                            else v
                            for v in item.values()
                        ]
                        for item in items
                    ],
                )
    finally:
        conn.close()


async def _office_with_history(stores: Stores) -> tuple[Any, Office, Agent, AgentSession]:
    store = await stores.new()
    office = await store.create_office(Office(name="busy"))
    agent = await store.upsert_agent(Agent(office_id=office.id, name="a", role="BE"))
    session = await store.upsert_session(
        AgentSession(office_id=office.id, agent_id=agent.id, status="ready")
    )
    rows = old_rows(office.id, agent.id, session.session_id)
    if stores.backend == "sqlite":
        await asyncio.to_thread(insert_sqlite, stores.target, rows)
    else:
        await insert_postgres(stores.dsn, rows)
    return store, office, agent, session


async def test_new_rows_are_found_behind_5000_old_ones(stores: Stores) -> None:
    store, office, agent, session = await _office_with_history(stores)

    # an answer: the router reads the answered questions of its sessions
    question = await store.create_question(
        UserQuestion(
            office_id=office.id, agent_id=agent.id, session_id=session.session_id, question="new?"
        )
    )
    await store.answer_question(question.id, "new answer")
    answered = await store.list_questions(
        office.id, status="answered", session_ids=[session.session_id]
    )
    assert len(answered) == OLD + 1
    assert answered[-1].id == question.id and answered[-1].answer == "new answer"
    assert await store.list_questions(office.id, status="answered", session_ids=[]) == []
    other = await store.list_questions(office.id, status="answered", session_ids=["not-mine"])
    assert other == []

    # a result between agents: the router delivers the pending ones
    result = await store.create_result(
        AgentResult(
            office_id=office.id,
            sender_agent_id=agent.id,
            recipient_agent_id=agent.id,
            summary="new",
        )
    )
    assert [r.id for r in await store.list_results(office.id, status="pending")] == [result.id]

    # an invocation: the router resumes the pending and running ones
    invocation = await store.create_invocation(
        AgentInvocation(
            office_id=office.id, caller_agent_id=agent.id, target_agent_id=agent.id, task="new"
        )
    )
    live = await store.list_invocations(office.id, statuses=("pending", "running"))
    assert [i.id for i in live] == [invocation.id]
    assert [i.id for i in await store.list_invocations(office.id, ids=[invocation.id])] == [
        invocation.id
    ]
    assert await store.list_invocations(office.id, ids=[]) == []
    result_of = await store.create_result(
        AgentResult(
            office_id=office.id,
            invocation_id=invocation.id,
            sender_agent_id=agent.id,
            recipient_agent_id=agent.id,
        )
    )
    found = await store.list_results(office.id, invocation_ids=[invocation.id])
    assert [r.id for r in found] == [result_of.id]

    # a command: claimed at once, listed first (newest first), whatever came before
    command = await store.insert_command(office.id, "get_output", {}, session_id=session.session_id)
    claimed = await store.claim_next_command(office.id, "engine-1")
    assert claimed is not None and claimed.id == command.id
    newest = await store.list_commands(office.id, limit=3)
    assert newest[0].id == command.id and len(newest) == 3


async def test_whole_listings_are_complete_in_order_without_repeats(stores: Stores) -> None:
    store, office, _agent, session = await _office_with_history(stores)
    assert OLD > 2 * LIST_PAGE_ROWS  # several pages, and past the server's cap

    questions = await store.list_questions(office.id, status=None)
    assert {q.question for q in questions} == {f"old question {n}" for n in range(OLD)}
    assert len({q.id for q in questions}) == len(questions) == OLD
    stamps = [q.created_at for q in questions]
    assert stamps == sorted(stamps)

    results = await store.list_results(office.id)
    assert len({r.id for r in results}) == len(results) == OLD
    invocations = await store.list_invocations(office.id)
    assert len({i.id for i in invocations}) == len(invocations) == OLD
    in_list = await store.list_invocations(office.id, ids=[i.id for i in invocations[:250]])
    assert [i.id for i in in_list] == [i.id for i in invocations[:250]]

    commands = await store.list_commands(office.id, limit=OLD + 10)
    assert len({c.id for c in commands}) == len(commands) == OLD
    stamps = [c.created_at for c in commands]
    assert stamps == sorted(stamps, reverse=True)
    some = await store.list_commands(office.id, status="completed", limit=1234)
    assert [c.id for c in some] == [c.id for c in commands[:1234]]
    assert session.session_id in {q.session_id for q in questions}


@pytest.fixture
async def supabase_stores(tmp_path: Path) -> AsyncIterator[Stores]:
    """The supabase backend alone: the row cap is Supabase's (sqlite and postgres have none)."""
    async with open_stores("supabase", tmp_path) as factory:
        yield factory


async def test_the_emulator_caps_a_read_at_1000_rows(supabase_stores: Stores) -> None:
    """The cap itself (what a hosted project does): a plain read of 5,000 rows answers 1000."""
    _store, office, _agent, _session = await _office_with_history(supabase_stores)
    emu = supabase_stores.emulator
    assert emu is not None and emu.max_rows == 1000
    headers = {"apikey": emu.service_role_key, "Authorization": f"Bearer {emu.service_role_key}"}
    async with httpx.AsyncClient() as client:
        answer = await client.get(
            f"{emu.url}/rest/v1/user_questions",
            params={"office_id": f"eq.{office.id}", "select": "id", "limit": "5000"},
            headers=headers,
        )
    assert answer.status_code == 200
    assert len(json.loads(answer.content)) == 1000


async def test_more_than_1000_engines_are_all_listed(stores: Stores) -> None:
    """`list_engines` (an RPC on supabase, paged by started_at and engine id) past the cap."""
    store = await stores.new()
    office = await store.create_office(Office(name="many engines"))
    start = datetime.now(UTC) - timedelta(hours=1)
    rows = {
        "engines": [
            {
                "office_id": office.id,
                "engine_id": f"host-{n}",
                "status": "stopped",
                "started_at": start + timedelta(milliseconds=n // 10),
                "last_seen": start,
                "alive_until": start,
            }
            for n in range(1200)
        ]
    }
    if stores.backend == "sqlite":
        await asyncio.to_thread(insert_sqlite, stores.target, rows)
    else:
        await insert_postgres(stores.dsn, rows)
    engines = await store.list_engines(office.id)
    assert sorted(e.engine_id for e in engines) == sorted(f"host-{n}" for n in range(1200))
    assert [e.started_at for e in engines] == sorted(e.started_at for e in engines)


async def test_the_engine_holding_only_the_oldest_of_10001_claims_is_found(stores: Stores) -> None:
    """Reconcile finds every engine that holds an in-flight command: one old claim of a gone
    engine behind 10,000 newer ones of another (the pass read the newest 10,000 and missed it)."""
    from semo.engine.reconcile import _holders

    store = await stores.new()
    office = await store.create_office(Office(name="busy claims"))
    start = datetime.now(UTC) - timedelta(hours=1)
    lease = datetime.now(UTC) + timedelta(hours=1)
    rows = {
        "agent_commands": [
            {
                "id": str(uuid.uuid4()),
                "office_id": office.id,
                "command_type": "get_output",
                "payload": "{}",
                "status": "processing",
                "claimed_by": "gone-engine" if n == 0 else "busy-engine",
                "lease_expires_at": lease,
                "attempts": 1,
                "created_at": start + timedelta(milliseconds=n),
                "updated_at": start,
            }
            for n in range(10_001)
        ]
    }
    if stores.backend == "sqlite":
        await asyncio.to_thread(insert_sqlite, stores.target, rows)
    else:
        await insert_postgres(stores.dsn, rows)
    assert await _holders(store, office.id) == ["busy-engine", "gone-engine"]


async def test_open_jobs_are_listed_behind_5000_ended_ones(stores: Stores) -> None:
    """`semo jobs` (job_ops.list_jobs): the pending and running jobs, oldest first, read by
    status rather than by reading every job the office ever ran."""
    from semo.engine.office.job_ops import list_jobs

    store = await stores.new()
    office = await store.create_office(Office(name="many jobs"))
    agent = await store.upsert_agent(Agent(office_id=office.id, name="a", role="BE"))
    start = datetime.now(UTC) - timedelta(hours=1)
    statuses = ["done"] * OLD + ["running", "pending"]
    rows = {
        "jobs": [
            {
                "id": f"job-{n:05d}",
                "office_id": office.id,
                "agent_id": agent.id,
                "task": f"task {n}",
                "status": status,
                "created_at": start + timedelta(milliseconds=n // 10),
                "updated_at": start,
            }
            for n, status in enumerate(statuses)
        ]
    }
    if stores.backend == "sqlite":
        await asyncio.to_thread(insert_sqlite, stores.target, rows)
    else:
        await insert_postgres(stores.dsn, rows)
    open_jobs = await list_jobs(store, office.id, include_ended=False)
    assert [(j.id, j.status) for j in open_jobs] == [
        (f"job-{OLD:05d}", "running"),
        (f"job-{OLD + 1:05d}", "pending"),
    ]
    assert len(await list_jobs(store, office.id, include_ended=True)) == OLD + 2


async def test_a_jobs_timeline_reads_its_own_work_behind_5000_other_rows(stores: Stores) -> None:
    """`semo job show` (job_ops.job_timeline): the job's invocation and result, read by job id
    (list_invocations/list_results job_id=) rather than every invocation and result of the
    office filtered afterwards."""
    from semo.engine.office.job_ops import job_timeline
    from semo.engine.store.models import Job

    store, office, agent, _session = await _office_with_history(stores)
    job = await store.create_job(Job(office_id=office.id, agent_id=agent.id, task="build"))
    invocation = await store.create_invocation(
        AgentInvocation(
            office_id=office.id,
            caller_agent_id=agent.id,
            target_agent_id=agent.id,
            task="part",
            job_id=job.id,
        )
    )
    result = await store.create_result(
        AgentResult(
            office_id=office.id,
            invocation_id=invocation.id,
            sender_agent_id=agent.id,
            recipient_agent_id=agent.id,
            job_id=job.id,
        )
    )
    timeline = await job_timeline(store, job.id)
    assert [i.id for i in timeline.invocations] == [invocation.id]
    assert [r.id for r in timeline.results] == [result.id]
    assert await store.list_invocations(office.id, job_id="no-such-job") == []
    with pytest.raises(StoreError, match="not both"):
        await store.list_results(office.id, invocation_ids=[invocation.id], job_id=job.id)


@pytest.mark.parametrize("cap", [100, 250])
async def test_a_max_rows_lowered_while_the_store_runs_is_measured_again(
    supabase_stores: Stores, cap: int
) -> None:
    """The store measured 1000 when it opened; the project's "Max rows" goes down to `cap`:
    the next short page measures it again and the listing goes on (every row, once)."""
    store, office, _agent, _session = await _office_with_history(supabase_stores)
    assert isinstance(store, SupabaseStore) and store.page_rows == LIST_PAGE_ROWS
    store.max_rows_recheck = 0.0
    emu = supabase_stores.emulator
    assert emu is not None
    emu.set_max_rows(cap)
    questions = await store.list_questions(office.id, status=None)
    assert len({q.id for q in questions}) == len(questions) == OLD
    assert store.page_rows == cap
    commands = await store.list_commands(office.id, limit=OLD + 10)
    assert len({c.id for c in commands}) == len(commands) == OLD
    emu.set_max_rows(1000)  # raised again: measured at the next short page
    assert len(await store.list_engines(office.id)) == 0  # (an empty listing measures nothing)
    assert len(await store.list_sessions(office.id)) == 1
    assert store.page_rows == LIST_PAGE_ROWS


async def test_a_project_answering_no_rows_is_refused_when_opened(supabase_stores: Stores) -> None:
    emu = supabase_stores.emulator
    assert emu is not None
    emu.set_max_rows(0)
    with pytest.raises(StoreError, match='"Max rows"'):
        await supabase_stores.new()
