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


def prepare_supabase_database(dsn: str) -> None:
    """What a Supabase project has before any migration: an empty `supabase_realtime` publication.

    Migrations add their tables to it "when it exists"; the emulator then emits changes only for
    the published tables, like the real Realtime server. Publications work at any wal_level.
    """
    with psycopg.connect(dsn, autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_publication WHERE pubname = 'supabase_realtime'"
        ).fetchone()
        if not exists:
            conn.execute("CREATE PUBLICATION supabase_realtime")


def ensure_supabase_roles(dsn: str) -> None:
    """Create the roles `anon`, `authenticated` and `service_role` (cluster-wide, NOLOGIN) when
    missing, and grant them what Supabase grants on the public schema of this database.

    Only needed with ``SupabaseEmulator(switch_roles=True)``, which runs each request as the role
    named in its JWT so that row-level security applies as on Supabase.
    """
    with psycopg.connect(dsn, autocommit=True) as conn:
        for role in SUPABASE_ROLES:
            options = sql.SQL("NOLOGIN BYPASSRLS" if role == "service_role" else "NOLOGIN")
            with contextlib.suppress(
                psycopg.errors.DuplicateObject, psycopg.errors.UniqueViolation
            ):
                if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone():
                    conn.execute(sql.SQL("CREATE ROLE {} {}").format(sql.Identifier(role), options))
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
