"""Who may do what, on Postgres shaped like a Supabase project (roles anon, authenticated,
service_role with Supabase's default privileges, auth.users / auth.uid(), realtime.messages),
after `semo migrate` (migration 0007).

Each statement runs as a PostgREST request would: `SET LOCAL ROLE <the JWT's role>` with
`request.jwt.claims` set, in a transaction rolled back afterwards. The matrix:

- operator of A: reads A; inserts pending commands into A; answers A's pending questions
  (UPDATE); creates and cancels A's jobs (semo_create_job, semo_cancel_job); no engine work;
- viewer of A: reads A, nothing else;
- operator of B, a signed-in user of no office, a token with the old `office_id` claim: see
  nothing of A, change nothing;
- anon: refused everywhere (no privilege), semo_migrations included;
- service_role: everything, engine work included (the engine's key).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import psycopg.errors
import pytest
from psycopg.rows import dict_row

from semo.engine.store.migrate import migrate, migration_files
from tests.store.conftest import ADMIN_DSN, admin_connection_check
from tests.support.supabase_emulator import default_migrations, temporary_database

TABLES = (
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
    "office_members",
)


@dataclass
class Office:
    id: str
    agent: str
    session: str
    command: str
    done_command: str
    question: str
    job: str


@dataclass
class World:
    dsn: str
    a: Office
    b: Office
    users: dict[str, str]  # name -> auth.users id


def _seed_office(conn: psycopg.Connection[Any], name: str) -> Office:
    office = str(uuid.uuid4())
    agent, session, command, done, question, job = (str(uuid.uuid4()) for _ in range(6))
    conn.execute("insert into offices (id, name) values (%s, %s)", (office, name))
    conn.execute(
        "insert into agents (id, office_id, name, role) values (%s, %s, 'be', 'BE')",
        (agent, office),
    )
    conn.execute(
        "insert into agent_sessions (session_id, office_id, agent_id, status, engine_id)"
        " values (%s, %s, %s, 'ready', 'engine-1')",
        (session, office, agent),
    )
    conn.execute(
        "insert into agent_commands (id, office_id, session_id, command_type, payload)"
        " values (%s, %s, %s, 'get_output', '{}'), (%s, %s, %s, 'get_output', '{}')",
        (command, office, session, done, office, session),
    )
    conn.execute("update agent_commands set status = 'completed' where id = %s", (done,))
    conn.execute(
        "insert into agent_command_results (command_id, success, result) values (%s, true, '{}')",
        (done,),
    )
    conn.execute(
        "insert into user_questions (id, office_id, agent_id, session_id, question)"
        " values (%s, %s, %s, %s, 'go on?')",
        (question, office, agent, session),
    )
    conn.execute(
        "insert into agent_invocations (office_id, caller_agent_id, target_agent_id, task)"
        " values (%s, %s, %s, 't')",
        (office, agent, agent),
    )
    conn.execute(
        "insert into agent_results (office_id, sender_agent_id, recipient_agent_id)"
        " values (%s, %s, %s)",
        (office, agent, agent),
    )
    conn.execute(
        "insert into jobs (id, office_id, agent_id, task) values (%s, %s, %s, 'build')",
        (job, office, agent),
    )
    conn.execute(
        "insert into job_events (job_id, office_id, step) values (%s, %s, 'created')",
        (job, office),
    )
    conn.execute(
        "insert into engines (office_id, engine_id, alive_until)"
        " values (%s, 'engine-1', now() + interval '1 hour')",
        (office,),
    )
    return Office(office, agent, session, command, done, question, job)


@pytest.fixture(scope="module")
def world() -> Any:
    asyncio.run(admin_connection_check())
    with temporary_database(ADMIN_DSN) as dsn:
        asyncio.run(migrate(dsn))
        with psycopg.connect(dsn, autocommit=True) as conn:
            a, b = _seed_office(conn, "A"), _seed_office(conn, "B")
            users = {}
            for name in ("operator_a", "viewer_a", "operator_b", "stranger"):
                row = conn.execute(
                    "insert into auth.users (email) values (%s) returning id", (f"{name}@x.test",)
                ).fetchone()
                assert row is not None
                users[name] = str(row[0])
            conn.execute(
                "insert into office_members (office_id, user_id, role) values"
                " (%s, %s, 'operator'), (%s, %s, 'viewer'), (%s, %s, 'operator')",
                (a.id, users["operator_a"], a.id, users["viewer_a"], b.id, users["operator_b"]),
            )
        yield World(dsn, a, b, users)


def claims_of(world: World, who: str) -> dict[str, Any]:
    if who == "anon":
        return {"role": "anon"}
    if who == "service_role":
        return {"role": "service_role"}
    if who == "office_claim":
        return {"role": "authenticated", "office_id": world.a.id}
    return {"role": "authenticated", "sub": world.users[who], "aud": "authenticated"}


@contextlib.asynccontextmanager
async def as_user(world: World, who: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """A transaction running as `who` would through PostgREST; rolled back at the end."""
    claims = claims_of(world, who)
    connect = psycopg.AsyncConnection.connect(world.dsn, row_factory=dict_row)
    async with await connect as conn, conn.transaction(force_rollback=True):
        await conn.execute(
            "select set_config('request.jwt.claims', %s, true),"
            " set_config('request.jwt.claim.sub', %s, true),"
            " set_config('request.jwt.claim.role', %s, true)",
            (json.dumps(claims), str(claims.get("sub", "")), claims["role"]),
        )
        await conn.execute(f'set local role "{claims["role"]}"')
        yield conn


async def outcome(world: World, who: str, sql: str, params: Any = None) -> str | int:
    """How many rows the statement returned (or changed), or the SQLSTATE that refused it."""
    try:
        async with as_user(world, who) as conn:
            cur = await conn.execute(sql, params)
            if cur.description is not None:
                return len(await cur.fetchall())
            return cur.rowcount
    except psycopg.Error as error:
        return error.sqlstate or "?"


DENIED = "42501"  # insufficient_privilege: no grant, or a row a policy refuses
MEMBERS = ("operator_a", "viewer_a")
OUTSIDERS = ("operator_b", "stranger", "office_claim")


@pytest.mark.parametrize("table", TABLES)
async def test_members_read_their_office_and_nobody_else_does(world: World, table: str) -> None:
    column = "id" if table == "offices" else "office_id"
    if table == "agent_command_results":
        sql = (
            "select r.* from agent_command_results r join agent_commands c"
            " on c.id = r.command_id where c.office_id = %s"
        )
    else:
        sql = f"select * from {table} where {column} = %s"
    for who in (*MEMBERS, "service_role"):
        assert await outcome(world, who, sql, (world.a.id,)) >= 1, who  # type: ignore[operator]
    for who in OUTSIDERS:
        assert await outcome(world, who, sql, (world.a.id,)) == 0, who
    assert await outcome(world, "anon", sql, (world.a.id,)) == DENIED
    # what a member of A reads of B: nothing
    for who in MEMBERS:
        assert await outcome(world, who, sql, (world.b.id,)) == 0, who


async def test_semo_migrations_is_the_service_roles_alone(world: World) -> None:
    for who in ("anon", *MEMBERS, *OUTSIDERS):
        assert await outcome(world, who, "select * from semo_migrations") == DENIED, who
        assert await outcome(world, who, "delete from semo_migrations") == DENIED, who
    assert await outcome(world, "service_role", "select * from semo_migrations") == len(
        migration_files()
    )


def insert_command(office: Office, **extra: Any) -> tuple[str, tuple[Any, ...]]:
    columns = ["office_id", "session_id", "command_type", "payload", *extra]
    values = [office.id, office.session, "send_prompt", '{"prompt": "hi"}', *extra.values()]
    marks = ", ".join("%s" for _ in columns)
    return (
        f"insert into agent_commands ({', '.join(columns)}) values ({marks}) returning id",
        tuple(values),
    )


async def test_only_operators_insert_commands_into_their_office(world: World) -> None:
    sql, params = insert_command(world.a)
    assert await outcome(world, "operator_a", sql, params) == 1
    for who in ("viewer_a", *OUTSIDERS, "anon"):
        assert await outcome(world, who, sql, params) == DENIED, who
    # an operator cannot insert a command already claimed, nor one for another office
    claimed_sql, claimed_params = insert_command(world.a, status="processing", claimed_by="me")
    assert await outcome(world, "operator_a", claimed_sql, claimed_params) == DENIED
    other_sql, other_params = insert_command(world.b)
    assert await outcome(world, "operator_a", other_sql, other_params) == DENIED
    # nor change or delete one
    for statement in (
        "update agent_commands set status = 'processing', claimed_by = 'me' where id = %s",
        "delete from agent_commands where id = %s",
    ):
        assert await outcome(world, "operator_a", statement, (world.a.command,)) == DENIED


async def test_only_operators_answer_their_offices_pending_questions(world: World) -> None:
    answer = (
        "update user_questions set status = 'answered', answer = 'yes'"
        " where id = %s returning answered_at"
    )
    assert await outcome(world, "operator_a", answer, (world.a.question,)) == 1
    # a policy hides the row from the others: nothing is updated
    for who in ("viewer_a", *OUTSIDERS):
        assert await outcome(world, who, answer, (world.a.question,)) == 0, who
    assert await outcome(world, "anon", answer, (world.a.question,)) == DENIED
    # the question's other columns are not the operator's to change; nor is un-answering
    rewrite = "update user_questions set question = 'other?' where id = %s"
    assert await outcome(world, "operator_a", rewrite, (world.a.question,)) == DENIED
    cancel = "update user_questions set status = 'cancelled' where id = %s"
    assert await outcome(world, "operator_a", cancel, (world.a.question,)) == DENIED
    assert await outcome(world, "operator_a", answer, (world.b.question,)) == 0


async def test_no_member_can_mark_an_answer_delivered(world: World) -> None:
    # migration 0008's marker is the engine's (service role): not in authenticated's grant
    mark = "update user_questions set answer_delivered_at = now() where id = %s"
    for who in ("operator_a", "viewer_a", *OUTSIDERS):
        assert await outcome(world, who, mark, (world.a.question,)) == DENIED, who
    assert await outcome(world, "anon", mark, (world.a.question,)) == DENIED
    both = (
        "update user_questions set status = 'answered', answer = 'yes',"
        " answer_delivered_at = now() where id = %s"
    )
    assert await outcome(world, "operator_a", both, (world.a.question,)) == DENIED


async def test_the_answer_time_is_set_by_the_database(world: World) -> None:
    async with as_user(world, "operator_a") as conn:
        cur = await conn.execute(
            "update user_questions set status = 'answered', answer = 'yes' where id = %s"
            " returning answered_at",
            (world.a.question,),
        )
        row = await cur.fetchone()
        assert row is not None and row["answered_at"] is not None


async def test_only_operators_create_and_cancel_jobs(world: World) -> None:
    create = "select * from semo_create_job(%s, 'be', 'write the docs')"
    async with as_user(world, "operator_a") as conn:
        job = await (await conn.execute(create, (world.a.id,))).fetchone()
        assert job is not None and job["status"] == "pending" and job["office_id"] == world.a.id
        run = await (
            await conn.execute(
                "select count(*) as n from agent_commands where payload ->> 'job_id' = %s",
                (job["id"],),
            )
        ).fetchone()
        assert run is not None and run["n"] == 1  # its run_job command
        cancelled = await (
            await conn.execute("select * from semo_cancel_job(%s, 'not needed')", (job["id"],))
        ).fetchone()
        assert cancelled is not None and cancelled["status"] == "failed"
        assert cancelled["failure_reason"] == "cancelled: not needed"
    for who in ("viewer_a", *OUTSIDERS, "anon"):
        assert await outcome(world, who, create, (world.a.id,)) == DENIED, who
        cancel = "select * from semo_cancel_job(%s, 'x')"
        assert await outcome(world, who, cancel, (world.a.job,)) == DENIED, who
    # nor write jobs directly
    direct = "update jobs set status = 'done' where id = %s"
    assert await outcome(world, "operator_a", direct, (world.a.job,)) == DENIED
    insert = "insert into jobs (office_id, agent_id, task) values (%s, %s, 't')"
    assert await outcome(world, "operator_a", insert, (world.a.id, world.a.agent)) == DENIED


ENGINE_WORK: list[tuple[str, Callable[[World], tuple[str, tuple[Any, ...]]]]] = [
    ("claim", lambda w: ("select * from semo_claim_next(%s, 'evil', 30)", (w.a.id,))),
    ("claim (old)", lambda w: ("select * from semo_claim_command(%s, 'evil', 30)", (w.a.id,))),
    (
        "complete",
        lambda w: (
            "select * from semo_complete_command(%s, 'engine-1', true, null, null)",
            (w.a.command,),
        ),
    ),
    ("renew", lambda w: ("select semo_renew_leases('engine-1', 30)", ())),
    ("recover", lambda w: ("select * from semo_recover_expired(array['get_output'])", ())),
    (
        "heartbeat",
        lambda w: ("select * from semo_record_heartbeat(%s, 'fake', 60, true)", (w.a.id,)),
    ),
    (
        "stop engine",
        lambda w: ("select * from semo_mark_engine_stopped(%s, 'engine-1')", (w.a.id,)),
    ),
    (
        "end engine",
        lambda w: (
            "select * from semo_end_engine(%s, 'engine-1', 's', 'c', 'j', false)",
            (w.a.id,),
        ),
    ),
    ("forget engines", lambda w: ("select semo_forget_engines(%s, 0)", (w.a.id,))),
    ("retry job", lambda w: ("select * from semo_retry_job(%s, 'e', 0, 'x', 'y')", (w.a.job,))),
    (
        "cancel job (engine's)",
        lambda w: ("select * from semo_request_job_cancel(%s, 'x')", (w.a.job,)),
    ),
    (
        "result row",
        lambda w: (
            "insert into agent_command_results (command_id, success) values (%s, true)",
            (w.a.command,),
        ),
    ),
    (
        "result between agents",
        lambda w: (
            "insert into agent_results (office_id, sender_agent_id, recipient_agent_id)"
            " values (%s, %s, %s)",
            (w.a.id, w.a.agent, w.a.agent),
        ),
    ),
    (
        "fake heartbeat row",
        lambda w: ("update engines set alive_until = now() where office_id = %s", (w.a.id,)),
    ),
    (
        "session",
        lambda w: (
            "update agent_sessions set status = 'terminated' where session_id = %s",
            (w.a.session,),
        ),
    ),
    ("delete office", lambda w: ("delete from offices where id = %s", (w.a.id,))),
    (
        "new question",
        lambda w: (
            "insert into user_questions (office_id, agent_id, question) values (%s, %s, 'q')",
            (w.a.id, w.a.agent),
        ),
    ),
    (
        "self-promotion",
        lambda w: (
            "insert into office_members (office_id, user_id, role) values (%s, %s, 'operator')",
            (w.a.id, w.users["viewer_a"]),
        ),
    ),
    (
        "add a member",
        lambda w: (
            "select * from semo_add_member(%s, %s, 'operator')",
            (w.a.id, w.users["operator_b"]),
        ),
    ),
    ("list members", lambda w: ("select * from semo_list_members(%s)", (w.a.id,))),
    (
        "remove a member",
        lambda w: ("select semo_remove_member(%s, %s)", (w.a.id, w.users["viewer_a"])),
    ),
    ("find a user", lambda w: ("select semo_find_user('operator_a@x.test')", ())),
    (
        "membership change",
        lambda w: ("update office_members set role = 'operator' where office_id = %s", (w.a.id,)),
    ),
]


@pytest.mark.parametrize("work", ENGINE_WORK, ids=[name for name, _ in ENGINE_WORK])
async def test_engine_work_is_the_service_roles_alone(
    world: World, work: tuple[str, Callable[[World], tuple[str, tuple[Any, ...]]]]
) -> None:
    sql, params = work[1](world)
    for who in ("operator_a", "viewer_a", *OUTSIDERS, "anon"):
        assert await outcome(world, who, sql, params) == DENIED, who
    assert await outcome(world, "service_role", sql, params) not in (DENIED, "?")


async def test_the_migration_applies_again_and_on_plain_postgres() -> None:
    """Idempotent; and a Postgres without Supabase's auth and realtime schemas takes it."""
    with temporary_database(ADMIN_DSN, supabase=False) as dsn:
        await migrate(dsn)
        path = next(p for p in default_migrations() if p.name.startswith("0007"))
        text = await asyncio.to_thread(Path(path).read_bytes)
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await conn.execute(text)
            await conn.execute(text)
            cur = await conn.execute(
                "select count(*) from pg_policies where tablename = 'agent_commands'"
            )
            row = await cur.fetchone()
            assert row is not None and row[0] == 2  # members read, operators insert


