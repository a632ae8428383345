"""Database helpers: a tiny async connection pool, throw-away test databases, Supabase roles."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

#: Where test databases are created (same variable as tests/store).
ADMIN_DSN = os.environ.get("SEMO_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
SUPABASE_ROLES = ("anon", "authenticated", "service_role")


class Pool:
    """At most `size` autocommit connections, created on demand and reused."""

    def __init__(self, dsn: str, size: int = 8) -> None:
        self.dsn = dsn
        self._idle: list[psycopg.AsyncConnection] = []
        self._all: set[psycopg.AsyncConnection] = set()
        self._sem = asyncio.Semaphore(size)

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection]:
        async with self._sem:
            conn = None
            while self._idle and conn is None:
                candidate = self._idle.pop()
                if candidate.closed:
                    self._all.discard(candidate)
                else:
                    conn = candidate
            if conn is None:
                conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
                self._all.add(conn)
            try:
                yield conn
            finally:
                idle = psycopg.pq.TransactionStatus.IDLE
                if not conn.closed and conn.info.transaction_status == idle:
                    self._idle.append(conn)
                else:
                    self._all.discard(conn)
                    with contextlib.suppress(Exception):
                        await conn.close()

    async def close(self) -> None:
        for conn in list(self._all):
            with contextlib.suppress(Exception):
                await conn.close()
        self._all.clear()
        self._idle.clear()


def dsn_for_database(dsn: str, dbname: str) -> str:
    params = conninfo_to_dict(dsn)
    params["dbname"] = dbname
    return make_conninfo(**params)


def default_migrations() -> list[Path]:
    """The repository's migrations/*.sql, in name order (empty when there are none yet)."""
    root = Path(__file__).resolve().parents[3] / "migrations"
    return sorted(root.glob("*.sql")) if root.is_dir() else []


#: What a Supabase project's database has before any migration, in the parts semo relies on:
#: the API roles with Supabase's default privileges on `public`, `auth.users` with
#: `auth.uid()` / `auth.role()` / `auth.jwt()` (reading `request.jwt.claims` as Supabase's do),
#: and Realtime Authorization's `realtime.messages` (RLS on, no policy) with `realtime.topic()`.
SUPABASE_SHAPE = """
GRANT USAGE ON SCHEMA public TO anon, authenticated, service_role;
ALTER DEFAULT PRIVILEGES IN SCHEMA public
    GRANT ALL ON TABLES TO anon, authenticated, service_role;
ALTER DEFAULT PRIVILEGES IN SCHEMA public
    GRANT ALL ON SEQUENCES TO anon, authenticated, service_role;
ALTER DEFAULT PRIVILEGES IN SCHEMA public
    GRANT EXECUTE ON FUNCTIONS TO anon, authenticated, service_role;

CREATE SCHEMA IF NOT EXISTS auth;
GRANT USAGE ON SCHEMA auth TO anon, authenticated, service_role;
CREATE TABLE IF NOT EXISTS auth.users (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    aud                 text NOT NULL DEFAULT 'authenticated',
    role                text NOT NULL DEFAULT 'authenticated',
    email               text UNIQUE,
    encrypted_password  text,
    raw_app_meta_data   jsonb NOT NULL DEFAULT '{"provider": "email"}'::jsonb,
    raw_user_meta_data  jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);
GRANT ALL ON auth.users TO service_role;
CREATE OR REPLACE FUNCTION auth.uid() RETURNS uuid LANGUAGE sql STABLE AS $f$
    SELECT coalesce(nullif(current_setting('request.jwt.claim.sub', true), ''),
                    nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'sub'
    )::uuid
$f$;
CREATE OR REPLACE FUNCTION auth.role() RETURNS text LANGUAGE sql STABLE AS $f$
    SELECT coalesce(nullif(current_setting('request.jwt.claim.role', true), ''),
                    nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'role'
    )::text
$f$;
CREATE OR REPLACE FUNCTION auth.jwt() RETURNS jsonb LANGUAGE sql STABLE AS $f$
    SELECT coalesce(nullif(current_setting('request.jwt.claim', true), ''),
                    nullif(current_setting('request.jwt.claims', true), ''))::jsonb
$f$;
GRANT EXECUTE ON FUNCTION auth.uid(), auth.role(), auth.jwt()
    TO anon, authenticated, service_role;

CREATE SCHEMA IF NOT EXISTS realtime;
GRANT USAGE ON SCHEMA realtime TO anon, authenticated, service_role;
CREATE TABLE IF NOT EXISTS realtime.messages (
    id           uuid NOT NULL DEFAULT gen_random_uuid(),
    topic        text NOT NULL,
    extension    text NOT NULL,
    payload      jsonb,
    event        text,
    private      boolean DEFAULT false,
    updated_at   timestamp NOT NULL DEFAULT now(),
    inserted_at  timestamp NOT NULL DEFAULT now(),
    PRIMARY KEY (id, inserted_at)
);
ALTER TABLE realtime.messages ENABLE ROW LEVEL SECURITY;
GRANT SELECT, INSERT, UPDATE ON realtime.messages TO anon, authenticated;
GRANT ALL ON realtime.messages TO service_role;
CREATE OR REPLACE FUNCTION realtime.topic() RETURNS text LANGUAGE sql STABLE AS $f$
    SELECT nullif(current_setting('realtime.topic', true), '')::text
$f$;
GRANT EXECUTE ON FUNCTION realtime.topic() TO anon, authenticated, service_role;
"""


