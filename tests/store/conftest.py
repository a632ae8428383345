"""Fixtures for the store tests: every conformance test runs once per backend.

- sqlite: a fresh file under tmp_path.
- postgres: a fresh database `semo_test_<uuid>` on $SEMO_TEST_POSTGRES (default
  postgresql://postgres@127.0.0.1:5432/postgres), migrated with `migrate`, dropped afterwards.
  A test fails with the reason when that server cannot be reached.
- on postgres and supabase the upgrade to heartbeats (migration 0003) is dated two hours back,
  so that, as in a new sqlite file, an engine id without a heartbeat row counts as dead
  (`Stores.date_upgrade` dates it otherwise).
- supabase: a fresh database on the same server (the `supabase_realtime` publication, then
  `migrations/*.sql`), served by the Supabase emulator (`tests/support/supabase_emulator`);
  stores are `SupabaseStore(emulator.url, service_role_key)`, and rows written around the store
  go straight to the emulator's database.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from semo.engine.store._shared import HEARTBEATS_MIGRATION, LEGACY_GRACE_SECONDS
from semo.engine.store.base import Store
from semo.engine.store.migrate import migrate
from semo.engine.store.postgres import PostgresStore
from semo.engine.store.sqlite import GRACE_KEY, SqliteStore
from semo.engine.store.supabase import SupabaseStore
from tests.support.supabase_emulator import (
    SupabaseEmulator,
    temporary_database,
)

ADMIN_DSN = os.environ.get("SEMO_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")


async def admin_connection() -> psycopg.AsyncConnection[Any]:
    try:
        return await psycopg.AsyncConnection.connect(ADMIN_DSN, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as error:
        pytest.fail(f"no Postgres at {ADMIN_DSN} (scripts/test starts one): {error}")


@asynccontextmanager
async def fresh_database() -> AsyncIterator[str]:
    """A new empty database; yields its DSN; drops it (and its connections) afterwards."""
    admin = await admin_connection()
    name = f"semo_test_{uuid.uuid4().hex}"
    try:
        await admin.execute(f'create database "{name}"')
        try:
            yield make_conninfo(ADMIN_DSN, dbname=name)
        finally:
            await admin.execute(f'drop database if exists "{name}" with (force)')
    finally:
        await admin.close()


class Stores:
    """Opens store instances on one backend's database (several, like several engines)."""

    def __init__(
        self,
        backend: str,
        target: str,
        *,
        dsn: str | None = None,
        emulator: SupabaseEmulator | None = None,
    ) -> None:
        self.backend = backend
        self.target = target  # the sqlite path, the postgres DSN or the emulator's URL
        #: the Postgres database behind the store (postgres, supabase), for rows written around it
        self.dsn = dsn if dsn is not None else target
        self.emulator = emulator
        self._opened: list[Store] = []

    def make(self, **options: Any) -> Store:
        if self.backend == "sqlite":
            return SqliteStore(self.target, **options)
        if self.backend == "supabase":
            assert self.emulator is not None
            return SupabaseStore(self.emulator.url, self.emulator.service_role_key, **options)
        return PostgresStore(self.target, **options)

    async def new(self, **options: Any) -> Store:
        store = self.make(**options)
        await store.open()
        self._opened.append(store)
        return store

    async def close_all(self) -> None:
        for store in self._opened:
            await store.close()

    async def raw_insert_command(
        self, office_id: str, command_type: str, payload: Any, session_id: str | None = None
    ) -> str:
        """Insert a row around the Store (as a web app would), skipping its validation."""
        command_id = str(uuid.uuid4())
        text = json.dumps(payload)
        if self.backend == "sqlite":
            conn = sqlite3.connect(self.target)
            try:
                with conn:
                    conn.execute(
                        "INSERT INTO agent_commands (id, office_id, session_id, command_type,"
                        " payload, created_at, updated_at) VALUES (?, ?, ?, ?, ?,"
                        " strftime('%Y-%m-%dT%H:%M:%f000+00:00', 'now'),"
                        " strftime('%Y-%m-%dT%H:%M:%f000+00:00', 'now'))",
                        (command_id, office_id, session_id, command_type, text),
                    )
            finally:
                conn.close()
        else:
            async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
                await conn.execute(
                    "insert into agent_commands (id, office_id, session_id, command_type, payload)"
                    " values (%s, %s, %s, %s, %s::jsonb)",
                    (command_id, office_id, session_id, command_type, text),
                )
        return command_id

    async def age_heartbeat(self, office_id: str, engine_id: str, seconds: float) -> None:
        """Move an engine's heartbeat `seconds` into the past (last_seen, alive_until and
        stopped_at), around the store: as if it had not beaten for that long."""
        if self.backend == "sqlite":
            await asyncio.to_thread(
                _age_sqlite_heartbeat, self.target, office_id, engine_id, seconds
            )
            return
        async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
            cur = await conn.execute(
                "update engines set last_seen = last_seen - make_interval(secs => %(s)s),"
                " alive_until = alive_until - make_interval(secs => %(s)s),"
                " stopped_at = stopped_at - make_interval(secs => %(s)s)"
                " where office_id = %(o)s and engine_id = %(e)s",
                {"s": seconds, "o": office_id, "e": engine_id},
            )
            assert cur.rowcount == 1, f"no heartbeat of {engine_id}"

    async def date_upgrade(self, seconds_ago: float) -> None:
        """As if the upgrade to heartbeats (migration 0003; sqlite: the file's upgrade to
        schema version 3) had happened `seconds_ago` seconds ago: engine ids without a
        heartbeat row count as alive until `LEGACY_GRACE_SECONDS` after it."""
        if self.backend == "sqlite":
            until = datetime.now(UTC) + timedelta(seconds=LEGACY_GRACE_SECONDS - seconds_ago)
            await asyncio.to_thread(
                _set_sqlite_meta, self.target, GRACE_KEY, until.strftime(SQLITE_TIME)
            )
            return
        async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
            cur = await conn.execute(
                "update semo_migrations set applied_at = now() - make_interval(secs => %s)"
                " where name = %s",
                (seconds_ago, HEARTBEATS_MIGRATION),
            )
            assert cur.rowcount == 1, f"no {HEARTBEATS_MIGRATION} in semo_migrations"


