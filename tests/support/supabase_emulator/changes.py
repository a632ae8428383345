"""Where the emulator's Realtime change events come from.

Two sources, chosen by ``SupabaseEmulator(change_source="auto"|"triggers"|"wal2json")``; "auto"
picks wal2json when the server runs with ``wal_level=logical`` and triggers otherwise.

``wal2json`` (what Supabase Realtime does): one *temporary* logical replication slot per emulator
instance, created on the feed's own connection (so it disappears with the emulator, even if the
process dies), polled with ``pg_logical_slot_get_changes`` (format-version 2, commit timestamps).
Values are converted to the JSON that PostgREST/Realtime produce by letting Postgres parse them
into the table's row type (``json_populate_record`` → ``to_json``).

``triggers`` (the fallback for servers with ``wal_level=replica``, such as the shared test server,
which must not be restarted): the feed installs, in schema ``_semo_emu``,
- ``slots``: one row per running emulator instance (a stand-in for a replication slot);
- ``changes``: a change log; an AFTER INSERT/UPDATE/DELETE row trigger on every captured table
  writes ``to_json(NEW)``/``to_json(OLD)`` once per registered slot, then
  ``pg_notify('_semo_emu')``;
- the feed LISTENs, and on each notification (or every `poll_interval` as a safety net) takes its
  slot's rows with ``DELETE ... RETURNING`` in id order. Rows of transactions that commit out of
  id order are still picked up (nothing is skipped by a high-water mark), like a slot, changes
  are only buffered while the emulator runs; a slot not refreshed for 60 s is purged by the next
  emulator that starts on the database.

Either way the change carries the full old row; the Realtime layer trims ``old_record`` to the
primary key unless the table has ``REPLICA IDENTITY FULL``, as the real server does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql

log = logging.getLogger(__name__)

OPS = {
    "INSERT": "INSERT",
    "UPDATE": "UPDATE",
    "DELETE": "DELETE",
    "I": "INSERT",
    "U": "UPDATE",
    "D": "DELETE",
}


@dataclass(frozen=True)
class Change:
    schema: str
    table: str
    type: str  # INSERT | UPDATE | DELETE
    record: dict[str, Any] | None
    old_record: dict[str, Any] | None
    commit_timestamp: datetime


OnChanges = Callable[[list[Change]], Awaitable[None]]


async def published_tables(
    conn: psycopg.AsyncConnection, schemas: Iterable[str], publication: str = "supabase_realtime"
) -> list[tuple[str, str]] | None:
    """Tables of `publication` in `schemas`; None when the publication does not exist."""
    row = await (
        await conn.execute(
            "SELECT puballtables FROM pg_publication WHERE pubname = %s", [publication]
        )
    ).fetchone()
    if row is None:
        return None
    if row[0]:
        query = (
            "SELECT n.nspname, c.relname FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE c.relkind IN ('r', 'p') AND n.nspname = ANY(%s)"
        )
        rows = await (await conn.execute(query, [list(schemas)])).fetchall()
    else:
        query = (
            "SELECT schemaname, tablename FROM pg_publication_tables"
            " WHERE pubname = %s AND schemaname = ANY(%s)"
        )
        rows = await (await conn.execute(query, [publication, list(schemas)])).fetchall()
    return [(s, t) for s, t in rows]


async def wal_level(conn: psycopg.AsyncConnection) -> str:
    return (await (await conn.execute("SHOW wal_level")).fetchone())[0]


class ChangeFeed:
    kind = "?"

    def __init__(self, dsn: str, on_changes: OnChanges) -> None:
        self.dsn = dsn
        self.on_changes = on_changes
        self.slot = f"semo_emu_{uuid.uuid4().hex[:16]}"
        self.captured: set[tuple[str, str]] = set()
        self.changes_read = 0
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        raise NotImplementedError

    async def capture(self, tables: Iterable[tuple[str, str]]) -> None:
        """Make sure changes of these tables reach the feed."""
        raise NotImplementedError

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5)
        self._tasks.clear()

    async def _deliver(self, changes: list[Change]) -> None:
        if not changes:
            return
        self.changes_read += len(changes)
        try:
            await self.on_changes(changes)
        except Exception:  # the feed must outlive a bad dispatch
            log.exception("change dispatch failed")


# -- triggers ---------------------------------------------------------------------------------

INSTALL_SQL = """
SELECT pg_advisory_xact_lock(hashtext('_semo_emu_install'));
CREATE SCHEMA IF NOT EXISTS _semo_emu;
CREATE TABLE IF NOT EXISTS _semo_emu.slots (
    name text PRIMARY KEY,
    seen_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS _semo_emu.changes (
    id bigserial PRIMARY KEY,
    slot text NOT NULL,
    schema_name text NOT NULL,
    table_name text NOT NULL,
    op text NOT NULL,
    record json,
    old_record json,
    commit_time timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS changes_slot_id ON _semo_emu.changes (slot, id);
CREATE OR REPLACE FUNCTION _semo_emu.capture() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO _semo_emu.changes (slot, schema_name, table_name, op, record, old_record)
    SELECT s.name, TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_OP,
           CASE WHEN TG_OP <> 'DELETE' THEN to_json(NEW) END,
           CASE WHEN TG_OP <> 'INSERT' THEN to_json(OLD) END
    FROM _semo_emu.slots s;
    IF FOUND THEN
        PERFORM pg_notify('_semo_emu', '');
    END IF;
    RETURN NULL;
END
$$;
"""

DRAIN_SQL = """
DELETE FROM _semo_emu.changes WHERE id IN (
    SELECT id FROM _semo_emu.changes WHERE slot = %s ORDER BY id LIMIT 1000
) RETURNING id, schema_name, table_name, op, record, old_record, commit_time
"""


class TriggerChangeFeed(ChangeFeed):
    kind = "triggers"

    def __init__(self, dsn: str, on_changes: OnChanges, poll_interval: float = 1.0) -> None:
        super().__init__(dsn, on_changes)
        self.poll_interval = poll_interval
        self._conn: psycopg.AsyncConnection | None = None
        self._listen: psycopg.AsyncConnection | None = None
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        self._conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
        async with self._conn.transaction():
            await self._conn.execute(INSTALL_SQL)  # type: ignore[arg-type]
            await self._conn.execute(
                "DELETE FROM _semo_emu.changes WHERE slot IN"
                " (SELECT name FROM _semo_emu.slots WHERE seen_at < now() - interval '60 seconds')"
            )
            await self._conn.execute(
                "DELETE FROM _semo_emu.slots WHERE seen_at < now() - interval '60 seconds'"
            )
            await self._conn.execute("INSERT INTO _semo_emu.slots (name) VALUES (%s)", [self.slot])
        self._listen = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
        await self._listen.execute("LISTEN _semo_emu")
        self._tasks = [
            asyncio.create_task(self._listener()),
            asyncio.create_task(self._drainer()),
            asyncio.create_task(self._keepalive()),
        ]

    async def capture(self, tables: Iterable[tuple[str, str]]) -> None:
        missing = [t for t in tables if t not in self.captured]
        if not missing:
            return
        assert self._conn is not None
        async with self._lock:
            for schema, table in missing:
                exists = await (
                    await self._conn.execute(
                        "SELECT 1 FROM pg_trigger WHERE tgname = '_semo_emu_capture'"
                        " AND tgrelid = (quote_ident(%s) || '.' || quote_ident(%s))::regclass",
                        [schema, table],
                    )
                ).fetchone()
                if not exists:
                    await self._conn.execute(
                        sql.SQL(
                            "CREATE OR REPLACE TRIGGER _semo_emu_capture"
                            " AFTER INSERT OR UPDATE OR DELETE ON {}.{}"
                            " FOR EACH ROW EXECUTE FUNCTION _semo_emu.capture()"
                        ).format(sql.Identifier(schema), sql.Identifier(table))
                    )
                self.captured.add((schema, table))

    async def stop(self) -> None:
        await super().stop()
        if self._conn is not None and not self._conn.closed:
            with contextlib.suppress(psycopg.Error):
                async with self._lock:
                    await self._conn.execute(
                        "DELETE FROM _semo_emu.slots WHERE name = %s", [self.slot]
                    )
                    await self._conn.execute(
                        "DELETE FROM _semo_emu.changes WHERE slot = %s", [self.slot]
                    )
        for conn in (self._listen, self._conn):
            if conn is not None:
                with contextlib.suppress(Exception):
                    await conn.close()

    async def _listener(self) -> None:
        assert self._listen is not None
        async for _ in self._listen.notifies():
            self._wake.set()

    async def _keepalive(self) -> None:
        while True:
            await asyncio.sleep(10)
            assert self._conn is not None
            async with self._lock:
                await self._conn.execute(
                    "UPDATE _semo_emu.slots SET seen_at = now() WHERE name = %s", [self.slot]
                )

    async def _drainer(self) -> None:
        while True:
            # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.poll_interval):
                    await self._wake.wait()
            self._wake.clear()
            while True:
                assert self._conn is not None
                async with self._lock:
                    rows = await (await self._conn.execute(DRAIN_SQL, [self.slot])).fetchall()
                rows.sort(key=lambda r: r[0])
                await self._deliver(
                    [
                        Change(schema, table, OPS[op], record, old, commit_time)
                        for _, schema, table, op, record, old, commit_time in rows
                    ]
                )
                if len(rows) < 1000:
                    break


# -- wal2json ---------------------------------------------------------------------------------


class Wal2JsonChangeFeed(ChangeFeed):
    kind = "wal2json"

    def __init__(self, dsn: str, on_changes: OnChanges, poll_interval: float = 0.02) -> None:
        super().__init__(dsn, on_changes)
        self.poll_interval = poll_interval
        self._conn: psycopg.AsyncConnection | None = None
        self._convert: psycopg.AsyncConnection | None = None
        self._json_columns: dict[tuple[str, str], set[str]] = {}

    async def start(self) -> None:
        self._conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
        level = await wal_level(self._conn)
        if level != "logical":
            await self._conn.close()
            raise RuntimeError(
                f"change_source='wal2json' needs wal_level=logical; this server has {level}"
                " (use change_source='triggers' or 'auto')"
            )
        self._convert = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
        # Some builds (Debian's) only load output plugins listed in output_plugin_libraries, a
        # setting a superuser may change for its own session.
        allowed = await (
            await self._conn.execute("SELECT current_setting('output_plugin_libraries', true)")
        ).fetchone()
        if allowed and allowed[0] is not None and "wal2json" not in allowed[0]:
            await self._conn.execute(
                "SELECT set_config('output_plugin_libraries', %s, false)",
                [f"{allowed[0]}, wal2json" if allowed[0] else "wal2json"],
            )
        await self._conn.execute(
            "SELECT pg_create_logical_replication_slot(%s, 'wal2json', true)", [self.slot]
        )
        self._tasks = [asyncio.create_task(self._poller())]

    async def capture(self, tables: Iterable[tuple[str, str]]) -> None:
        self.captured.update(tables)  # the slot sees every table; filtering happens on read

    async def stop(self) -> None:
        await super().stop()
        if self._conn is not None and not self._conn.closed:
            # the slot is temporary (closing the session drops it), but drop it now so that the
            # database can be dropped right after the emulator stops
            with contextlib.suppress(psycopg.Error):
                await self._conn.execute("SELECT pg_drop_replication_slot(%s)", [self.slot])
        for conn in (self._conn, self._convert):
            if conn is not None:
                with contextlib.suppress(Exception):
                    await conn.close()

    async def _poller(self) -> None:
        assert self._conn is not None
        options = ["format-version", "2", "include-timestamp", "1", "include-transaction", "1"]
        query = (
            "SELECT data FROM pg_logical_slot_get_changes(%s, NULL, 2000, "
            + ", ".join(["%s"] * len(options))
            + ")"
        )
        pending: list[dict[str, Any]] = []
        while True:
            rows = await (await self._conn.execute(query, [self.slot, *options])).fetchall()
            batch: list[Change] = []
            for (data,) in rows:
                message = json.loads(data)
                action = message.get("action")
                if action == "B":
                    pending = []
                elif action in ("I", "U", "D"):
                    pending.append(message)
                elif action == "C":
                    stamp = _parse_timestamp(message.get("timestamp"))
                    for item in pending:
                        change = await self._to_change(item, stamp)
                        if change is not None:
                            batch.append(change)
                    pending = []
            await self._deliver(batch)
            if len(rows) < 2000:
                await asyncio.sleep(self.poll_interval)

    async def _to_change(self, item: dict[str, Any], stamp: datetime) -> Change | None:
        key = (item["schema"], item["table"])
        if key not in self.captured:
            return None
        new = {c["name"]: c.get("value") for c in item.get("columns", [])} or None
        old = {c["name"]: c.get("value") for c in item.get("identity", [])} or None
        return Change(
            item["schema"],
            item["table"],
            OPS[item["action"]],
            await self._normalise(key, new, item.get("columns", [])),
            await self._normalise(key, old, item.get("identity", [])),
            stamp,
        )

    async def _normalise(
        self, key: tuple[str, str], values: dict[str, Any] | None, columns: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        """wal2json prints values in Postgres text form (json/jsonb as strings); let Postgres
        parse them into the row type and print them as to_json does."""
        if values is None:
            return None
        for column in columns:
            if column.get("type") in ("json", "jsonb") and isinstance(
                values.get(column["name"]), str
            ):
                with contextlib.suppress(ValueError):
                    values[column["name"]] = json.loads(values[column["name"]])
        assert self._convert is not None
        target = sql.SQL("{}.{}").format(sql.Identifier(key[0]), sql.Identifier(key[1]))
        row = await (
            await self._convert.execute(
                sql.SQL("SELECT to_json(json_populate_record(NULL::{}, %s::json))").format(target),
                [json.dumps(values)],
            )
        ).fetchone()
        full = row[0] if row else values
        return {name: full.get(name) for name in values}  # keep only the columns wal2json sent


def _parse_timestamp(text: str | None) -> datetime:
    if not text:
        return datetime.now(UTC)
    text = text.replace(" ", "T")
    if text.endswith(("+00", "-00")) or (
        len(text) > 3 and text[-3] in "+-" and text[-2:].isdigit()
    ):
        text += ":00"
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return datetime.now(UTC)
