"""One office a name and one agent a role, whatever starts at once (issue 29; every backend),
and the merge of the duplicates an older semo made (migration 0012, sqlite schema version 8)."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from pathlib import Path

import psycopg
import pytest

from semo.engine.store import sqlite as sqlite_store
from semo.engine.store.base import Store, StoreConflict, StoreError
from semo.engine.store.migrate import migrate
from semo.engine.store.models import Agent, AgentSession, Job, JobEntry, Office, UserQuestion
from semo.engine.store.postgres import PostgresStore
from semo.engine.store.sqlite import SqliteStore
from tests.store.conftest import Stores, fresh_database

REPO = Path(__file__).resolve().parents[2]
ENGINES = 10


async def test_engines_starting_at_once_share_one_office_and_one_agent_a_role(
    stores: Stores,
) -> None:
    """Ten stores (ten engines) ensure the office and upsert the same roles at once: one
    office, one agent row per role, every caller told the same ids."""
    engines = [await stores.new() for _ in range(ENGINES)]

    async def start(store: Store, n: int) -> tuple[str, dict[str, str]]:
        office = await store.ensure_office(Office(name="shop", repository=f"/clone/{n}"))
        agents = {}
        for role in ("A", "B"):
            agent = await store.upsert_agent(Agent(office_id=office.id, name=role, role=role))
            agents[role] = agent.id
        return office.id, agents

    started = await asyncio.gather(*(start(s, n) for n, s in enumerate(engines)))
    offices = await engines[0].list_offices()
    assert [o.name for o in offices] == ["shop"]
    assert {office_id for office_id, _ in started} == {offices[0].id}
    rows = await engines[0].list_agents(offices[0].id)
    assert sorted(a.role for a in rows) == ["A", "B"]
    ids = {a.role: a.id for a in rows}
    assert all(agents == ids for _, agents in started)


async def test_a_second_office_of_a_name_is_refused(store: Store) -> None:
    first = await store.ensure_office(Office(name="shop", repository="/one"))
    with pytest.raises(StoreConflict, match="shop"):
        await store.create_office(Office(name="shop"))
    again = await store.ensure_office(Office(name="shop", repository="/two"))
    assert again == first  # the first engine's row, untouched


async def test_an_agent_upserted_by_role_keeps_its_id(store: Store) -> None:
    office = await store.ensure_office(Office(name="shop"))
    first = await store.upsert_agent(Agent(office_id=office.id, name="Back", role="BE"))
    other = Agent(office_id=office.id, name="Backend", role="BE", prompt="new")
    assert other.id != first.id
    changed = await store.upsert_agent(other)
    assert changed.id == first.id and changed.created_at == first.created_at
    assert (changed.name, changed.prompt) == ("Backend", "new")
    assert [a.id for a in await store.list_agents(office.id)] == [first.id]


# -- the merge of an older semo's duplicates -------------------------------------------------


async def _split_office(store: Store) -> dict[str, str]:
    """Rows as an older semo left them after a split start: offices 'shop' x2 (each with an
    agent 'A', a job, a question, a session and an engine row; one engine id in both), and a
    second agent 'A' in the first office with a job of its own. Returns the ids."""
    ids: dict[str, str] = {}
    for n in (1, 2):
        office = await store.create_office(Office(name=f"shop-{n}"))
        agent = await store.upsert_agent(Agent(office_id=office.id, name="A", role=f"A{n}"))
        job = Job(office_id=office.id, agent_id=agent.id, task=f"task {n}")
        await store.submit_job(job, JobEntry(job_id=job.id, office_id=office.id, step="created"))
        session = AgentSession(office_id=office.id, agent_id=agent.id, engine_id="host-1")
        await store.upsert_session(session)
        question = UserQuestion(
            office_id=office.id, agent_id=agent.id, session_id=session.session_id, question="?"
        )
        await store.create_question(question)
        await store.record_heartbeat(office.id, "host-1", dead_after=60, starting=True)
        await store.record_heartbeat(office.id, f"host-only-{n}", dead_after=60, starting=True)
        ids |= {f"office{n}": office.id, f"agent{n}": agent.id, f"job{n}": job.id}
        ids |= {f"question{n}": question.id, f"session{n}": session.session_id}
    twin = await store.upsert_agent(Agent(office_id=ids["office1"], name="A'", role="A1x"))
    job = Job(office_id=ids["office1"], agent_id=twin.id, task="twin's")
    await store.submit_job(job, JobEntry(job_id=job.id, office_id=ids["office1"], step="created"))
    await store.insert_command(ids["office1"], "create_session", {"agent_id": twin.id})
    return ids | {"twin": twin.id, "twin_job": job.id}


def _duplicate(sql: list[str], ids: dict[str, str]) -> list[str]:
    """The statements that make the rows of `_split_office` duplicates (older semo's rows)."""
    return [
        *sql,
        f"update offices set name = 'shop' where id in ('{ids['office1']}', '{ids['office2']}')",
        f"update agents set role = 'A' where id in "
        f"('{ids['agent1']}', '{ids['agent2']}', '{ids['twin']}')",
    ]


async def _check_merged(store: Store, ids: dict[str, str]) -> None:
    offices = await store.list_offices()
    assert [(o.id, o.name) for o in offices] == [(ids["office1"], "shop")]
    agents = await store.list_agents(ids["office1"])
    assert [(a.id, a.role) for a in agents] == [(ids["agent1"], "A")]
    jobs = await store.list_jobs(ids["office1"])
    assert sorted(j.id for j in jobs) == sorted([ids["job1"], ids["job2"], ids["twin_job"]])
    assert {j.agent_id for j in jobs} == {ids["agent1"]}
    for job in jobs:
        assert [e.step for e in await store.list_job_entries(job.id)] == ["created"]
    questions = await store.list_questions(ids["office1"])
    assert sorted(q.id for q in questions) == sorted([ids["question1"], ids["question2"]])
    assert {q.agent_id for q in questions} == {ids["agent1"]}
    sessions = await store.list_sessions(ids["office1"])
    assert sorted(s.session_id for s in sessions) == sorted([ids["session1"], ids["session2"]])
    commands = await store.list_commands(ids["office1"])
    assert len(commands) == 4  # three run_job and the create_session
    create = next(c for c in commands if c.command_type == "create_session")
    assert create.payload["agent_id"] == ids["agent1"]
    engines = sorted(e.engine_id for e in await store.list_engines(ids["office1"]))
    assert engines == ["host-1", "host-only-1", "host-only-2"]
    # and the new rules hold from now on
    with pytest.raises(StoreConflict):
        await store.create_office(Office(name="shop"))
    again = await store.upsert_agent(Agent(office_id=ids["office1"], name="A", role="A"))
    assert again.id == ids["agent1"]


async def test_migration_0012_merges_split_offices_and_twin_agents(tmp_path: Path) -> None:
    """A database an older semo (up to 0011) split: after `semo migrate`, one office and one
    agent a role, every job, step, question, session, command and heartbeat kept."""
    older = tmp_path / "upto_0011"
    older.mkdir()
    for path in sorted((REPO / "migrations").glob("*.sql")):
        # and 0017's functions, which the store's schema check asks for
        if path.name < "0012" or path.name.startswith("0017"):
            shutil.copy(path, older / path.name)
    async with fresh_database() as dsn:
        await migrate(dsn, folder=older)
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await conn.execute(
                "create unique index offices_name_key on offices (name);"
                "create unique index agents_office_role_key on agents (office_id, role)"
            )
        store = PostgresStore(dsn)  # the schema check passes with the indexes: dropped below
        async with store:
            ids = await _split_office(store)
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            drop = ["drop index offices_name_key", "drop index agents_office_role_key"]
            for sql in _duplicate(drop, ids):
                await conn.execute(sql)
        assert (await migrate(dsn))[0] == "0012_one_office_one_agent_per_role.sql"
        async with PostgresStore(dsn) as store:
            await _check_merged(store, ids)


async def test_sqlite_version_8_merges_split_offices_and_twin_agents(tmp_path: Path) -> None:
    """A sqlite file of schema version 7 with split offices and twin agents: opening it merges
    them as migration 0012 does."""
    path = tmp_path / "semo.db"
    async with SqliteStore(path) as store:
        ids = await _split_office(store)
    conn = sqlite3.connect(path)
    try:
        with conn:
            drop = ["DROP INDEX offices_name_key", "DROP INDEX agents_office_role_key"]
            for sql in _duplicate(drop, ids):
                conn.execute(sql)
        conn.execute("PRAGMA user_version = 7")
        payloads = [json.loads(r[0]) for r in conn.execute("SELECT payload FROM agent_commands")]
        assert {"agent_id": ids["twin"]} in payloads
    finally:
        conn.close()
    async with SqliteStore(path) as store:
        await _check_merged(store, ids)


async def test_an_upgrade_that_would_orphan_rows_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A faulty upgrade step that deletes an office (foreign keys are off during an upgrade,
    so nothing cascades): the upgrade stops with an error naming the orphaned rows and the
    file keeps its version, office and commands."""
    path = tmp_path / "semo.db"
    async with SqliteStore(path) as store:
        ids = await _split_office(store)
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA user_version = 9")
        conn.commit()
    finally:
        conn.close()
    faulty = sqlite_store.AFTER_SCHEMA[9] + f"DELETE FROM offices WHERE id = '{ids['office2']}';"
    monkeypatch.setitem(sqlite_store.AFTER_SCHEMA, 9, faulty)
    with pytest.raises(StoreError, match=r"orphan rows \(.*\d+ in agent_commands.*nothing"):
        async with SqliteStore(path):
            pass
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 9
        offices = {r[0] for r in conn.execute("SELECT id FROM offices")}
        assert offices == {ids["office1"], ids["office2"]}
        assert conn.execute("SELECT count(*) FROM agent_commands").fetchone()[0] == 4
    finally:
        conn.close()
    monkeypatch.undo()
    async with SqliteStore(path) as store:
        assert len(await store.list_commands(ids["office2"])) == 1