SQLITE_TIME = "%Y-%m-%dT%H:%M:%S.%f+00:00"


def _set_sqlite_meta(path: str, key: str, value: str) -> None:
    conn = sqlite3.connect(path)
    try:
        with conn:
            conn.execute(
                "INSERT OR REPLACE INTO semo_meta (key, value) VALUES (?, ?)", (key, value)
            )
    finally:
        conn.close()


def _age_sqlite_heartbeat(path: str, office_id: str, engine_id: str, seconds: float) -> None:
    def earlier(text: str | None) -> str | None:
        if text is None:
            return None
        moved = datetime.fromisoformat(text) - timedelta(seconds=seconds)
        return moved.strftime(SQLITE_TIME)

    conn = sqlite3.connect(path)
    try:
        with conn:
            row = conn.execute(
                "SELECT last_seen, alive_until, stopped_at FROM engines"
                " WHERE office_id = ? AND engine_id = ?",
                (office_id, engine_id),
            ).fetchone()
            assert row is not None, f"no heartbeat of {engine_id}"
            conn.execute(
                "UPDATE engines SET last_seen = ?, alive_until = ?, stopped_at = ?"
                " WHERE office_id = ? AND engine_id = ?",
                (*(earlier(v) for v in row), office_id, engine_id),
            )
    finally:
        conn.close()


@asynccontextmanager
async def emulated_supabase() -> AsyncIterator[tuple[str, SupabaseEmulator]]:
    """A fresh migrated database (DSN) served by a Supabase emulator; both gone afterwards."""
    await admin_connection_check()
    with contextlib.ExitStack() as stack:
        dsn = await asyncio.to_thread(stack.enter_context, temporary_database(ADMIN_DSN))
        try:
            await migrate(dsn)  # as `semo migrate` would, after the publication exists
            async with SupabaseEmulator(dsn) as emulator:
                yield dsn, emulator
        finally:
            await asyncio.to_thread(stack.close)


async def admin_connection_check() -> None:
    await (await admin_connection()).close()


@asynccontextmanager
async def open_stores(backend: str, tmp_path: Path) -> AsyncIterator[Stores]:
    if backend == "sqlite":
        factory = Stores("sqlite", str(tmp_path / "semo.db"))
        try:
            yield factory
        finally:
            await factory.close_all()
        return
    if backend == "supabase":
        async with emulated_supabase() as (dsn, emulator):
            factory = Stores("supabase", emulator.url, dsn=dsn, emulator=emulator)
            await factory.date_upgrade(2 * LEGACY_GRACE_SECONDS)
            try:
                yield factory
            finally:
                await factory.close_all()
        return
    async with fresh_database() as dsn:
        await migrate(dsn)
        factory = Stores("postgres", dsn)
        await factory.date_upgrade(2 * LEGACY_GRACE_SECONDS)
        try:
            yield factory
        finally:
            await factory.close_all()


@pytest.fixture(params=["sqlite", "postgres", "supabase"])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    async with open_stores(request.param, tmp_path) as factory:
        yield factory


@pytest.fixture
async def sqlite_stores(tmp_path: Path) -> AsyncIterator[Stores]:
    async with open_stores("sqlite", tmp_path) as factory:
        yield factory


@pytest.fixture
async def postgres_stores(tmp_path: Path) -> AsyncIterator[Stores]:
    async with open_stores("postgres", tmp_path) as factory:
        yield factory


@pytest.fixture
async def supabase_stores(tmp_path: Path) -> AsyncIterator[Stores]:
    async with open_stores("supabase", tmp_path) as factory:
        yield factory


@pytest.fixture
async def store(stores: Stores) -> Store:
    return await stores.new()
