"""The Postgres store: one database shared by several engines.

How it works: docs/STORE.md, "The postgres backend".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import weakref
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, Literal, TypeVar

import psycopg
import psycopg.errors
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from semo.engine.store._shared import (
    MAX_ATTEMPTS,
    already_ended,
    check_dead_for,
    check_heartbeat,
    check_lease,
    check_session_status,
    claim_runnable,
    entry_of_update,
    invocation_cancelled,
    job_not_cancellable,
    new_command,
    no_heartbeat,
    question_not_pending,
    redact_dsn,
    session_ended,
    updated_job,
    utc,
)
from semo.engine.store.base import (
    DEFAULT_LEASE_SECONDS,
    LIST_PAGE_ROWS,
    JobRecovery,
    JobTakeover,
    NotFound,
    OfficeRows,
    Store,
    StoreBusy,
    StoreConflict,
    StoreError,
    StoreUnavailable,
    check_invocation_status,
    key_columns,
    no_nul,
    upsert_columns,
)
from semo.engine.store.models import (
    SAFE_TO_REPEAT,
    AgentCommand,
    AgentCommandResult,
    AgentInvocation,
    AgentResult,
    AgentSession,
    CommandStatus,
    EngineEnded,
    EngineHeartbeat,
    Job,
    JobEntry,
    JobWorkCancelled,
    Office,
    Row,
    SessionStatus,
    UserQuestion,
)

log = logging.getLogger(__name__)

CHANNEL = "semo_changes"
#: what a server or pooler says when it has no connection slot left (SQLSTATE 53300 too)
_BUSY = ("too many clients", "too many connections", "no more connections", "connection slots")
#: backoff between connection attempts the server refused for lack of slots
BUSY_BACKOFF = (0.05, 2.0)
#: seconds an operation waits for another's connection before it opens one more
GROW_AFTER = 0.25
#: operations at once that share one connection (an idle engine's poll and heartbeat): more
#: is a burst, which opens more connections
IDLE_OPERATIONS = 2
Pooler = Literal["session", "transaction"]
JSON_COLUMNS = frozenset(
    {"scope_patterns", "core_skills", "command", "payload", "result", "options", "context", "work"}
)

T = TypeVar("T")
M = TypeVar("M", bound=Row)
Conn = psycopg.AsyncConnection[dict[str, Any]]


def _params(model: Row) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in no_nul(model.model_dump()).items():
        if key in JSON_COLUMNS and value is not None:
            value = Jsonb(value)
        elif isinstance(value, datetime):
            value = utc(value)
        out[key] = value
    return out


def _insert_sql(table: str, columns: list[str]) -> str:
    names = ", ".join(columns)
    values = ", ".join(f"%({c})s" for c in columns)
    return f"insert into {table} ({names}) values ({values})"


async def _write_entry(conn: Conn, entry: JobEntry) -> dict[str, Any]:
    """Insert a timeline entry (its id given by the database) on `conn`."""
    data = _params(entry)
    del data["id"]
    cur = await conn.execute(_insert_sql("job_events", list(data)) + " returning *", data)
    return await _returned_row(cur)


async def _returned_row(cur: psycopg.AsyncCursor[dict[str, Any]]) -> dict[str, Any]:
    """The row of a statement `returning *` that always returns one (an insert, or an update
    of a row locked before)."""
    row = await cur.fetchone()
    if row is None:
        raise StoreError("the database returned no row for a write that returns one")
    return row


class PostgresStore(Store):
    backend = "postgres"

    def __init__(
        self,
        dsn: str,
        *,
        pool_size: int = 4,
        connect_timeout: float = 5.0,
        statement_timeout: float = 15.0,
        ping_interval: float = 5.0,
        prepare_threshold: int | None = 5,
        idle_seconds: float = 2.0,
        pooler: Pooler = "session",
        poll_interval: float = 0.2,
        wakeups: Literal["listen", "poll"] | None = None,
    ) -> None:
        if pool_size < 1:
            raise StoreError(f"the postgres pool needs at least 1 connection, not {pool_size}")
        if pooler not in ("session", "transaction"):
            raise StoreError(f"pooler must be 'session' or 'transaction', not {pooler!r}")
        self.where = redact_dsn(dsn)
        try:
            params: dict[str, Any] = conninfo_to_dict(dsn)
        except psycopg.Error:
            raise StoreError(
                f"not a valid Postgres URL or connection string: {self.where}"
            ) from None
        # our defaults, unless the DSN says otherwise
        defaults = {
            "connect_timeout": max(2, round(connect_timeout)),
            "keepalives": 1,
            "keepalives_idle": 10,
            "keepalives_interval": 5,
            "keepalives_count": 3,
            "tcp_user_timeout": 30_000,
            "application_name": "semo",
        }
        for key, value in defaults.items():
            params.setdefault(key, value)
        self._params = params
        self._password = str(params.get("password") or "")
        self.connect_timeout = connect_timeout
        self.statement_timeout = statement_timeout
        self.ping_interval = ping_interval
        #: behind a transaction-mode pooler: no prepared statements, no session settings, no
        #: LISTEN (wake-ups poll `semo_change_seq`)
        self.pooler: Pooler = pooler
        if pooler == "transaction" and wakeups == "listen":
            raise StoreError("a transaction-mode pooler cannot LISTEN: use wakeups = 'poll'")
        #: "listen" (LISTEN semo_changes: a connection of its own) or "poll" (semo_change_seq
        #: on the pooled connection: one connection in all while idle)
        self.wakeups = wakeups or ("poll" if pooler == "transaction" else "listen")
        self._prepare_threshold = None if pooler == "transaction" else prepare_threshold
        #: seconds a pooled connection may stay unused before it is closed (one is kept when
        #: polling: the engine's one idle connection)
        self.idle_seconds = idle_seconds
        self.poll_interval = poll_interval
        #: client-side deadline for one operation (connect + statements)
        self.operation_timeout = connect_timeout + statement_timeout + 2.0
        self._pool_size = pool_size
        self._sem = asyncio.Semaphore(pool_size)
        #: idle pooled connections and when each was given back (loop time)
        self._idle: list[Conn] = []
        self._idle_since: dict[int, float] = {}
        self._reaper: asyncio.Task[None] | None = None
        #: operations holding (or getting) a pooled connection; set when one is given back
        self._acquired = 0
        self._returned = asyncio.Event()
        #: loop time an operation last found every open connection busy
        self._crowded_at = float("-inf")
        #: connections open now (pooled and listening) and the most at once, for the budget
        self.connections = 0
        self.peak_connections = 0
        self._counted_out: weakref.WeakSet[Conn] = weakref.WeakSet()  # gone, counted once
        # polled wake-ups: the sequence's last value each office saw, a second look pending
        self._poll_base: int | None = None
        self._poll_seen: dict[str, int] = {}
        self._poll_echo: dict[str, float] = {}
        self._poll_lock = asyncio.Lock()
        self._polled: tuple[float, int] | None = None
        #: the refusal of the last connection attempt, while the server has no slot left
        self._busy: str | None = None
        self._open = False
        # wake-ups
        self._listen_task: asyncio.Task[None] | None = None
        self._listen_error: BaseException | None = None
        self._epoch = 0
        self._seqs: dict[str, int] = {}
        self._seen: dict[str, tuple[int, int]] = {}
        self._changed = asyncio.Event()

    def __repr__(self) -> str:
        return f"PostgresStore({self.where!r})"

    # -- connections -------------------------------------------------------------------------

    def _scrub(self, text: str) -> str:
        return text.replace(self._password, "***") if self._password else text

    async def _connect(self) -> Conn:
        """A new connection; StoreBusy while the server has no slot left (retried by
        `_connect_waiting`), StoreUnavailable for any other failure."""
        try:
            async with asyncio.timeout(self.connect_timeout + 1.0):
                conn = await psycopg.AsyncConnection.connect(
                    autocommit=True,
                    row_factory=dict_row,
                    prepare_threshold=self._prepare_threshold,
                    **self._params,
                )
                try:
                    if self.pooler == "session":  # a transaction pooler shares sessions
                        await conn.execute(
                            "select set_config('statement_timeout', %s, false),"
                            " set_config('idle_in_transaction_session_timeout', %s, false),"
                            " set_config('timezone', 'UTC', false)",
                            (
                                str(int(self.statement_timeout * 1000)),
                                str(int((self.statement_timeout + 30) * 1000)),
                            ),
                        )
                except BaseException:
                    await conn.close()
                    raise
        except TimeoutError:
            raise StoreUnavailable(
                f"cannot connect to {self.where}: no answer within {self.connect_timeout:g} s"
            ) from None
        except psycopg.Error as error:
            text = self._scrub(str(error).strip())
            busy = error.sqlstate == "53300" or any(b in text.lower() for b in _BUSY)
            kind = StoreBusy if busy else StoreUnavailable
            raise kind(f"cannot connect to {self.where}: {text}") from None
        self.connections += 1
        self.peak_connections = max(self.peak_connections, self.connections)
        return conn

    async def _connect_waiting(self) -> Conn:
        """`_connect`, trying again with backoff (to a second or two) while the server has no
        connection slot left: the caller's deadline bounds the wait."""
        delay, most = BUSY_BACKOFF
        while True:
            try:
                conn = await self._connect()
            except StoreBusy as error:
                self._busy = str(error)
                log.warning("semo: %s; trying again in %.2f s", error, delay)
                await asyncio.sleep(delay)
                delay = min(most, delay * 2)
            else:
                self._busy = None
                return conn

    async def _acquire(self) -> Conn:
        """A pooled connection (an idle one, else a new one); while the server has no slot
        left, waits with backoff for one to be given back or a slot to free."""
        await self._sem.acquire()
        self._acquired += 1
        try:
            delay, most = BUSY_BACKOFF
            waited = False
            while True:
                while self._idle:
                    conn = self._idle.pop()
                    self._idle_since.pop(id(conn), None)
                    if not conn.closed and not conn.broken:
                        return conn
                    self._closed(conn)
                if self._acquired > 1 and (not waited or self._acquired <= IDLE_OPERATIONS):
                    # another operation has a connection: it is back soon (a poll, a beat), so
                    # an idle engine never opens a second one for it; a burst (more than
                    # IDLE_OPERATIONS at once) opens more after GROW_AFTER
                    waited = True
                    self._crowded_at = asyncio.get_running_loop().time()
                    returned = self._returned
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(returned.wait(), GROW_AFTER)
                    continue
                try:
                    conn = await self._connect()
                except StoreBusy as error:
                    self._busy = str(error)
                    log.warning("semo: %s; trying again in %.2f s", error, delay)
                    await asyncio.sleep(delay)
                    delay = min(most, delay * 2)
                    continue
                self._busy = None
                return conn
        except BaseException:
            self._sem.release()
            self._acquired -= 1
            raise

    def _release(self, conn: Conn) -> None:
        self._sem.release()
        self._acquired -= 1
        healthy = not conn.closed and not conn.broken
        if (
            self._open
            and healthy
            and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            and len(self._idle) < self._pool_size
        ):
            self._idle.append(conn)
            self._idle_since[id(conn)] = asyncio.get_running_loop().time()
            returned, self._returned = self._returned, asyncio.Event()
            returned.set()
        else:
            self._spawn_close(conn)

    def _closed(self, conn: Conn) -> None:
        """Count `conn` as gone (once)."""
        if conn not in self._counted_out:
            self._counted_out.add(conn)
            self.connections -= 1

    def _spawn_close(self, conn: Conn) -> None:
        self._closed(conn)
        if conn.closed:
            return
        task = asyncio.get_running_loop().create_task(self._close_quietly(conn))
        task.add_done_callback(lambda _: None)

    async def _close_quietly(self, conn: Conn) -> None:
        self._closed(conn)
        with contextlib.suppress(Exception):
            async with asyncio.timeout(1.0):
                await conn.close()

    def _drop_idle(self) -> None:
        idle, self._idle = self._idle, []
        self._idle_since.clear()
        for conn in idle:
            self._spawn_close(conn)

    def _reap_idle(self) -> None:
        """Close the pooled connections unused for `idle_seconds`: a burst's connections go
        back to the server. When polling for wake-ups the most recent one stays (the one
        connection of an idle engine); when listening, the listener is that one."""
        keep = 1 if self.wakeups == "poll" else 0
        now = asyncio.get_running_loop().time()
        if now - self._crowded_at >= self.idle_seconds:  # no burst for a while: back to one
            stale = self._idle[: max(0, len(self._idle) - keep)]
        else:
            stale = [
                conn
                for conn in self._idle[: max(0, len(self._idle) - keep)]
                if now - self._idle_since.get(id(conn), now) >= self.idle_seconds
            ]
        for conn in stale:
            self._idle.remove(conn)
            self._idle_since.pop(id(conn), None)
            self._spawn_close(conn)

    async def _reap_loop(self) -> None:
        while True:
            await asyncio.sleep(max(0.05, self.idle_seconds / 2))
            self._reap_idle()

    def _map_error(
        self, error: BaseException, missing: str | None, duplicate: str | None
    ) -> StoreError:
        if isinstance(error, TimeoutError):
            if self._busy is not None:
                return StoreBusy(
                    f"no connection slot on {self.where} within {self.operation_timeout:g} s"
                    f" ({self._busy})"
                )
            return StoreUnavailable(
                f"{self.where} did not answer within {self.operation_timeout:g} s"
            )
        assert isinstance(error, psycopg.Error)
        diag = error.diag
        message = self._scrub(diag.message_primary or str(error).strip())
        if error.sqlstate == "PT404":
            return NotFound(message)
        if error.sqlstate == "PT409":
            return StoreConflict(message)
        if isinstance(error, psycopg.errors.ForeignKeyViolation):
            return NotFound(missing or message)
        if isinstance(error, psycopg.errors.UniqueViolation):
            return StoreConflict(duplicate or message)
        if isinstance(error, psycopg.errors.QueryCanceled):
            return StoreUnavailable(
                f"{self.where} did not finish within the statement timeout "
                f"({self.statement_timeout:g} s): {message}"
            )
        if isinstance(error, psycopg.errors.UndefinedTable | psycopg.errors.UndefinedFunction):
            return StoreError(f"{self.where} lacks the semo schema, run `semo migrate`: {message}")
        if isinstance(error, psycopg.OperationalError | psycopg.InterfaceError):
            return StoreUnavailable(f"lost the connection to {self.where}: {message}")
        if isinstance(error, psycopg.IntegrityError | psycopg.DataError):
            return StoreError(f"the database refused the change: {message}")
        return StoreError(f"database error from {self.where}: {message}")

    async def _op(
        self,
        fn: Callable[[Conn], Awaitable[T]],
        *,
        missing: str | None = None,
        duplicate: str | None = None,
    ) -> T:
        """Run `fn(conn)` on a pooled connection, mapping failures to StoreErrors."""
        if not self._open:
            raise StoreError("the postgres store is not open (use `async with store:`)")
        conn: Conn | None = None
        try:
            async with asyncio.timeout(self.operation_timeout):
                conn = await self._acquire()
                result = await fn(conn)
        except BaseException as error:
            if conn is not None:
                dead = conn.broken or conn.closed
                if isinstance(error, psycopg.Error | StoreError) and not dead:
                    self._release(conn)  # (closed instead if a transaction is still open)
                else:
                    # dead, or interrupted mid-statement (timeout, cancel): drop it, and the
                    # idle ones too, which a server restart or a network cut has killed as well
                    self._sem.release()
                    self._acquired -= 1
                    self._spawn_close(conn)
                    self._drop_idle()
            if isinstance(error, psycopg.Error | TimeoutError):
                raise self._map_error(error, missing, duplicate) from None
            raise
        self._release(conn)
        return result

    async def _one(self, sql: str, params: Any = None, **kw: Any) -> dict[str, Any] | None:
        async def run(conn: Conn) -> dict[str, Any] | None:
            return await (await conn.execute(sql, params)).fetchone()

        return await self._op(run, **kw)

    async def _all(self, sql: str, params: Any = None) -> list[dict[str, Any]]:
        async def run(conn: Conn) -> list[dict[str, Any]]:
            return await (await conn.execute(sql, params)).fetchall()

        return await self._op(run)

    # -- lifecycle ---------------------------------------------------------------------------

    async def open(self) -> None:
        if self._open:
            return
        self._open = True
        try:
            # a function of the latest migration: the schema is current
            row = await self._one(
                "select to_regclass('agent_commands') is not null"
                " and to_regproc('semo_claim_command') is not null as ready,"
                " to_regproc('semo_renew_command_leases') is not null"
                " and to_regproc('semo_submit_job') is not null"  # 0011
                # 0012: one agent a role, which upserts rely on
                " and to_regclass('agents_office_role_key') is not null"
                # the latest migration (0017): a job started and requeued once
                " and to_regproc('semo_requeue_job') is not null as current"
            )
            if not row or not row["ready"]:
                raise StoreError(f"{self.where} has no semo schema yet: run `semo migrate`")
            if not row["current"]:
                raise StoreError(
                    f"{self.where} has an older semo schema than this semo: run `semo migrate`"
                )
            if self.wakeups == "listen":
                await self._start_listener()
            else:
                self._poll_base = await self._change_value()
            self._reaper = asyncio.get_running_loop().create_task(
                self._reap_loop(), name="semo-postgres-reaper"
            )
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        self._open = False
        for task in (self._listen_task, self._reaper):
            if task is not None:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        self._listen_task = self._reaper = None
        self._idle_since.clear()
        idle, self._idle = self._idle, []
        for conn in idle:
            await self._close_quietly(conn)

    # -- wake-ups ----------------------------------------------------------------------------

    async def _start_listener(self) -> None:
        try:
            async with asyncio.timeout(self.operation_timeout):
                conn = await self._connect_waiting()
        except TimeoutError:
            raise self._map_error(TimeoutError(), None, None) from None
        try:
            async with asyncio.timeout(self.connect_timeout):
                await conn.execute(f"listen {CHANNEL}")
        except (psycopg.Error, TimeoutError) as error:
            await self._close_quietly(conn)
            raise StoreUnavailable(
                f"cannot listen for changes on {self.where}: {self._scrub(str(error))}"
            ) from None
        self._listen_error = None
        self._listen_task = asyncio.get_running_loop().create_task(
            self._listen(conn), name="semo-postgres-listen"
        )

    async def _listen(self, conn: Conn) -> None:
        try:
            while True:
                async for notify in conn.notifies(timeout=self.ping_interval):
                    self._note(notify.payload)
                # quiet for a while: make sure the connection is still alive
                async with asyncio.timeout(self.connect_timeout):
                    await conn.execute("select 1")
        except asyncio.CancelledError:
            raise
        except BaseException as error:
            self._listen_error = error
            log.warning("semo: stopped listening on %s: %s", self.where, self._scrub(str(error)))
        finally:
            await self._close_quietly(conn)
            self._wake()

    def _note(self, payload: str) -> None:
        try:
            office = json.loads(payload).get("office_id")
        except (ValueError, AttributeError):
            office = None
        if isinstance(office, str):
            self._seqs[office] = self._seqs.get(office, 0) + 1
        else:
            self._epoch += 1  # unknown payload: tell everybody
        self._wake()

    def _wake(self) -> None:
        event, self._changed = self._changed, asyncio.Event()
        event.set()

    async def wait_for_change(self, office_id: str, timeout: float) -> bool:
        """True when a command was inserted or re-queued, a result written or a question
        updated for the office since the store opened or the last call that returned True;
        also True once after the listening connection was re-established (changes may have
        been missed). StoreUnavailable when it cannot listen."""
        if not self._open:
            raise StoreError("the postgres store is not open (use `async with store:`)")
        if self.wakeups == "poll":
            return await self._poll_for_change(office_id, timeout)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout)
        while True:
            if self._listen_task is None or self._listen_task.done():
                error = self._listen_error
                self._listen_task = None
                try:
                    await self._start_listener()
                except StoreUnavailable as failure:
                    if error is not None:
                        raise StoreUnavailable(
                            f"{failure} (the previous connection ended: "
                            f"{self._scrub(str(error)) or type(error).__name__})"
                        ) from None
                    raise
                self._epoch += 1
            key = (self._epoch, self._seqs.get(office_id, 0))
            if key != self._seen.get(office_id, (0, 0)):
                self._seen[office_id] = key
                return True
            left = deadline - loop.time()
            if left <= 0:
                return False
            event = self._changed
            try:
                async with asyncio.timeout(left):
                    await event.wait()
            except TimeoutError:
                return False

    async def _change_value(self) -> int:
        """Where `semo_change_seq` stands (every change that notifies advances it); callers
        within half a poll interval of a read share it (one read for every waiter)."""
        async with self._poll_lock:
            now = asyncio.get_running_loop().time()
            if self._polled is not None and now - self._polled[0] < self.poll_interval / 2:
                return self._polled[1]
            row = await self._one("select last_value, is_called from semo_change_seq")
            value = int(row["last_value"]) if row and row["is_called"] else 0
            self._polled = (asyncio.get_running_loop().time(), value)
            return value

    async def _poll_for_change(self, office_id: str, timeout: float) -> bool:
        """Wake-ups without LISTEN (behind a transaction-mode pooler): True when the sequence
        moved since this office's last True (for any office: a hint), and once more a poll
        later (the change's transaction may commit after the sequence moved)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout)
        while True:
            echo = self._poll_echo.get(office_id)
            if echo is not None and loop.time() >= echo:
                del self._poll_echo[office_id]
                return True
            value = await self._change_value()
            if value != self._poll_seen.get(office_id, self._poll_base):
                self._poll_seen[office_id] = value
                self._poll_echo[office_id] = loop.time() + self.poll_interval
                return True
            left = deadline - loop.time()
            if left <= 0:
                return False
            await asyncio.sleep(min(self.poll_interval, left))

    # -- generic rows ------------------------------------------------------------------------

    async def _insert(self, table: str, model: M, duplicate: str) -> M:
        data = _params(model)
        row = await self._one(
            _insert_sql(table, list(data)) + " returning *",
            data,
            missing=f"office {getattr(model, 'office_id', '?')} not found",
            duplicate=duplicate,
        )
        return type(model).model_validate(row)

    async def _upsert(self, table: str, key: str | tuple[str, ...], model: M) -> M:
        data = _params(model)
        changes = ", ".join(f"{c} = excluded.{c}" for c in upsert_columns(list(data), key))
        keys = ", ".join(key_columns(key))
        row = await self._one(
            f"{_insert_sql(table, list(data))} on conflict ({keys}) do update set {changes}"
            " returning *",
            data,
            missing=f"office {getattr(model, 'office_id', '?')} not found",
        )
        return type(model).model_validate(row)

    async def _get(self, cls: type[M], table: str, key: str, value: str, what: str) -> M:
        row = await self._one(f"select * from {table} where {key} = %s", (value,))
        if row is None:
            raise NotFound(f"no {what} {value}")
        return cls.model_validate(row)

    async def _list(self, cls: type[M], sql: str, params: Any = None) -> list[M]:
        return [cls.model_validate(r) for r in await self._all(sql, params)]

    async def _pages(
        self,
        cls: type[M],
        select: str,
        params: dict[str, Any],
        keys: tuple[str, ...] = ("created_at", "id"),
        *,
        desc: bool = False,
        limit: int | None = None,
    ) -> list[M]:
        """Every row `select` (`select ... where ...`, named parameters) finds, or the first
        `limit`, ordered by `keys` (the last one unique), LIST_PAGE_ROWS a query: each page
        starts after the last row of the one before (keyset pagination)."""
        columns = ", ".join(keys)
        direction = " desc" if desc else ""
        order = ", ".join(f"{k}{direction}" for k in keys)
        marks = ", ".join(f"%(_after_{i})s" for i in range(len(keys)))
        after_sql = f" and ({columns}) {'<' if desc else '>'} ({marks})"
        rows: list[dict[str, Any]] = []
        after: dict[str, Any] | None = None
        while limit is None or len(rows) < limit:
            size = LIST_PAGE_ROWS if limit is None else min(LIST_PAGE_ROWS, limit - len(rows))
            args = {**params, "_size": size}
            sql = select
            if after is not None:
                sql += after_sql
                args.update({f"_after_{i}": after[k] for i, k in enumerate(keys)})
            batch = await self._all(f"{sql} order by {order} limit %(_size)s", args)
            rows.extend(batch)
            if len(batch) < size:
                break
            after = batch[-1]
        return [cls.model_validate(r) for r in rows]

    # -- offices and agents --------------------------------------------------------------------

    async def list_offices(self) -> list[Office]:
        return await self._pages(Office, "select * from offices where true", {})

    # -- sessions ----------------------------------------------------------------------------

    async def list_sessions(
        self, office_id: str, *, include_terminated: bool = False
    ) -> list[AgentSession]:
        where = "" if include_terminated else " and status <> 'terminated'"
        return await self._pages(
            AgentSession,
            f"select * from agent_sessions where office_id = %(office)s{where}",
            {"office": office_id},
            ("created_at", "session_id"),
        )

    async def set_session_status(
        self, session_id: str, status: SessionStatus, *, reason: str | None = None
    ) -> AgentSession:
        check_session_status(status)

        async def change(conn: Conn) -> dict[str, Any]:
            async with conn.transaction():
                cur = await conn.execute(
                    "select status, end_reason from agent_sessions where session_id = %s"
                    " for update",
                    (session_id,),
                )
                row = await cur.fetchone()
                if row is None:
                    raise NotFound(f"no session {session_id}")
                if row["status"] == "terminated":
                    if status == "terminated":
                        raise StoreConflict(already_ended(session_id, row["end_reason"]))
                    raise StoreConflict(
                        f"session {session_id} is terminated; it cannot become {status}"
                    )
                cur = await conn.execute(
                    """update agent_sessions
                          set status = %(status)s, last_activity_at = now(),
                              end_reason = coalesce(%(reason)s, end_reason),
                              ended_at = case when %(status)s = 'terminated'
                                              then coalesce(ended_at, now()) else ended_at end
                        where session_id = %(id)s returning *""",
                    {"status": status, "reason": no_nul(reason), "id": session_id},
                )
                changed = await _returned_row(cur)
                if status == "terminated":
                    why = session_ended(session_id, changed["end_reason"])
                    await conn.execute(
                        "update user_questions set status = 'cancelled', cancel_reason = %s,"
                        " cancelled_at = now() where session_id = %s and status = 'pending'",
                        (no_nul(why), session_id),
                    )
                return changed

        return AgentSession.model_validate(await self._op(change))

    # -- commands ----------------------------------------------------------------------------

    async def insert_command(
        self,
        office_id: str,
        command_type: str,
        payload: dict[str, Any] | None = None,
        *,
        session_id: str | None = None,
    ) -> AgentCommand:
        command = new_command(office_id, command_type, payload, session_id)
        # created_at / updated_at come from the database clock, like the leases
        row = await self._one(
            "insert into agent_commands (id, office_id, session_id, command_type, payload)"
            " values (%s, %s, %s, %s, %s) returning *",
            (command.id, office_id, session_id, command_type, Jsonb(no_nul(command.payload))),
            missing=f"office {office_id} not found",
            duplicate=f"command {command.id} already exists",
        )
        return AgentCommand.model_validate(row)

    async def list_commands(
        self, office_id: str, *, status: CommandStatus | None = None, limit: int = 100
    ) -> list[AgentCommand]:
        where = "" if status is None else " and status = %(status)s"
        return await self._pages(
            AgentCommand,
            f"select * from agent_commands where office_id = %(office)s{where}",
            {"office": office_id, "status": status},
            ("created_at", "seq"),
            desc=True,
            limit=max(0, int(limit)),
        )

    async def claim_next_command(
        self,
        office_id: str,
        engine_id: str,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        *,
        skip_types: Sequence[str] = (),
    ) -> AgentCommand | None:
        lease = check_lease(lease_seconds)

        async def claim(conn: Conn) -> dict[str, Any] | None:
            async def claim_one() -> dict[str, Any] | None:
                cur = await conn.execute(
                    "select * from semo_claim_next(%s, %s, %s, %s)",
                    (office_id, engine_id, lease, list(skip_types)),
                )
                return await cur.fetchone()

            async def reject(row: Any, problem: str) -> None:
                await conn.execute(
                    "select * from semo_complete_command(%s, %s, false, null, %s)",
                    (row["id"], engine_id, no_nul(problem)),
                )

            async with conn.transaction():
                return await claim_runnable(claim_one, reject)

        row = await self._op(claim)
        return None if row is None else AgentCommand.model_validate(row)

    async def renew_leases(
        self,
        engine_id: str,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        command_ids: Sequence[str] | None = None,
    ) -> int:
        lease = check_lease(lease_seconds)
        args: tuple[object, ...]
        if command_ids is None:
            query, args = "select semo_renew_leases(%s, %s) as renewed", (engine_id, lease)
        else:
            query = "select semo_renew_command_leases(%s, %s, %s) as renewed"
            args = (engine_id, lease, list(command_ids))
        row = await self._one(query, args)
        return int(row["renewed"]) if row else 0

    async def complete_command(
        self,
        command_id: str,
        engine_id: str,
        *,
        success: bool,
        result: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> AgentCommandResult:
        row = await self._one(
            "select * from semo_complete_command(%s, %s, %s, %s, %s)",
            (
                command_id,
                engine_id,
                success,
                None if result is None else Jsonb(no_nul(result)),
                no_nul(error),
            ),
            duplicate=f"command {command_id} already has a result",
        )
        return AgentCommandResult.model_validate(row)

    async def recover_expired(self) -> list[AgentCommand]:
        return await self._list(
            AgentCommand,
            "select * from semo_recover_expired(%s, %s)",
            (sorted(SAFE_TO_REPEAT), MAX_ATTEMPTS),
        )

    async def get_result(self, command_id: str) -> AgentCommandResult | None:
        row = await self._one(
            "select c.id as command_exists, r.* from agent_commands c"
            " left join agent_command_results r on r.command_id = c.id where c.id = %s",
            (command_id,),
        )
        if row is None:
            raise NotFound(f"command {command_id} not found")
        return None if row["id"] is None else AgentCommandResult.model_validate(row)

    # -- engines -----------------------------------------------------------------------------

    async def record_heartbeat(
        self, office_id: str, engine_id: str, *, dead_after: float, starting: bool = False
    ) -> EngineHeartbeat:
        row = await self._one(
            "select * from semo_record_heartbeat(%s, %s, %s, %s)",
            (office_id, engine_id, check_heartbeat(engine_id, dead_after), starting),
            missing=f"office {office_id} not found",
        )
        return EngineHeartbeat.model_validate(row)

    async def expire_engine(self, office_id: str, engine_id: str) -> bool:
        row = await self._one(
            "select semo_expire_engine(%s, %s) as changed", (office_id, engine_id)
        )
        return bool(row and row["changed"])

    async def mark_engine_stopped(self, office_id: str, engine_id: str) -> EngineHeartbeat:
        row = await self._one(
            "select * from semo_mark_engine_stopped(%s, %s)", (office_id, engine_id)
        )
        if row is None:
            raise NotFound(no_heartbeat(office_id, engine_id))
        return EngineHeartbeat.model_validate(row)

    async def list_engines(self, office_id: str) -> list[EngineHeartbeat]:
        return await self._pages(
            EngineHeartbeat,
            "select * from semo_list_engines(%(office)s) as e where true",
            {"office": office_id},
            ("started_at", "engine_id"),
        )

    async def end_engine(
        self,
        office_id: str,
        engine_id: str,
        *,
        session_reason: str,
        command_error: str,
        job_reason: str,
        unless_alive: bool = True,
    ) -> EngineEnded:
        row = await self._one(
            "select * from semo_end_engine(%s, %s, %s, %s, %s, %s)",
            (
                office_id,
                engine_id,
                no_nul(session_reason),
                no_nul(command_error),
                no_nul(job_reason),
                unless_alive,
            ),
        )
        return EngineEnded.model_validate({**(row or {"dead": False}), "engine_id": engine_id})

    async def forget_engines(self, office_id: str, *, dead_for: float) -> int:
        row = await self._one(
            "select semo_forget_engines(%s, %s) as forgotten",
            (office_id, check_dead_for(dead_for)),
        )
        return int(row["forgotten"]) if row else 0

    # -- questions ---------------------------------------------------------------------------

    async def mark_answer_delivered(self, question_id: str) -> bool:
        row = await self._one(
            "update user_questions set answer_delivered_at = now() where id = %(id)s"
            " and status = 'answered' and answer_delivered_at is null returning id",
            {"id": question_id},
        )
        return row is not None

    async def _office_rows(self, query: OfficeRows[M]) -> list[M]:
        """See Store._office_rows: one `select` a page (keyset pagination)."""
        model, table, office_id = query.model, query.table, query.office_id
        status, narrow, unset = query.status, query.narrow, query.unset
        where = ""
        if isinstance(status, str):
            where = " and status = %(status)s"
        elif status is not None:
            where, status = " and status = any(%(status)s)", list(status)
        if narrow is not None:
            where += f" and {narrow[0]} = any(%(narrow)s)"
        if unset is not None:
            where += f" and {unset} is null"
        params = {"office": office_id, "status": status, "narrow": narrow and narrow[1]}
        return await self._pages(
            model, f"select * from {table} where office_id = %(office)s{where}", params
        )

    async def _transition(
        self,
        table: str,
        row_id: str,
        what: str,
        sql: str,
        params: dict[str, Any],
        conflict: Callable[[dict[str, Any]], str] | None = None,
    ) -> dict[str, Any]:
        """Run a `... where id = %(id)s and status = 'pending' returning *` update; when it
        changes nothing, say why (NotFound, or StoreConflict with `conflict(current row)`)."""

        async def run(conn: Conn) -> dict[str, Any]:
            row = await (await conn.execute(sql, {**params, "id": row_id})).fetchone()
            if row is not None:
                return row
            cur = await conn.execute(f"select * from {table} where id = %s", (row_id,))
            current = await cur.fetchone()
            if current is None:
                raise NotFound(f"no {what} {row_id}")
            if conflict is not None:
                raise StoreConflict(conflict(current))
            raise StoreConflict(f"{what} {row_id} is already {current['status']}")

        return await self._op(run)

    async def _close_question(
        self, question_id: str, sets: str, params: dict[str, Any], *, answering: bool
    ) -> UserQuestion:
        row = await self._transition(
            "user_questions",
            question_id,
            "question",
            f"update user_questions set {sets} where id = %(id)s and status = 'pending'"
            " returning *",
            params,
            lambda current: question_not_pending(
                question_id, current["status"], current["cancel_reason"], answering=answering
            ),
        )
        return UserQuestion.model_validate(row)

    async def answer_question(self, question_id: str, answer: str) -> UserQuestion:
        return await self._close_question(
            question_id,
            "status = 'answered', answer = %(answer)s, answered_at = now()",
            {"answer": no_nul(answer)},
            answering=True,
        )

    async def cancel_question(self, question_id: str, reason: str) -> UserQuestion:
        return await self._close_question(
            question_id,
            "status = 'cancelled', cancel_reason = %(reason)s, cancelled_at = now()",
            {"reason": no_nul(reason)},
            answering=False,
        )

    # -- invocations, results, jobs -----------------------------------------------------------

    async def update_invocation(
        self, invocation_id: str, *, status: str, error: str | None = None
    ) -> AgentInvocation:
        check_invocation_status(status)
        row = await self._transition(
            "agent_invocations",
            invocation_id,
            "invocation",
            "update agent_invocations set status = %(status)s, error = %(error)s,"
            " updated_at = now() where id = %(id)s and status <> 'cancelled' returning *",
            {"status": status, "error": no_nul(error)},
            lambda current: invocation_cancelled(invocation_id, current["error"]),
        )
        return AgentInvocation.model_validate(row)

    async def mark_result_delivered(self, result_id: str) -> AgentResult:
        row = await self._transition(
            "agent_results",
            result_id,
            "result",
            "update agent_results set status = 'delivered', delivered_at = now()"
            " where id = %(id)s and status = 'pending' returning *",
            {},
        )
        return AgentResult.model_validate(row)

    async def _submit_job(self, job: Job, command: AgentCommand, entry: JobEntry) -> AgentCommand:
        row = await self._one(
            "select * from semo_submit_job(%s, %s, %s)",
            (
                Jsonb(no_nul(job.model_dump(mode="json"))),
                command.id,
                Jsonb(no_nul(entry_of_update(job, entry).model_dump(mode="json"))),
            ),
            missing=f"office {job.office_id} not found",
            duplicate=f"job {job.id} already exists",
        )
        return AgentCommand.model_validate(row)

    async def update_job(
        self, job_id: str, *, entry: JobEntry | None = None, **changes: Any
    ) -> Job:
        async def update(conn: Conn) -> dict[str, Any]:
            async with conn.transaction():
                cur = await conn.execute(
                    "select *, now() as db_now from jobs where id = %s for update", (job_id,)
                )
                row = await cur.fetchone()
                if row is None:
                    raise NotFound(f"no job {job_id}")
                job = updated_job(Job.model_validate(row), changes, row["db_now"])
                data = _params(job)
                sets = ", ".join(f"{k} = %({k})s" for k in data if k not in ("id", "created_at"))
                cur = await conn.execute(
                    f"update jobs set {sets} where id = %(id)s returning *", data
                )
                written = await _returned_row(cur)
                if entry is not None:
                    await _write_entry(conn, entry_of_update(job, entry))
                return written

        return Job.model_validate(await self._op(update))

    async def request_job_cancel(self, job_id: str, reason: str) -> Job:
        row = await self._transition(
            "jobs",
            job_id,
            "job",
            "select * from semo_request_job_cancel_recorded(%(id)s, %(reason)s)",
            {"reason": no_nul(reason)},
            lambda current: job_not_cancellable(Job.model_validate(current)),
        )
        return Job.model_validate(row)

    async def cancel_job_work(self, job_id: str, reason: str) -> JobWorkCancelled:
        async def cancel(conn: Conn) -> JobWorkCancelled:
            async with conn.transaction():
                cur = await conn.execute(
                    "update agent_invocations set status = 'cancelled', error = %s,"
                    " updated_at = now() where job_id = %s and status in ('pending', 'running')"
                    " returning *",
                    (no_nul(reason), job_id),
                )
                invocations = await cur.fetchall()
                cur = await conn.execute(
                    "update agent_results set status = 'cancelled', cancel_reason = %s"
                    " where job_id = %s and status = 'pending' returning *",
                    (no_nul(reason), job_id),
                )
                results = await cur.fetchall()
            return JobWorkCancelled(
                invocations=[AgentInvocation.model_validate(r) for r in invocations],
                results=[AgentResult.model_validate(r) for r in results],
            )

        return await self._op(cancel)

    async def retry_job(
        self, job_id: str, *, engine_id: str, attempts: int, failed_reason: str, reason: str
    ) -> AgentCommand | None:
        row = await self._one(
            "select * from semo_retry_job(%s, %s, %s, %s, %s)",
            (job_id, engine_id, attempts, failed_reason, no_nul(reason)),
        )
        return None if row is None else AgentCommand.model_validate(row)

    async def _recover_job(self, recovery: JobRecovery) -> Job | None:
        function = "semo_recover_job_recorded" if recovery.timeline else "semo_recover_job"
        row = await self._one(
            f"select * from {function}(%s, %s, %s, %s, %s, %s)",
            (
                recovery.job_id,
                recovery.engine_id,
                recovery.attempts,
                recovery.reason,
                recovery.retry_reason,
                recovery.unless_alive,
            ),
        )
        return None if row is None else Job.model_validate(row)

    async def _take_over_job(self, takeover: JobTakeover) -> Job | None:
        entry = takeover.entry
        step = None if entry is None else Jsonb(no_nul(entry.model_dump(mode="json")))
        row = await self._one(
            "select * from semo_take_over_job(%s, %s, %s, %s, %s)",
            (takeover.job_id, takeover.from_engine, takeover.attempts, takeover.to_engine, step),
        )
        return None if row is None else Job.model_validate(row)

    async def _start_job(self, job_id: str, engine_id: str, entry: JobEntry | None) -> Job | None:
        step = None if entry is None else Jsonb(no_nul(entry.model_dump(mode="json")))
        row = await self._one(
            "select * from semo_start_job(%s, %s, %s)", (job_id, engine_id, step)
        )  # 0017
        return None if row is None else Job.model_validate(row)

    async def _requeue_job(self, job_id: str, command_id: str, reason: str) -> AgentCommand | None:
        row = await self._one(
            "select * from semo_requeue_job(%s, %s, %s)", (job_id, command_id, reason)
        )  # 0017
        return None if row is None else AgentCommand.model_validate(row)

    async def add_job_entry(self, entry: JobEntry) -> JobEntry:
        async def add(conn: Conn) -> dict[str, Any]:
            return await _write_entry(conn, entry)

        row = await self._op(add, missing=f"no job {entry.job_id} in office {entry.office_id}")
        return JobEntry.model_validate(row)

    async def list_job_entries(self, job_id: str, *, after: int = 0) -> list[JobEntry]:
        return await self._pages(
            JobEntry,
            "select * from job_events where job_id = %(job)s and id > %(after)s",
            {"job": job_id, "after": after},
            ("id",),
        )