OPERATOR_FUNCTIONS = {
    "semo_user_id",
    "semo_member_role",
    "semo_topic_office",
    "semo_create_job",
    "semo_cancel_job",
}


async def test_no_semo_function_or_table_is_open_beyond_the_list(world: World) -> None:
    """Guards later migrations: a new semo_* function gets EXECUTE for anon and authenticated
    from Supabase's default privileges unless the migration ends with semo_lock_down()."""
    async with await psycopg.AsyncConnection.connect(world.dsn) as conn:
        cur = await conn.execute(
            "select p.proname, has_function_privilege('authenticated', p.oid, 'EXECUTE'),"
            " has_function_privilege('anon', p.oid, 'EXECUTE'),"
            " has_function_privilege('service_role', p.oid, 'EXECUTE')"
            " from pg_proc p where p.pronamespace = 'public'::regnamespace"
            " and p.proname like 'semo\\_%'"
        )
        rows = await cur.fetchall()
        assert {name for name, user, _, _ in rows if user} == OPERATOR_FUNCTIONS
        assert [name for name, _, anon, _ in rows if anon] == []
        assert all(service for *_, service in rows)
        cur = await conn.execute(
            "select c.relname from pg_class c where c.relnamespace = 'public'::regnamespace"
            " and c.relkind = 'r' and (has_table_privilege('anon', c.oid,"
            " 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER'))"
        )
        assert await cur.fetchall() == []
        cur = await conn.execute(
            "select c.relname from pg_class c where c.relnamespace = 'public'::regnamespace"
            " and c.relkind = 'r' and not c.relrowsecurity"
        )
        assert await cur.fetchall() == []  # every table has RLS, semo_migrations included