def prepare_supabase_database(dsn: str) -> None:
    """What a Supabase project has before any migration: an empty `supabase_realtime`
    publication, the roles `anon`, `authenticated` and `service_role` (cluster-wide, NOLOGIN;
    service_role BYPASSRLS) with Supabase's default privileges on `public` (new tables and
    functions are granted to all three: migrations must take back what they do not mean to
    give), `auth.users` with `auth.uid()`, and `realtime.messages` with `realtime.topic()`.

    Migrations add their tables to the publication "when it exists"; the emulator then emits
    changes only for the published tables, like the real Realtime server. Publications work
    at any wal_level.
    """
    _create_roles(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_publication WHERE pubname = 'supabase_realtime'"
        ).fetchone()
        if not exists:
            conn.execute("CREATE PUBLICATION supabase_realtime")
        conn.execute(SUPABASE_SHAPE)  # type: ignore[arg-type]


def _create_roles(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for role in SUPABASE_ROLES:
            options = sql.SQL("NOLOGIN BYPASSRLS" if role == "service_role" else "NOLOGIN")
            with contextlib.suppress(
                psycopg.errors.DuplicateObject, psycopg.errors.UniqueViolation
            ):
                if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone():
                    conn.execute(sql.SQL("CREATE ROLE {} {}").format(sql.Identifier(role), options))


def ensure_supabase_roles(dsn: str) -> None:
    """Create the roles `anon`, `authenticated` and `service_role` (cluster-wide, NOLOGIN) when
    missing, and grant them what Supabase grants on the public schema of this database, on
    what exists now (for tables made outside migrations, as the emulator's own tests do; a
    database migrated with semo's migrations must not be passed here: it would give back what
    migration 0007 takes away).
    """
    _create_roles(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        roles = sql.SQL(", ").join(sql.Identifier(r) for r in SUPABASE_ROLES)
        for statement in (
            "GRANT USAGE ON SCHEMA public TO {}",
            "GRANT ALL ON ALL TABLES IN SCHEMA public TO {}",
            "GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {}",
            "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO {}",
        ):
            conn.execute(sql.SQL(statement).format(roles))


@contextlib.contextmanager
def temporary_database(
    admin_dsn: str = ADMIN_DSN,
    *,
    prefix: str = "semo_emu_",
    migrations: Iterable[Path] | None = None,
    setup_sql: str | None = None,
    supabase: bool = True,
) -> Iterator[str]:
    """Create `<prefix><uuid>`, yield its DSN, drop it (WITH FORCE) afterwards.

    With `supabase` (default) the `supabase_realtime` publication is created first, then the
    `migrations` are applied in order (default: none; pass `default_migrations()` for the repo's),
    then `setup_sql`.
    """
    name = f"{prefix}{uuid.uuid4().hex}"
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = dsn_for_database(admin_dsn, name)
    try:
        if supabase:
            prepare_supabase_database(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            for path in migrations or ():
                try:
                    conn.execute(Path(path).read_text())  # type: ignore[arg-type]
                except psycopg.Error as error:
                    raise RuntimeError(f"migration {path} failed: {error}") from error
            if setup_sql:
                conn.execute(setup_sql)  # type: ignore[arg-type]
        yield dsn
    finally:
        drop_database(admin_dsn, name)


def drop_database(admin_dsn: str, name: str, timeout: float = 10.0) -> None:
    """DROP DATABASE ... WITH (FORCE), waiting for logical replication slots to go away."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        while True:
            conn.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                " WHERE database = %s AND NOT active",
                [name],
            )
            try:
                conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )
                return
            except psycopg.errors.ObjectInUse:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
