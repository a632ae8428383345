"""`migrate`: applies migrations/*.sql once each, safely when run concurrently; what they set up;
stores opened on an older schema (postgres, supabase: refused with what to do; sqlite:
upgraded)."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from semo.engine.store._shared import LEGACY_GRACE_SECONDS
from semo.engine.store.base import Store, StoreError, StoreUnavailable
from semo.engine.store.migrate import migrate, migration_files, migrations_dir
from semo.engine.store.models import AgentSession, Job, Office, UserQuestion
from semo.engine.store.postgres import PostgresStore
from semo.engine.store.sqlite import SCHEMA_VERSION, SqliteStore
from semo.engine.store.supabase import SupabaseStore
from tests.store.conftest import ADMIN_DSN, admin_connection, fresh_database
from tests.support.sqlite_downgrades import downgrade_to_4
from tests.support.supabase_emulator import SupabaseEmulator, temporary_database

REPO = Path(__file__).resolve().parents[2]
TABLES = [
    "offices",
    "agents",
    "agent_sessions",
    "agent_commands",
    "agent_command_results",
    "user_questions",
    "agent_invocations",
    "agent_results",
    "jobs",
    "engines",
    "job_events",
]
ALL = [p.name for p in migration_files()]


async def fetch(dsn: str, sql: str, params: object = None) -> list[tuple]:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute(sql, params)  # type: ignore[arg-type]
        return await cur.fetchall()


def test_the_repo_migrations_folder_is_found(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("SEMO_MIGRATIONS_DIR", raising=False)
    assert migrations_dir() == REPO / "migrations"
    assert ALL and ALL[0] == "0001_core.sql" and sorted(ALL) == ALL
    monkeypatch.setenv("SEMO_MIGRATIONS_DIR", str(tmp_path))
    assert migrations_dir() == tmp_path


async def test_applies_each_migration_once() -> None:
    async with fresh_database() as dsn:
        assert await migrate(dsn) == ALL
        assert await migrate(dsn) == []
        rows = await fetch(dsn, "select name, checksum, applied_at from semo_migrations order by 1")
        assert [r[0] for r in rows] == ALL
        assert all(len(r[1]) == 64 and r[2] is not None for r in rows)
        tables = await fetch(
            dsn, "select tablename from pg_tables where schemaname = 'public' order by 1"
        )
        assert set(TABLES) <= {t[0] for t in tables}


async def test_concurrent_migrations_are_safe() -> None:
    async with fresh_database() as dsn:
        results = await asyncio.gather(*(migrate(dsn) for _ in range(4)))
        applied = [name for result in results for name in result]
        assert sorted(applied) == ALL  # each file applied by exactly one of them
        assert [r[0] for r in await fetch(dsn, "select name from semo_migrations")] == ALL


async def test_a_failing_migration_leaves_nothing_behind(tmp_path: Path) -> None:
    for path in migration_files():
        shutil.copy(path, tmp_path / path.name)
    bad = tmp_path / "9999_bad.sql"
    bad.write_text("create table semo_half_done (x int);\nselect 1 / 0;\n")
    async with fresh_database() as dsn:
        with pytest.raises(StoreError, match=r"9999_bad\.sql failed.*division by zero"):
            await migrate(dsn, folder=tmp_path)
        assert [r[0] for r in await fetch(dsn, "select name from semo_migrations")] == ALL
        assert await fetch(dsn, "select to_regclass('semo_half_done')") == [(None,)]
        bad.write_text("create table semo_half_done (x int);\n")
        assert await migrate(dsn, folder=tmp_path) == ["9999_bad.sql"]


async def test_unreachable_database_is_unavailable() -> None:
    with pytest.raises(StoreUnavailable, match="cannot connect"):
        await migrate("postgresql://postgres:hunter2@127.0.0.1:1/semo", connect_timeout=2)


async def test_row_level_security_is_enabled_and_keyed_on_office() -> None:
    role = f"semo_rls_{uuid.uuid4().hex[:12]}"
    admin = await admin_connection()
    await admin.execute(f'create role "{role}" nologin')
    try:
        async with fresh_database() as dsn:
            await migrate(dsn)
            rows = await fetch(
                dsn,
                "select relname, relrowsecurity from pg_class"
                " where relname = any(%s) and relkind = 'r'",
                (TABLES,),
            )
            assert sorted(rows) == sorted((t, True) for t in TABLES)
            policies = await fetch(dsn, "select tablename from pg_policies")
            # members read every table (0007); operators also insert commands, answer questions
            assert sorted(p[0] for p in policies) == sorted(
                [*TABLES, "office_members", "agent_commands", "user_questions"]
            )
            member = str(uuid.uuid4())

            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
                # as the owner (engine, service role): everything, RLS bypassed
                await conn.execute(
                    "insert into offices (id, name) values ('A', 'a'), ('B', 'b');"
                    "insert into agent_commands (id, office_id, command_type, session_id)"
                    " values ('ca', 'A', 'get_output', 's'), ('cb', 'B', 'get_output', 's');"
                    "insert into agent_command_results (command_id, success)"
                    " values ('ca', true), ('cb', true);"
                    f"insert into office_members values ('A', '{member}', 'operator');"
                    f'grant usage on schema public to "{role}";'
                    f'grant select, insert, update on all tables in schema public to "{role}";'
                    # what 0007 grants `authenticated` (its policies call these)
                    f'grant execute on function semo_member_role(text) to "{role}";'
                )

                async def visible(claims: dict[str, str] | None) -> dict[str, list[str]]:
                    async with conn.transaction(force_rollback=True):
                        await conn.execute(f'set local role "{role}"')
                        if claims is not None:
                            await conn.execute(
                                "select set_config('request.jwt.claims', %s, true)",
                                (json.dumps(claims),),
                            )
                        seen = {}
                        for table, column in (
                            ("offices", "id"),
                            ("agent_commands", "id"),
                            ("agent_command_results", "command_id"),
                        ):
                            cur = await conn.execute(
                                f"select {column} from {table} order by 1"  # type: ignore[arg-type]
                            )
                            seen[table] = [r[0] for r in await cur.fetchall()]
                        return seen

                # an operator of A (migration 0007: members by auth.uid(), the JWT's sub)
                assert await visible({"sub": member}) == {
                    "offices": ["A"],
                    "agent_commands": ["ca"],
                    "agent_command_results": ["ca"],
                }
                # the office_id claim of 0001 no longer grants anything
                assert (await visible({"office_id": "B"}))["agent_commands"] == []
                assert await visible(None) == {
                    "offices": [],
                    "agent_commands": [],
                    "agent_command_results": [],
                }
                with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level"):
                    async with conn.transaction():
                        await conn.execute(f'set local role "{role}"')
                        await conn.execute(
                            "select set_config('request.jwt.claims', %s, true)",
                            (json.dumps({"sub": member}),),
                        )
                        await conn.execute(
                            "insert into agent_commands (office_id, command_type)"
                            " values ('B', 'run_job')"
                        )
    finally:
        await admin.execute(f'drop role if exists "{role}"')
        await admin.close()


async def test_tables_join_the_supabase_realtime_publication_when_it_exists() -> None:
    async with fresh_database() as dsn:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await conn.execute("create publication supabase_realtime")
        await migrate(dsn)
        rows = await fetch(
            dsn, "select tablename from pg_publication_tables where pubname = 'supabase_realtime'"
        )
        assert {"agent_commands", "user_questions"} <= {r[0] for r in rows}
        identity = await fetch(
            dsn,
            "select relname, relreplident from pg_class"
            " where relname in ('agent_commands', 'user_questions')",
        )
        assert sorted(identity) == [("agent_commands", "f"), ("user_questions", "f")]


async def test_plain_postgres_without_the_publication_is_fine() -> None:
    async with fresh_database() as dsn:
        assert await migrate(dsn) == ALL
        assert await fetch(dsn, "select pubname from pg_publication") == []


async def test_postgres_store_asks_for_migration_0004(tmp_path: Path) -> None:
    for name in ALL[:3]:
        (tmp_path / name).write_text((REPO / "migrations" / name).read_text())
    async with fresh_database() as dsn:
        assert await migrate(dsn, folder=tmp_path) == ALL[:3]
        with pytest.raises(StoreError, match=r"older semo schema.*semo migrate"):
            await PostgresStore(dsn).open()
        assert await migrate(dsn) == ALL[3:]
        async with PostgresStore(dsn):
            pass


async def test_postgres_store_asks_for_the_migrations_it_lacks(tmp_path: Path) -> None:
    """A database migrated by an older semo (0001 only) is refused with what to do; after
    `migrate`, 0002 has added its columns to the rows already there."""
    (tmp_path / ALL[0]).write_text((REPO / "migrations" / ALL[0]).read_text())
    async with fresh_database() as dsn:
        assert await migrate(dsn, folder=tmp_path) == [ALL[0]]
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await conn.execute(
                "insert into offices (id, name) values ('o', 'o');"
                "insert into jobs (id, office_id, agent_id, task) values ('j', 'o', 'a', 't')"
            )
        with pytest.raises(StoreError, match=r"older semo schema.*semo migrate"):
            await PostgresStore(dsn).open()
        assert await migrate(dsn) == ALL[1:]
        async with PostgresStore(dsn) as store:
            job = await store.get_job("j")
            assert job.engine_id is None and job.task == "t"


def _downgrade_to_v3(path: Path) -> None:
    """Turn a current sqlite file into what semo with schema version 3 created."""
    downgrade_to_4(path)
    conn = sqlite3.connect(path)
    try:
        conn.executescript("DROP TABLE semo_meta; PRAGMA user_version = 3;")
    finally:
        conn.close()


def _downgrade_to_v2(path: Path) -> None:
    """Turn a current sqlite file into what semo with schema version 2 created."""
    _downgrade_to_v3(path)
    conn = sqlite3.connect(path)
    try:
        conn.executescript("DROP TABLE engines; PRAGMA user_version = 2;")
    finally:
        conn.close()


def _downgrade_to_v1(path: Path) -> None:
    """Turn a current sqlite file into what semo with schema version 1 created."""
    _downgrade_to_v2(path)
    conn = sqlite3.connect(path)
    try:
        conn.executescript(
            "DROP INDEX jobs_running_engine_idx; DROP INDEX user_questions_session_idx;"
            "ALTER TABLE jobs DROP COLUMN engine_id;"
            "ALTER TABLE user_questions DROP COLUMN cancel_reason;"
            "ALTER TABLE user_questions DROP COLUMN cancelled_at;"
            "PRAGMA user_version = 1;"
        )
    finally:
        conn.close()


async def test_sqlite_store_upgrades_a_version_1_file(tmp_path: Path) -> None:
    path = tmp_path / "semo.db"
    async with SqliteStore(path) as store:
        office = await store.create_office(Office(name="o"))
        job = await store.create_job(Job(office_id=office.id, agent_id="a", task="t"))
    _downgrade_to_v1(path)
    # two processes opening the old file at once: one upgrades it, the other finds it done
    stores = [SqliteStore(path), SqliteStore(path)]
    await asyncio.gather(*(s.open() for s in stores))
    try:
        assert await stores[1].get_job(job.id) == job
        running = await stores[0].update_job(job.id, status="running", engine_id="e1")
        assert running.engine_id == "e1"
        question = await stores[1].create_question(
            UserQuestion(office_id=office.id, agent_id="a", question="?")
        )
        assert (await stores[0].cancel_question(question.id, "why")).cancel_reason == "why"
    finally:
        for store in stores:
            await store.close()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 10
    finally:
        conn.close()


async def test_supabase_store_asks_for_the_migrations_it_lacks() -> None:
    with temporary_database(ADMIN_DSN, migrations=[REPO / "migrations" / ALL[0]]) as dsn:
        async with SupabaseEmulator(dsn) as emulator:
            store = SupabaseStore(emulator.url, emulator.service_role_key)
            with pytest.raises(StoreError, match=r"older semo schema.*semo migrate"):
                await store.open()


async def _legacy_rows(store: Store) -> str:
    """What engines of a semo without heartbeats left: a live session, a running job and a
    claim each (engines old-session, old-job, old-claim), and an ended session; the office."""
    office = await store.create_office(Office(name="o"))
    for engine, status in (("old-session", "ready"), ("gone", "terminated")):
        await store.upsert_session(
            AgentSession(office_id=office.id, agent_id="a", engine_id=engine, status=status)
        )
    job = await store.create_job(Job(office_id=office.id, agent_id="a", task="t"))
    await store.update_job(job.id, status="running", engine_id="old-job")
    await store.insert_command(office.id, "run_job", {"job_id": job.id})
    await store.claim_next_command(office.id, "old-claim")
    return office.id


async def _check_legacy_engines(store: Store, office_id: str) -> None:
    """Each engine that held something got a heartbeat alive for the grace period; an engine
    that held nothing (it has no row) keeps the sessions it starts after the upgrade too."""
    engines = {e.engine_id: e for e in await store.list_engines(office_id)}
    assert set(engines) == {"old-session", "old-job", "old-claim"}
    for row in engines.values():
        assert row.alive and row.status == "running"
        assert row.alive_until - row.last_seen == timedelta(seconds=LEGACY_GRACE_SECONDS)
    # the old engine's session is still its own during the grace period
    [session] = await store.list_sessions(office_id)
    await store.insert_command(office_id, "get_output", session_id=session.session_id)
    assert await store.claim_next_command(office_id, "new-engine") is None
    # so is the session an old engine idle at the upgrade starts afterwards
    idle = await store.upsert_session(
        AgentSession(office_id=office_id, agent_id="a", engine_id="old-idle", status="ready")
    )
    command = await store.insert_command(office_id, "get_output", session_id=idle.session_id)
    assert await store.claim_next_command(office_id, "new-engine") is None
    assert (await store.get_command(command.id)).status == "pending"
    ended = await store.end_engine(
        office_id, "old-idle", session_reason="r", command_error="c", job_reason="j"
    )
    assert not ended.dead
    assert (await store.get_session(idle.session_id)).status == "ready"


async def test_sqlite_store_upgrades_a_version_2_file_with_heartbeats(tmp_path: Path) -> None:
    path = tmp_path / "semo.db"
    async with SqliteStore(path) as store:
        office_id = await _legacy_rows(store)
    _downgrade_to_v2(path)
    async with SqliteStore(path) as store:
        await _check_legacy_engines(store, office_id)
        assert (await store.record_heartbeat(office_id, "new", dead_after=1)).alive


async def test_sqlite_store_upgrades_a_version_3_file(tmp_path: Path) -> None:
    """A file a semo with heartbeats but no record of its upgrade wrote: the grace is counted
    from its first heartbeat row (written when it was upgraded, or started after)."""
    path = tmp_path / "semo.db"
    async with SqliteStore(path) as store:
        office = await store.create_office(Office(name="o"))
        first = await store.record_heartbeat(office.id, "new", dead_after=60, starting=True)
    _downgrade_to_v3(path)
    async with SqliteStore(path) as store:
        idle = await store.upsert_session(
            AgentSession(office_id=office.id, agent_id="a", engine_id="old-idle", status="ready")
        )
        await store.insert_command(office.id, "get_output", session_id=idle.session_id)
        assert await store.claim_next_command(office.id, "new") is None
    conn = sqlite3.connect(path)
    try:
        [(until,)] = conn.execute(
            "SELECT value FROM semo_meta WHERE key = 'heartbeat_grace_until'"
        ).fetchall()
    finally:
        conn.close()
    grace = datetime.fromisoformat(until) - first.started_at
    assert abs(grace - timedelta(seconds=LEGACY_GRACE_SECONDS)) < timedelta(milliseconds=1)


async def test_a_new_sqlite_file_gives_no_grace(tmp_path: Path) -> None:
    """No semo from before heartbeats ever wrote to a new file: no row means dead at once."""
    async with SqliteStore(tmp_path / "semo.db") as store:
        office = await store.create_office(Office(name="o"))
        ghost = await store.upsert_session(
            AgentSession(office_id=office.id, agent_id="a", engine_id="ghost", status="ready")
        )
        command = await store.insert_command(office.id, "get_output", session_id=ghost.session_id)
        assert await store.claim_next_command(office.id, "new") is None
        assert (await store.get_command(command.id)).status == "failed"


async def test_migration_0003_gives_engines_from_before_heartbeats_a_grace(
    tmp_path: Path,
) -> None:
    for name in ALL[:2]:
        (tmp_path / name).write_text((REPO / "migrations" / name).read_text())
    async with fresh_database() as dsn:
        assert await migrate(dsn, folder=tmp_path) == ALL[:2]
        with pytest.raises(StoreError, match=r"older semo schema.*semo migrate"):
            await PostgresStore(dsn).open()
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await conn.execute(
                "insert into offices (id, name) values ('o', 'o');"
                "insert into agent_sessions (office_id, agent_id, engine_id, status) values"
                " ('o', 'a', 'old-session', 'ready'), ('o', 'a', 'gone', 'terminated');"
                "insert into jobs (id, office_id, agent_id, task, status, engine_id)"
                " values ('j', 'o', 'a', 't', 'running', 'old-job');"
                "insert into agent_commands (office_id, command_type, payload, status, claimed_by)"
                " values ('o', 'run_job', '{\"job_id\": \"j\"}', 'processing', 'old-claim')"
            )
        assert await migrate(dsn) == ALL[2:]
        async with PostgresStore(dsn) as store:
            await _check_legacy_engines(store, "o")


@pytest.mark.parametrize("applied", [2, 3])
async def test_supabase_store_asks_for_the_latest_migrations(applied: int) -> None:
    with temporary_database(
        ADMIN_DSN, migrations=[REPO / "migrations" / n for n in ALL[:applied]]
    ) as dsn:
        async with SupabaseEmulator(dsn) as emulator:
            store = SupabaseStore(emulator.url, emulator.service_role_key)
            with pytest.raises(StoreError, match=r"older semo schema.*semo migrate"):
                await store.open()


#: what a migrated database holds, whatever the order it was migrated in (no row data)
SCHEMA_QUERIES = [
    "select p.proname, pg_get_function_identity_arguments(p.oid), pg_get_functiondef(p.oid),"
    " coalesce(p.proacl::text, '') from pg_proc p"
    " where p.pronamespace = current_schema()::regnamespace order by 1, 2",
    "select table_name, column_name, data_type, coalesce(column_default, ''), is_nullable"
    " from information_schema.columns where table_schema = current_schema() order by 1, 2",
    "select tablename, indexname, indexdef from pg_indexes"
    " where schemaname = current_schema() order by 1, 2",
    "select conrelid::regclass::text, conname, pg_get_constraintdef(oid) from pg_constraint"
    " where connamespace = current_schema()::regnamespace order by 1, 2",
    "select tablename, policyname, cmd, coalesce(qual, ''), coalesce(with_check, ''),"
    " roles::text from pg_policies where schemaname = current_schema() order by 1, 2",
    "select event_object_table, trigger_name, event_manipulation, action_statement"
    " from information_schema.triggers where trigger_schema = current_schema()"
    " order by 1, 2, 3",
    "select relname, relkind::text, coalesce(relacl::text, '') from pg_class"
    " where relnamespace = current_schema()::regnamespace order by 1",
]


async def _schema(dsn: str) -> list[list[tuple]]:
    return [await fetch(dsn, sql) for sql in SCHEMA_QUERIES]


@pytest.mark.parametrize("supabase", [False, True], ids=["postgres", "supabase-shaped"])
async def test_every_upgrade_path_ends_in_the_same_schema(tmp_path: Path, supabase: bool) -> None:
    """A database migrated by each earlier semo (up to 0001, 0002, ...), then by this one, ends
    with exactly the functions, grants, columns, indexes, constraints, policies and triggers of
    a database migrated at once (0009 replaces semo_claim_next, 0010 four job functions)."""
    with temporary_database(ADMIN_DSN, supabase=supabase) as fresh:
        assert await migrate(fresh) == ALL
        expected = await _schema(fresh)
    assert any("semo_claim_next_except" in row[2] for row in expected[0])
    for applied in range(1, len(ALL)):
        folder = tmp_path / f"upto_{applied}"
        folder.mkdir()
        for name in ALL[:applied]:
            (folder / name).write_text((REPO / "migrations" / name).read_text())
        with temporary_database(ADMIN_DSN, supabase=supabase) as dsn:
            assert await migrate(dsn, folder=folder) == ALL[:applied]
            assert await migrate(dsn) == ALL[applied:]
            assert await _schema(dsn) == expected, f"migrated up to {ALL[applied - 1]} first"


async def test_one_claim_body_behind_every_claim_name() -> None:
    """semo_claim_next (any number of skipped types, or the three arguments of semo 0008 and
    older) and semo_claim_next_except (semo 0008's engines) are the same claim: 0009 made
    semo_claim_next a wrapper over the claim of 0008."""
    async with fresh_database() as dsn:
        await migrate(dsn)
        [(definition,)] = await fetch(dsn, "select pg_get_functiondef('semo_claim_next'::regproc)")
        assert "semo_claim_next_except(" in definition and "skip locked" not in definition
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await conn.execute("insert into offices (id, name) values ('o', 'o')")
            for kind in ("run_job", "cancel", "get_output"):
                await conn.execute(
                    "insert into agent_commands (office_id, command_type, payload)"
                    " values ('o', %s, '{}')",
                    (kind,),
                )
                await asyncio.sleep(0.002)  # created_at orders them
        claims = [
            "select command_type from semo_claim_next('o', 'e1', 30, '{run_job}')",
            "select command_type from semo_claim_next_except('o', 'e1', 30, '{run_job}')",
            "select command_type from semo_claim_next('o', 'e1', 30)",
        ]
        assert [await fetch(dsn, sql) for sql in claims] == [
            [("cancel",)],
            [("get_output",)],
            [("run_job",)],
        ]
