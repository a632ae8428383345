"""The migrations as a hosted project runs them: by a non-superuser owner (Supabase's `postgres`
is not a superuser), on a Supabase-shaped database whose default privileges open every new
object to `anon` and `authenticated`, where realtime.messages may appear only after the first
`semo migrate` (the Realtime service creates it) and belongs to another role.

A throwaway login role owns each test's database objects: CREATE on `public`, the
`supabase_realtime` publication, read access to auth.users, and Supabase's default privileges
for its new objects; it is dropped afterwards.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from semo.engine.doctor.checks import catalog
from semo.engine.store.migrate import migrate, migration_files
from tests.support.semo_process import run_semo, semo_env
from tests.support.supabase_emulator import ADMIN_DSN, temporary_database

REALTIME_MESSAGES = """
CREATE TABLE realtime.messages (
    id uuid NOT NULL DEFAULT gen_random_uuid(), topic text NOT NULL, extension text NOT NULL,
    payload jsonb, event text, private boolean DEFAULT false,
    updated_at timestamp NOT NULL DEFAULT now(), inserted_at timestamp NOT NULL DEFAULT now(),
    PRIMARY KEY (id, inserted_at));
ALTER TABLE realtime.messages ENABLE ROW LEVEL SECURITY;
GRANT SELECT, INSERT, UPDATE ON realtime.messages TO anon, authenticated;
GRANT ALL ON realtime.messages TO service_role;
"""


@dataclass
class Hosted:
    admin: str  # the database as the superuser (what Supabase's own services do)
    owner: str  # the database as the non-superuser owner that runs `semo migrate`
    role: str
    realtime_admin: str

    def sql(self, statement: str) -> None:
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(statement.encode())


def _as(dsn: str, user: str) -> str:
    params = conninfo_to_dict(dsn)
    params["user"] = user
    return make_conninfo(**params)


@contextmanager
def hosted_database(*, owns_realtime: bool = True) -> Iterator[Hosted]:
    tag = uuid.uuid4().hex[:10]
    role, rt_admin = f"semo_owner_{tag}", f"semo_rt_admin_{tag}"
    with psycopg.connect(ADMIN_DSN, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER").format(sql.Identifier(role)))
        conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(rt_admin)))
    try:
        with temporary_database(ADMIN_DSN, prefix="semo_hosted_") as dsn:
            hosted = Hosted(dsn, _as(dsn, role), role, rt_admin)
            who, rt = sql.Identifier(role), sql.Identifier(rt_admin)
            name = sql.Identifier(str(conninfo_to_dict(dsn)["dbname"]))
            with psycopg.connect(dsn, autocommit=True) as conn:
                for statement in (
                    "GRANT CREATE ON SCHEMA public TO {who}",
                    "GRANT CREATE ON DATABASE {name} TO {who}",
                    "ALTER PUBLICATION supabase_realtime OWNER TO {who}",
                    "GRANT USAGE ON SCHEMA auth, realtime TO {who}",
                    "GRANT SELECT, REFERENCES ON auth.users TO {who}",
                    "ALTER TABLE realtime.messages OWNER TO {rt}",
                    "ALTER DEFAULT PRIVILEGES FOR ROLE {who} IN SCHEMA public"
                    " GRANT ALL ON TABLES TO anon, authenticated, service_role",
                    "ALTER DEFAULT PRIVILEGES FOR ROLE {who} IN SCHEMA public"
                    " GRANT ALL ON SEQUENCES TO anon, authenticated, service_role",
                    "ALTER DEFAULT PRIVILEGES FOR ROLE {who} IN SCHEMA public"
                    " GRANT EXECUTE ON FUNCTIONS TO anon, authenticated, service_role",
                ):
                    conn.execute(sql.SQL(statement).format(who=who, rt=rt, name=name))
                if owns_realtime:
                    conn.execute(sql.SQL("GRANT {} TO {}").format(rt, who))
            yield hosted
    finally:
        with psycopg.connect(ADMIN_DSN, autocommit=True) as conn:
            for name in (role, rt_admin):
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


def facts(dsn: str) -> dict:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("select semo_doctor_facts()").fetchone()
    assert row is not None
    return row[0]


async def test_migrations_apply_as_a_non_superuser_owner_and_twice() -> None:
    with hosted_database() as hosted:
        applied = await migrate(hosted.owner)
        assert applied == [p.name for p in migration_files()]
        assert await migrate(hosted.owner) == []
        with psycopg.connect(hosted.admin) as conn:
            owners = conn.execute(
                "select distinct tableowner from pg_tables where schemaname = 'public'"
            ).fetchall()
            superuser = conn.execute(
                "select rolsuper from pg_roles where rolname = %s", [hosted.role]
            ).fetchone()
        assert owners == [(hosted.role,)] and superuser == (False,)
        # what the doctor checks: publication, RLS, policies (the channel one included),
        # grants, replica identity
        report = catalog(facts(hosted.owner))
        assert all(check.ok for check in report), [c.line() for c in report]


async def test_a_future_semo_object_is_closed_and_the_projects_own_keep_the_defaults(
    tmp_path: Path,
) -> None:
    """A later migration that forgets `semo_lock_down()`: its table and function are not
    granted to anon, authenticated or PUBLIC; a table the project makes afterwards is, as
    Supabase's default privileges say."""
    with hosted_database() as hosted:
        await migrate(hosted.owner)
        folder = tmp_path / "migrations"
        folder.mkdir()
        for path in migration_files():
            shutil.copy(path, folder / path.name)
        (folder / "9999_future.sql").write_text(
            "create table semo_future (id integer primary key);\n"
            "create function semo_future_fn() returns integer language sql as 'select 1';\n"
        )
        assert await migrate(hosted.owner, folder=folder) == ["9999_future.sql"]
        with psycopg.connect(hosted.owner, autocommit=True) as conn:
            conn.execute("create table project_own (id integer primary key)")
            conn.execute("create function project_fn() returns integer language sql as 'select 1'")
            held = conn.execute(
                "select has_table_privilege('anon', 'semo_future', 'select'),"
                " has_table_privilege('authenticated', 'semo_future', 'insert'),"
                " has_function_privilege('anon', 'semo_future_fn()', 'execute'),"
                " has_function_privilege('authenticated', 'semo_future_fn()', 'execute'),"
                " has_table_privilege('anon', 'project_own', 'select'),"
                " has_function_privilege('anon', 'project_fn()', 'execute')"
            ).fetchone()
            public = conn.execute(
                "select exists (select 1 from pg_proc p, aclexplode(coalesce(p.proacl,"
                " acldefault('f', p.proowner))) a where p.proname = 'semo_future_fn'"
                " and a.grantee = 0)"
            ).fetchone()
        assert held == (False, False, False, False, True, True)
        assert public == (False,)