async def test_an_upgrade_from_0006_on_a_supabase_shaped_database(tmp_path: Path) -> None:
    """A project that ran semo before issue 16 (0001-0006, office-claim policies, Supabase's
    default privileges) takes 0007: rows kept, the claim policies gone, privileges as listed."""
    upto_0006 = tmp_path / "upto_0006"
    upto_0006.mkdir()
    for path in default_migrations():
        if path.name < "0007":
            text = await asyncio.to_thread(Path(path).read_bytes)
            await asyncio.to_thread((upto_0006 / path.name).write_bytes, text)
    with temporary_database(ADMIN_DSN) as dsn:
        assert len(await migrate(dsn, folder=upto_0006)) == 6
        with psycopg.connect(dsn, autocommit=True) as conn:
            office = _seed_office(conn, "before")
        later = [p.name for p in default_migrations() if p.name >= "0007"]
        assert await migrate(dsn) == later
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            cur = await conn.execute(
                "select (select count(*) from jobs where id = %s),"
                " (select count(*) from user_questions where id = %s),"
                " (select count(*) from pg_policies where policyname = 'semo_office_isolation'),"
                " (select count(*) from pg_policies where schemaname = 'realtime'"
                "   and policyname = 'semo_members_receive'),"
                " (select count(*) from pg_constraint"
                "   where conname = 'office_members_user_id_fkey')",
                (office.job, office.question),
            )
            assert await cur.fetchone() == (1, 1, 0, 1, 1)
            cur = await conn.execute(
                "select p.proname from pg_proc p where p.pronamespace = 'public'::regnamespace"
                " and p.proname like 'semo\\_%%'"
                " and (has_function_privilege('anon', p.oid, 'EXECUTE')"
                "      or (has_function_privilege('authenticated', p.oid, 'EXECUTE')"
                "          and p.proname <> all(%s)))",
                (sorted(OPERATOR_FUNCTIONS),),
            )
            assert await cur.fetchall() == []