async def test_the_channel_policy_is_created_when_realtime_messages_appears() -> None:
    with hosted_database() as hosted:
        hosted.sql("DROP TABLE realtime.messages")  # Realtime has not started yet
        env = semo_env() | {"SEMO_STORE": "postgres", "SEMO_DATABASE_URL": hosted.owner}
        first = await run_semo("migrate", env=env)
        assert first.returncode == 0, first.stderr
        assert "WARNING: no private-channel policy on realtime.messages: missing:" in first.stderr
        assert "run `semo migrate` again once it does" in first.stderr

        hosted.sql(
            REALTIME_MESSAGES + f'ALTER TABLE realtime.messages OWNER TO "{hosted.realtime_admin}";'
        )
        warnings: list[str] = []
        assert await migrate(hosted.owner, warn=warnings.append) == []  # nothing to apply
        assert warnings == []
        report = catalog(facts(hosted.owner))
        assert all(check.ok for check in report), [c.line() for c in report]
        again = await run_semo("migrate", env=env)
        assert again.returncode == 0 and "WARNING" not in again.stderr


async def test_a_channel_policy_the_owner_may_not_create_is_said_loudly() -> None:
    """realtime.messages appears belonging to a role the migrating one is not a member of: each
    `semo migrate` says the policy was refused and how to create it. (Present from the start,
    such a table fails 0007 itself, whole, with "must be owner of table messages".)"""
    with hosted_database(owns_realtime=False) as hosted:
        hosted.sql("DROP TABLE realtime.messages")
        warnings: list[str] = []
        await migrate(hosted.owner, warn=warnings.append)
        assert len(warnings) == 1 and "missing: realtime.messages" in warnings[0]
        hosted.sql(
            REALTIME_MESSAGES + f'ALTER TABLE realtime.messages OWNER TO "{hosted.realtime_admin}";'
        )
        warnings.clear()
        assert await migrate(hosted.owner, warn=warnings.append) == []
        assert len(warnings) == 1
        assert "refused: must be owner of table messages" in warnings[0]
        assert "as the owner of realtime.messages" in warnings[0]
