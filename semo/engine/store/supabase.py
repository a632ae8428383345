"""The Supabase store: rows through PostgREST, wake-ups through Realtime.

It uses the official `supabase` async client (2.34.1) unmodified. Needs the schema from
`migrations/`.

How it works: docs/STORE.md, "The supabase backend".
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
from postgrest.exceptions import APIError
from realtime import AsyncRealtimeChannel, AsyncRealtimeClient, RealtimeSubscribeStates
from realtime.types import RealtimePostgresChangesListenEvent as ListenEvent
from supabase import AsyncClient, AsyncClientOptions, acreate_client

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
    now,
)
from semo.engine.store.refusals import Backoff, classify, retry_after

if TYPE_CHECKING:
    from semo.engine.store.settings import StoreConfig

log = logging.getLogger(__name__)

M = TypeVar("M", bound=Row)
Build = Callable[[AsyncClient], Any]

#: the HTTP status of the last PostgREST response in this task (APIError does not carry it)
_STATUS: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "semo_supabase_status", default=None
)
#: compare-and-set updates give up after this many concurrent changes in a row
CAS_ATTEMPTS = 20
#: how many command ids -> office are remembered (to route result events)
KNOWN_COMMANDS = 100_000
#: rows of each kind read by a catch-up snapshot (at most Supabase's default "Max rows")
SNAPSHOT_ROWS = 1000
#: rows per request of a listing: below Supabase's "Max rows" (1000 by default), so that a
#: listing is read page by page (keyset pagination) and never cut short by the cap
PAGE_ROWS = LIST_PAGE_ROWS
#: a listing's order: (column, descending); the last column is unique
Keys = tuple[tuple[str, bool], ...]
OLDEST_FIRST: Keys = (("created_at", False), ("id", False))
#: ids per `in.(...)` filter (a request's URL stays a few kB long)
IN_IDS = 100
#: allowance for the difference between our clock and the database's
CLOCK_MARGIN_SECONDS = 1.0


async def _note_status(response: httpx.Response) -> None:
    _STATUS.set(response.status_code)


def _stamp(value: datetime) -> str:
    """A timestamp for a PostgREST filter: UTC with `Z` (a `+` would be decoded as a space)."""
    return utc(value).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _quoted(value: Any) -> str:
    """A value inside a PostgREST logic tree (`or=(...)`), double-quoted."""
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def _after(query: Any, keys: Keys, row: dict[str, Any]) -> Any:
    """`query` narrowed to the rows after `row` in the order of `keys` (a row-value
    comparison spelt as PostgREST's `or`: k1 > v1, or k1 = v1 and k2 > v2, ...)."""
    branches = []
    for index, (column, desc) in enumerate(keys):
        equal = [f"{k}.eq.{_quoted(row[k])}" for k, _ in keys[:index]]
        step = f"{column}.{'lt' if desc else 'gt'}.{_quoted(row[column])}"
        branches.append(f"and({','.join([*equal, step])})" if equal else step)
    return query.or_(",".join(branches))


def _json(model: Row, *, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    data = no_nul(model.model_dump(mode="json"))
    return {k: v for k, v in data.items() if k not in skip}


@dataclass
class RealtimeStats:
    """What the wake-up machinery did (for benchmarks and tests)."""

    #: realtime clients built (the first connection included) and attempts that failed
    rebuilds: int = 0
    rebuild_failures: int = 0
    #: why each rebuild happened, e.g. "the realtime socket is closed": count
    reasons: dict[str, int] = field(default_factory=dict)
    #: time.monotonic() of every SUBSCRIBED of an office channel, and of every "Subscribed to
    #: PostgreSQL" (events flow from then on)
    subscribed_at: deque[float] = field(default_factory=lambda: deque(maxlen=100_000))
    ready_at: deque[float] = field(default_factory=lambda: deque(maxlen=100_000))
    #: hints reported by wait_for_change, by cause
    events: int = 0
    resubscribed: int = 0
    catch_ups: int = 0
    timer: int = 0
    #: callback bodies that raised (caught and logged)
    callback_errors: int = 0
    #: broadcasts sent by publish_event, and those it could not send
    broadcasts: int = 0
    broadcast_failures: int = 0
    #: broadcasts not sent because they would exceed `broadcasts_per_second`
    broadcasts_over_budget: int = 0
    #: refusals by kind (permanent, rate_limited) and code, e.g. "permanent publication": count
    refusals: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class _Snapshot:
    """What an office looked like when its watch began: pending commands, commands finished
    and questions answered since the store opened (ids; at most SNAPSHOT_ROWS of each)."""

    pending: frozenset[str]
    finished: frozenset[str]
    answered: frozenset[str]

    def any(self) -> bool:
        return bool(self.pending or self.finished or self.answered)

    def news(self, later: _Snapshot) -> bool:
        return bool(
            later.pending - self.pending
            or later.finished - self.finished
            or later.answered - self.answered
        )


@dataclass
class _Watch:
    """One office that `wait_for_change` was asked about, and its channel."""

    office_id: str
    hint_at: float
    snapshot: _Snapshot
    #: changes counted for the office, and the count at the last True
    seq: int = 0
    seen: int = 0
    #: the first subscription's catch-up read has been done
    initialized: bool = False
    #: the channel of the current realtime client (None until subscribed)
    generation: int = -1
    channel: AsyncRealtimeChannel | None = None
    state: str | None = None
    state_at: float = 0.0
    subscribed_at: float = 0.0
    #: why the channel last left SUBSCRIBED (the server's reason), for classifying it
    error: str | None = None
    #: "Subscribed to PostgreSQL" seen: events flow
    ready: bool = False
    #: publish_event waits for the channel until then (time.monotonic(); 0: never again)
    publish_deadline: float | None = None


class _RealtimeProblem(Exception):
    pass


#: the office channel is private (Realtime Authorization): members of the office may join it
#: (migration 0007's policy on realtime.messages), only the service role may send on it
_PRIVATE_CHANNEL: Any = {
    "config": {
        "broadcast": {"ack": False, "self": False},
        "presence": {"key": "", "enabled": False},
        "private": True,
    }
}


class SupabaseStore(Store):
    backend = "supabase"

    def __init__(
        self,
        url: str,
        key: str,
        *,
        connect_timeout: float = 5.0,
        request_timeout: float = 15.0,
        catch_up_interval: float = 5.0,
        degraded_interval: float = 1.0,
        channel_grace: float = 0.5,
        ready_grace: float = 1.0,
        ping_interval: float = 5.0,
        ping_timeout: float = 3.0,
        max_backoff: float = 1.0,
        max_rows_recheck: float = 60.0,
        rate_limit_backoff: float = 30.0,
        refusal_retry: float = 300.0,
        broadcasts_per_second: float | None = None,
    ) -> None:
        url = (url or "").strip().rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise StoreError(
                f"SUPABASE_URL must be the project's http(s) URL (e.g. https://xyz.supabase.co),"
                f" not {url!r}"
            )
        if not key:
            raise StoreError("the supabase store needs the service-role key")
        self.url = url
        self._key = key
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        #: client-side deadline for one store operation
        self.operation_timeout = connect_timeout + request_timeout + 2.0
        self.catch_up_interval = catch_up_interval
        self.degraded_interval = degraded_interval
        self.channel_grace = channel_grace
        self.ready_grace = ready_grace
        self.ping_interval = ping_interval
        self.ping_timeout = ping_timeout
        self.max_backoff = max_backoff
        #: waits before reconnecting, by kind of refusal (semo/engine/store/refusals.py)
        self.backoff = Backoff(max_backoff, rate_limit_backoff, refusal_retry)
        self._refused = 0  # rebuilds in a row for a permanent or rate-limit refusal
        self._reported: set[str] = set()  # permanent refusals reported since the last success
        self._hint: float | None = None  # the server's Retry-After of the last refused handshake
        #: the engine's share of the project's Realtime budget: broadcasts a second, a second's
        #: worth in a burst (None: no cap)
        if broadcasts_per_second is not None and broadcasts_per_second <= 0:
            raise StoreError("broadcasts_per_second must be positive")
        self.broadcasts_per_second = broadcasts_per_second
        self._tokens = float(broadcasts_per_second or 0.0)
        self._tokens_at = time.monotonic()
        self.max_rows_recheck = max_rows_recheck
        #: rows a listing asks for a request: PAGE_ROWS, or the project's "Max rows" below it
        self.page_rows = PAGE_ROWS
        self._page_measured_at = float("-inf")
        self.stats = RealtimeStats()
        self._client: AsyncClient | None = None
        self._http: httpx.AsyncClient | None = None
        self._open = False
        # wake-ups
        self._watches: dict[str, _Watch] = {}
        self._changed = asyncio.Event()
        self._poke = asyncio.Event()
        self._rt: AsyncRealtimeClient | None = None
        self._generation = 0
        self._forced: str | None = None
        self._failures = 0
        self._last_failure_log = 0.0
        self._last_ping = 0.0
        self._supervisor: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._commands: OrderedDict[str, str] = OrderedDict()
        self._registering: dict[str, asyncio.Future[_Watch]] = {}
        self._opened_at = now()

    def __repr__(self) -> str:
        return f"SupabaseStore({self.url!r})"

    @classmethod
    def from_config(cls, config: StoreConfig) -> SupabaseStore:
        return from_config(config)

    # -- errors ------------------------------------------------------------------------------

    def _scrub(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text

    def _map_error(
        self, error: BaseException, missing: str | None, duplicate: str | None
    ) -> StoreError:
        if isinstance(error, TimeoutError | httpx.TimeoutException):
            return StoreUnavailable(
                f"{self.url} did not answer within {self.operation_timeout:g} s"
            )
        if isinstance(error, httpx.HTTPError | OSError):
            detail = self._scrub(str(error).strip()) or type(error).__name__
            return StoreUnavailable(f"cannot reach {self.url}: {detail}")
        assert isinstance(error, APIError)
        code = str(error.code or "")
        message = self._scrub(str(error.message or error.details or code or "no message"))
        status = _STATUS.get()
        if status is None and code.isdigit():
            status = int(code)
        if code == "PT404":
            return NotFound(message)
        if code == "PT409":
            return StoreConflict(message)
        if code == "23503":
            return NotFound(missing or message)
        if code == "23505":
            return StoreConflict(duplicate or message)
        if code in ("PGRST202", "PGRST205", "42P01", "42883"):
            return StoreError(f"{self.url} lacks the semo schema, run `semo migrate`: {message}")
        if code in ("PGRST204", "42703"):
            return StoreError(
                f"{self.url} has an older semo schema than this semo, run `semo migrate`: {message}"
            )
        if status in (401, 403) or code in ("PGRST301", "PGRST302", "42501"):
            return StoreError(
                f"{self.url} refused the key (use the project's service-role key as "
                f"SUPABASE_SERVICE_ROLE_KEY): {message}"
            )
        if (status is not None and status >= 500) or code.startswith(
            ("PGRST000", "PGRST001", "PGRST002", "PGRST003", "08", "53", "57")
        ):
            return StoreUnavailable(f"{self.url} is unavailable ({status or code}): {message}")
        if code.startswith(("22", "23")):
            return StoreError(f"the database refused the change: {message}")
        return StoreError(f"error from {self.url} ({code or status}): {message}")

    # -- requests ----------------------------------------------------------------------------

    def _require_client(self) -> AsyncClient:
        if not self._open or self._client is None:
            raise StoreError("the supabase store is not open (use `async with store:`)")
        return self._client

    async def _run(
        self, build: Build, *, missing: str | None = None, duplicate: str | None = None
    ) -> Any:
        """Execute the request `build(client)` returns; its data (rows, or a function's value)."""
        client = self._require_client()
        _STATUS.set(None)
        try:
            async with asyncio.timeout(self.operation_timeout):
                response = await build(client).execute()
        except (APIError, httpx.HTTPError, OSError, TimeoutError) as error:
            raise self._map_error(error, missing, duplicate) from None
        return response.data

    async def _rows(self, build: Build, **kw: Any) -> list[dict[str, Any]]:
        data = await self._run(build, **kw)
        return data if isinstance(data, list) else [] if data is None else [data]

    async def _get(self, cls: type[M], table: str, key: str, value: str, what: str) -> M:
        rows = await self._rows(lambda c: c.table(table).select("*").eq(key, value).limit(1))
        if not rows:
            raise NotFound(f"no {what} {value}")
        return cls.model_validate(rows[0])

    async def _insert(self, table: str, model: M, duplicate: str) -> M:
        rows = await self._rows(
            lambda c: c.table(table).insert(_json(model)),
            missing=f"office {getattr(model, 'office_id', '?')} not found",
            duplicate=duplicate,
        )
        return type(model).model_validate(rows[0])

    async def _upsert(self, table: str, key: str | tuple[str, ...], model: M) -> M:
        """Insert, or update the row with the key: every column but the key, id and
        created_at (as postgres does)."""
        missing = f"office {getattr(model, 'office_id', '?')} not found"
        data = _json(model)
        keys = {column: data[column] for column in key_columns(key)}
        changes = {c: data[c] for c in upsert_columns(list(data), key)}
        value = ", ".join(f"{k} {v}" for k, v in keys.items())

        def update(c: Any) -> Any:
            query = c.table(table).update(changes)
            for column, wanted in keys.items():
                query = query.eq(column, wanted)
            return query

        for _ in range(CAS_ATTEMPTS):
            rows = await self._rows(update, missing=missing)
            if rows:
                return type(model).model_validate(rows[0])
            try:
                return await self._insert(table, model, f"{value} already exists")
            except StoreConflict:
                continue  # inserted meanwhile by someone else: update it
        raise StoreConflict(f"{table} row {value} kept changing; try again")

    async def _list(self, cls: type[M], build: Build) -> list[M]:
        return [cls.model_validate(r) for r in await self._rows(build)]

    async def _pages(
        self,
        cls: type[M],
        build: Build,
        keys: Keys = OLDEST_FIRST,
        limit: int | None = None,
    ) -> list[M]:
        """Every row `build(client)` selects (or the first `limit`), in the order of `keys`,
        read PAGE_ROWS at a time: each page starts after the last row of the one before
        (keyset pagination), so neither the server's row cap nor rows inserted meanwhile make
        a listing skip or repeat a row."""
        rows: list[dict[str, Any]] = []
        after: dict[str, Any] | None = None
        while limit is None or len(rows) < limit:
            page_rows = self.page_rows
            size = page_rows if limit is None else min(page_rows, limit - len(rows))

            def page(c: AsyncClient, after: dict[str, Any] | None = after, size: int = size) -> Any:
                query = build(c)
                if after is not None:
                    query = _after(query, keys, after)
                for column, desc in keys:
                    query = query.order(column, desc=desc)
                return query.limit(size)

            batch = await self._rows(page)
            rows.extend(batch)
            if len(batch) < size and not (batch and await self._cut_by_cap(len(batch))):
                break
            after = batch[-1]
        return [cls.model_validate(r) for r in rows]

    async def measure_max_rows(self) -> int:
        """The rows one request reads (`page_rows`): PAGE_ROWS, or the project's "Max rows"
        when it is lower, measured with `semo_rows` (the cap applies to a function's rows as
        to a table's). StoreError when the project answers no row at all."""
        probe = {"p_count": PAGE_ROWS + 1}
        answered = len(await self._rows(lambda c: c.rpc("semo_rows", probe)))
        self._page_measured_at = time.monotonic()
        if answered == 0:
            raise StoreError(
                f'{self.url} answers no rows: its "Max rows" (API settings) is 0; raise it'
            )
        if answered < PAGE_ROWS and answered != self.page_rows:
            log.warning('%s: "Max rows" is %d: listings read that many a page', self.url, answered)
        self.page_rows = min(answered, PAGE_ROWS)
        return self.page_rows

    async def _cut_by_cap(self, answered: int) -> bool:
        """Whether a page of `answered` rows, fewer than asked for, was cut by a "Max rows"
        lowered since it was measured (measured again at most every `max_rows_recheck` s)."""
        if time.monotonic() - self._page_measured_at < self.max_rows_recheck:
            return False
        return answered >= await self.measure_max_rows()

    def _remember(self, command_id: Any, office_id: Any) -> None:
        if isinstance(command_id, str) and isinstance(office_id, str):
            self._commands[command_id] = office_id
            self._commands.move_to_end(command_id)
            while len(self._commands) > KNOWN_COMMANDS:
                self._commands.popitem(last=False)

    # -- lifecycle ---------------------------------------------------------------------------

    async def open(self) -> None:
        if self._open:
            return
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(self.request_timeout, connect=self.connect_timeout),
            follow_redirects=True,
            event_hooks={"response": [_note_status]},
        )
        options = AsyncClientOptions(
            httpx_client=self._http,
            postgrest_client_retry=False,  # failures are StoreUnavailable at once, as postgres
            auto_refresh_token=False,
            persist_session=False,
            realtime={"auto_reconnect": False, "max_retries": 1},
        )
        try:
            self._client = await acreate_client(self.url, self._key, options)
        except Exception as error:
            await self._http.aclose()
            self._http = None
            raise StoreError(
                f"cannot create the supabase client for {self.url}: {self._scrub(str(error))}"
            ) from None
        self._open = True
        self._opened_at = now()
        self._forced, self._failures = None, 0
        try:
            await self._rows(lambda c: c.table("agent_commands").select("id").limit(1))
            # a column of the latest migration: the schema is current
            await self._rows(lambda c: c.table("jobs").select("engine_id").limit(1))
            await self._rows(
                lambda c: c.table("user_questions").select("answer_delivered_at").limit(1)
            )
            # the functions exist too (renews nothing: no engine has an empty id)
            await self._run(
                lambda c: c.rpc("semo_renew_leases", {"p_engine_id": "", "p_lease_seconds": 1})
            )
            await self._check_latest_migration()
            await self.measure_max_rows()
        except BaseException:
            await self.close()
            raise
        self._supervisor = asyncio.get_running_loop().create_task(
            self._supervise(), name="semo-supabase-watchdog"
        )

    async def _check_latest_migration(self) -> None:
        """Functions of the latest migrations exist (called so that they change nothing: no
        engine, job or office has an empty id); StoreError saying to migrate when not."""
        try:
            await self._run(lambda c: c.rpc("semo_heartbeat_grace_until", {}))
            args = {"p_engine_id": "", "p_lease_seconds": 1, "p_command_ids": []}
            await self._run(lambda c: c.rpc("semo_renew_command_leases", args))
            job = {"p_job_id": "", "p_updated_at": "1970-01-01T00:00:00Z", "p_row": {}}
            await self._run(lambda c: c.rpc("semo_update_job", job))  # 0010
            submit = {"p_job": None, "p_command_id": "", "p_entry": None}
            await self._run(lambda c: c.rpc("semo_submit_job", submit))  # 0011
            requeue = {"p_job_id": "", "p_command_id": "", "p_reason": ""}
            await self._run(lambda c: c.rpc("semo_requeue_job", requeue))  # 0017
            await self._run(lambda c: c.rpc("semo_rows", {"p_count": 0}))  # 0018
            await self._rows(  # 0020
                lambda c: c.table("agent_command_results").select("office_id").limit(1)
            )
        except StoreUnavailable:
            raise
        except StoreError as error:
            raise StoreError(
                f"{self.url} has an older semo schema than this semo, run `semo migrate`: {error}"
            ) from None

    async def close(self) -> None:
        self._open = False
        supervisor, self._supervisor = self._supervisor, None
        if supervisor is not None:
            supervisor.cancel()
            with contextlib.suppress(BaseException):
                await supervisor
        rt, self._rt = self._rt, None
        if rt is not None:
            self._retire(rt)
        tasks = list(self._tasks)
        for task in tasks:
            if not task.done() and task.get_name() != "semo-supabase-retire":
                task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=2.0)
        client, self._client = self._client, None
        http, self._http = self._http, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.postgrest.aclose()
        if http is not None:
            with contextlib.suppress(Exception):
                await http.aclose()
        for watch in self._watches.values():
            watch.channel = None
            watch.ready = False
        self._wake()

    # -- wake-ups ----------------------------------------------------------------------------

    def _wake(self) -> None:
        event, self._changed = self._changed, asyncio.Event()
        event.set()

    def _bump(self, watch: _Watch, cause: str) -> None:
        watch.seq += 1
        setattr(self.stats, cause, getattr(self.stats, cause) + 1)
        self._wake()

    async def _watch(self, office_id: str) -> _Watch:
        watch = self._watches.get(office_id)
        if watch is not None:
            return watch
        pending = self._registering.get(office_id)
        if pending is None:
            pending = asyncio.ensure_future(self._register(office_id))
            self._registering[office_id] = pending
            pending.add_done_callback(lambda _: self._registering.pop(office_id, None))
        return await asyncio.shield(pending)

    async def _register(self, office_id: str) -> _Watch:
        """Start watching an office: read what is there (reported as a change when there is
        something: it happened since the store opened, or before), then subscribe."""
        snapshot = await self._snapshot(office_id)
        watch = _Watch(office_id, hint_at=time.monotonic(), snapshot=snapshot)
        if snapshot.any():
            self._bump(watch, "catch_ups")
        self._watches[office_id] = watch
        self._poke.set()
        return watch

    async def _snapshot(self, office_id: str) -> _Snapshot:
        since = _stamp(self._opened_at - timedelta(seconds=CLOCK_MARGIN_SECONDS))
        pending, finished, answered = await asyncio.gather(
            self._rows(
                lambda c: (
                    c.table("agent_commands")
                    .select("id")
                    .eq("office_id", office_id)
                    .eq("status", "pending")
                    .order("created_at")
                    .order("seq")
                    .limit(SNAPSHOT_ROWS)
                )
            ),
            self._rows(
                lambda c: (
                    c.table("agent_commands")
                    .select("id")
                    .eq("office_id", office_id)
                    .in_("status", ["completed", "failed"])
                    .gte("updated_at", since)
                    .order("updated_at", desc=True)
                    .limit(SNAPSHOT_ROWS)
                )
            ),
            self._rows(
                lambda c: (
                    c.table("user_questions")
                    .select("id")
                    .eq("office_id", office_id)
                    .gte("answered_at", since)
                    .order("answered_at", desc=True)
                    .limit(SNAPSHOT_ROWS)
                )
            ),
        )
        return _Snapshot(
            frozenset(r["id"] for r in pending),
            frozenset(r["id"] for r in finished),
            frozenset(r["id"] for r in answered),
        )

    def subscribed(self, office_id: str) -> bool:
        """Whether the office's Realtime channel is joined and receiving (for status displays)."""
        watch = self._watches.get(office_id)
        return bool(watch and watch.ready and watch.generation == self._generation)

    async def wait_for_change(self, office_id: str, timeout: float) -> bool:
        """True when a command was inserted or re-queued, a result written or a question
        updated for the office since the store opened or the last call that returned True;
        also True after the office's channel was subscribed again (events in the gap are
        lost), and when nothing said so for `catch_up_interval` seconds. An office is watched
        from the first call about it on: that call reads what happened before (pending
        commands, and commands finished or questions answered since the store opened), and
        once its channel is subscribed the same read reports what the subscription missed.
        False on timeout; StoreUnavailable when that first read fails."""
        self._require_client()
        deadline = time.monotonic() + max(0.0, timeout)
        watch = await self._watch(office_id)
        while True:
            if not self._open:
                raise StoreError("the supabase store was closed while waiting")
            current = time.monotonic()
            if watch.seq != watch.seen:
                watch.seen = watch.seq
                watch.hint_at = current
                return True
            interval = self.catch_up_interval if watch.ready else self.degraded_interval
            if current >= watch.hint_at + interval:
                self.stats.timer += 1
                watch.hint_at = current
                return True
            if current >= deadline:
                return False
            event = self._changed
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(deadline, watch.hint_at + interval) - current):
                    await event.wait()

    # -- broadcasts ----------------------------------------------------------------------------

    async def publish_event(self, office_id: str, event: str, payload: dict[str, Any]) -> bool:
        """Send `payload` as the Realtime broadcast `event` on the channel `office:{office_id}`.
        True once it went out on the socket; False (never an exception) when the store is
        closed, the office's channel is not joined right now, or the send failed."""
        if not self._open or self._client is None:
            return False
        if not self._within_budget():
            self.stats.broadcasts_over_budget += 1
            return False
        try:
            channel = await self._broadcast_channel(office_id)
            if channel is None:
                raise _RealtimeProblem("the channel is not joined")
            await channel.send_broadcast(event, payload)
            # realtime-py swallows a closed socket on send (it marks the channels errored)
            if self._joined(self._watches[office_id]) is not channel:
                raise _RealtimeProblem("the socket closed while sending")
        except asyncio.CancelledError:
            raise
        except Exception as error:
            self.stats.broadcast_failures += 1
            with contextlib.suppress(Exception):
                log.debug(
                    "semo: broadcast %r on office:%s not sent: %s",
                    event,
                    office_id,
                    self._scrub(str(error)) or type(error).__name__,
                )
            return False
        self.stats.broadcasts += 1
        return True

    def _within_budget(self) -> bool:
        """Take one broadcast from the budget (a token bucket refilled at
        `broadcasts_per_second`); False when it is spent."""
        rate = self.broadcasts_per_second
        if rate is None:
            return True
        current = time.monotonic()
        self._tokens = min(rate, self._tokens + (current - self._tokens_at) * rate)
        self._tokens_at = current
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True

    async def _broadcast_channel(self, office_id: str) -> AsyncRealtimeChannel | None:
        """The office's joined channel; the first call about an office starts watching it and
        waits (up to connect_timeout) for its first subscription, later calls never wait."""
        async with asyncio.timeout(self.connect_timeout + 1.0):
            watch = await self._watch(office_id)
        if watch.publish_deadline is None:
            watch.publish_deadline = time.monotonic() + self.connect_timeout + 1.0
        while (channel := self._joined(watch)) is None:
            if not self._open or time.monotonic() >= watch.publish_deadline:
                return None
            await asyncio.sleep(0.01)
        watch.publish_deadline = 0.0
        return channel

    def _joined(self, watch: _Watch) -> AsyncRealtimeChannel | None:
        """The watch's channel when broadcasts sent on it now would go out, else None."""
        rt, channel = self._rt, watch.channel
        if (
            rt is None
            or channel is None
            or self._forced
            or not rt.is_connected
            or watch.generation != self._generation
            or watch.state != RealtimeSubscribeStates.SUBSCRIBED.value
            or not channel.is_joined
            or rt.channels.get(channel.topic) is not channel
        ):
            return None
        listener = rt._listen_task
        if listener is None or listener.done():
            return None
        return channel

    # -- the watchdog --------------------------------------------------------------------------

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _problem(self) -> str | None:
        """Why the realtime connection must be rebuilt, or None while it is healthy."""
        if not self._watches:
            return None
        rt = self._rt
        if rt is None:
            return "not connected yet"
        if self._forced:
            return self._forced
        if not rt.is_connected:
            return "the realtime socket is closed"
        listener = rt._listen_task
        if listener is None or listener.done():
            error = None
            if listener is not None and not listener.cancelled():
                error = listener.exception()
            why = f": {self._scrub(repr(error))}" if error else ""
            return f"the realtime listener stopped{why}"
        current = time.monotonic()
        for watch in self._watches.values():
            if watch.generation != self._generation or watch.state is None:
                continue
            if watch.state != RealtimeSubscribeStates.SUBSCRIBED.value:
                if current - watch.state_at >= self.channel_grace:
                    why = f": {watch.error}" if watch.error else ""
                    return f"channel office:{watch.office_id} stayed {watch.state}{why}"
            elif not watch.ready and current - watch.subscribed_at >= self.ready_grace:
                # no "Subscribed to PostgreSQL" (an older server?): assume events flow
                self._on_ready(watch)
        return None

    async def _supervise(self) -> None:
        while True:
            try:
                problem = self._problem()
                if problem is not None:
                    await self._rebuild(problem)
                elif any(w.generation != self._generation for w in self._watches.values()):
                    await self._subscribe_new()
                self._maybe_ping()
            except asyncio.CancelledError:
                raise
            except Exception:  # the watchdog itself must never die
                log.exception("semo: supabase watchdog error (continuing)")
                await asyncio.sleep(0.1)
            self._poke.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.05):
                    await self._poke.wait()

    async def _wait_before_rebuild(self, reason: str) -> None:
        """Back off by the kind of refusal `reason` is: transient ones from 50 ms to
        `max_backoff`, rate limits `rate_limit_backoff` (or the server's Retry-After when
        longer), permanent ones `refusal_retry` after reporting them once; jittered. The
        socket is closed meanwhile (realtime-py would rejoin a refused channel by itself)."""
        refusal = classify(reason)
        if refusal.kind == "transient":
            self._refused = 0
            delay = self.backoff.delay(refusal, self._failures)
        else:
            self._refused += 1
            key = f"{refusal.kind} {refusal.code}"
            self.stats.refusals[key] = self.stats.refusals.get(key, 0) + 1
            delay = self.backoff.delay(refusal, self._refused, self._hint)
            if refusal.kind == "permanent" and refusal.code not in self._reported:
                self._reported.add(refusal.code)
                log.error(
                    "semo: Supabase Realtime at %s refuses the office channels (%s): %s. Fix: %s."
                    " Retrying every %g s; meanwhile the engine polls every %g s",
                    self.url,
                    refusal.code,
                    reason,
                    refusal.advice,
                    self.backoff.permanent,
                    self.degraded_interval,
                )
            elif refusal.kind == "rate_limited":
                log.warning(
                    "semo: Supabase Realtime at %s is rate limiting: %s; retrying in %.0f s",
                    self.url,
                    reason,
                    delay,
                )
            old, self._rt = self._rt, None
            if old is not None:
                self._retire(old)
        if delay > 0:
            await asyncio.sleep(delay)

    async def _rebuild(self, reason: str) -> None:
        await self._wait_before_rebuild(reason)
        self.stats.rebuilds += 1
        self.stats.reasons[reason] = self.stats.reasons.get(reason, 0) + 1
        if reason != "not connected yet":
            log.info("semo: reconnecting to Supabase Realtime: %s", reason)
        try:
            await self._connect_all()
        except Exception as error:
            self._failures += 1
            self.stats.rebuild_failures += 1
            self._hint = retry_after(error) or retry_after(error.__cause__)
            self._forced = f"reconnecting after: {self._scrub(str(error)) or type(error).__name__}"
            current = time.monotonic()
            if current - self._last_failure_log > 30 or self._failures == 1:
                self._last_failure_log = current
                log.warning(
                    "semo: cannot (re)connect to Supabase Realtime at %s (attempt %d; "
                    "retrying every %g s at most, meanwhile wake-ups come every %g s): %s",
                    self.url,
                    self._failures,
                    self.max_backoff,
                    self.degraded_interval,
                    self._scrub(str(error)) or type(error).__name__,
                )
            return
        if self._failures:
            log.info("semo: Supabase Realtime is back after %d failed attempts", self._failures)
        self._failures = 0

    async def _connect_all(self) -> None:
        """A new realtime client with a channel for every watched office."""
        client = self._require_client()
        old, self._rt = self._rt, None
        if old is not None:
            self._retire(old)
        self._generation += 1
        self._forced = None
        for watch in self._watches.values():
            watch.channel, watch.state, watch.ready = None, None, False
        rt = AsyncRealtimeClient(
            str(client.realtime_url),
            token=self._key,
            auto_reconnect=False,  # the watchdog reconnects, and never gives up
            max_retries=1,
            timeout=max(1, round(self.connect_timeout)),
        )
        client.realtime = rt
        self._rt = rt
        try:
            async with asyncio.timeout(self.connect_timeout + 1.0):
                await rt.connect()
        except TimeoutError:
            raise _RealtimeProblem(
                f"no WebSocket within {self.connect_timeout + 1.0:g} s"
            ) from None
        listener = rt._listen_task
        if listener is not None:
            listener.add_done_callback(lambda _: self._poke.set())
        self._last_ping = time.monotonic()
        await self._subscribe_new()

    async def _subscribe_new(self) -> None:
        rt, generation = self._rt, self._generation
        if rt is None:
            return
        watches = [w for w in self._watches.values() if w.generation != generation]
        for watch in watches:
            watch.generation = generation
        results = await asyncio.gather(
            *(self._subscribe(rt, generation, w) for w in watches), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException):
                if isinstance(result, asyncio.CancelledError):
                    raise result
                self._forced = f"subscribing failed: {self._scrub(str(result)) or result!r}"
                raise _RealtimeProblem(self._forced)

    async def _subscribe(self, rt: AsyncRealtimeClient, generation: int, watch: _Watch) -> None:
        office = watch.office_id
        channel = rt.channel(f"office:{office}", _PRIVATE_CHANNEL)
        watch.channel = channel
        watch.state, watch.ready = None, False
        insert, update = ListenEvent.Insert, ListenEvent.Update
        changes: list[tuple[ListenEvent, str, str | None, Callable[..., Any]]] = [
            (insert, "agent_commands", f"office_id=eq.{office}", self._on_command),
            (update, "agent_commands", "status=eq.pending", self._on_requeue),
            (update, "user_questions", f"office_id=eq.{office}", self._on_question),
            (insert, "agent_command_results", f"office_id=eq.{office}", self._on_result),
        ]
        for event, table, row_filter, on_change in changes:
            channel.on_postgres_changes(
                event,
                schema="public",
                table=table,
                filter=row_filter,
                callback=self._guard(on_change, watch),
            )
        channel.on_system(self._guard(self._on_system, watch, generation))
        state_callback = self._guard(self._on_state, watch, generation)
        try:
            async with asyncio.timeout(self.connect_timeout + 1.0):
                await channel.subscribe(state_callback)
        except TimeoutError:
            raise _RealtimeProblem(f"channel office:{office} was not joined in time") from None
        if watch.state != RealtimeSubscribeStates.SUBSCRIBED.value:
            why = f": {watch.error}" if watch.error else ""
            raise _RealtimeProblem(f"channel office:{office} is {watch.state or 'not joined'}{why}")

    def _retire(self, rt: AsyncRealtimeClient) -> None:
        """Stop an old realtime client in the background (a dead socket can take a while)."""
        for channel in list(rt.channels.values()):
            with contextlib.suppress(Exception):
                channel.rejoin_timer.reset()
                channel.join_push.destroy()
                for push in list(channel.messages_waiting_for_ack.values()):
                    push.destroy()
                channel.messages_waiting_for_ack.clear()
        tasks = [t for t in (rt._listen_task, rt._heartbeat_task) if t is not None]
        connection = rt._ws_connection

        async def stop() -> None:
            try:
                async with asyncio.timeout(1.0):
                    await rt.close()
            except Exception:
                # a half-open socket never answers the close handshake: just drop it
                with contextlib.suppress(Exception):
                    if connection is not None:
                        connection.transport.abort()
            for task in tasks:
                if not task.done():
                    task.cancel()
                with contextlib.suppress(BaseException):
                    await task  # retrieve its exception: no "never retrieved" warning

        self._spawn(stop(), "semo-supabase-retire")

    def _maybe_ping(self) -> None:
        rt = self._rt
        connection = rt._ws_connection if rt is not None else None
        current = time.monotonic()
        if connection is None or current - self._last_ping < self.ping_interval:
            return
        self._last_ping = current
        generation = self._generation

        async def ping() -> None:
            try:
                async with asyncio.timeout(self.ping_timeout):
                    pong = await connection.ping()
                    await pong
            except Exception:
                if generation == self._generation and self._forced is None:
                    self._forced = f"no answer to a ping within {self.ping_timeout:g} s"
                    self._poke.set()

        self._spawn(ping(), "semo-supabase-ping")

    # -- realtime callbacks (called by realtime-py's listener: they must never raise) --------

    def _guard(self, body: Callable[..., None], *bound: Any) -> Callable[..., None]:
        def callback(*args: Any) -> None:
            try:
                body(*bound, *args)
            except Exception:
                self.stats.callback_errors += 1
                with contextlib.suppress(Exception):
                    log.exception("semo: supabase realtime callback %s failed", body.__name__)

        return callback

    def _on_state(
        self,
        watch: _Watch,
        generation: int,
        status: RealtimeSubscribeStates,
        error: Exception | None = None,
    ) -> None:
        if generation != self._generation:
            return
        current = time.monotonic()
        watch.state = getattr(status, "value", str(status))
        watch.state_at = current
        if error:
            watch.error = self._scrub(str(error))
        elif status == RealtimeSubscribeStates.SUBSCRIBED:
            watch.error = None  # (a CLOSED after an error keeps the error's reason)
        if status == RealtimeSubscribeStates.SUBSCRIBED:
            self.stats.subscribed_at.append(current)
            watch.subscribed_at = current
            watch.ready = False
            if watch.initialized:
                self._bump(watch, "resubscribed")
        else:
            watch.ready = False
            log.info(
                "semo: channel office:%s is %s%s",
                watch.office_id,
                watch.state,
                f": {self._scrub(str(error))}" if error else "",
            )
            self._wake()  # waiters switch to the degraded interval
        self._poke.set()

    def _on_system(self, watch: _Watch, generation: int, payload: Any) -> None:
        if generation != self._generation:
            return
        extension = getattr(payload, "extension", None)
        status = getattr(payload, "status", None)
        if extension == "postgres_changes" and status == "ok":
            self._on_ready(watch)

    def _on_ready(self, watch: _Watch) -> None:
        """Events flow from now on: whatever happened before must be read."""
        if watch.ready:
            return
        watch.ready = True
        self.stats.ready_at.append(time.monotonic())
        if self._refused and all(w.ready for w in self._watches.values()):
            log.info("semo: Supabase Realtime accepts the office channels again")
            self._refused, self._hint = 0, None
            self._reported.clear()
        if watch.initialized:
            self._bump(watch, "resubscribed")
        else:
            watch.initialized = True
            self._spawn(self._initial_catch_up(watch), "semo-supabase-catch-up")

    async def _initial_catch_up(self, watch: _Watch) -> None:
        """Report what changed between the office's first read and its first subscription."""
        try:
            later = await self._snapshot(watch.office_id)
        except StoreError:
            self._bump(watch, "catch_ups")  # cannot tell: say "maybe"
            return
        if watch.snapshot.news(later):
            self._bump(watch, "catch_ups")

    @staticmethod
    def _record(payload: Any, key: str = "record") -> dict[str, Any]:
        data = payload.get("data") if isinstance(payload, dict) else None
        record = data.get(key) if isinstance(data, dict) else None
        return record if isinstance(record, dict) else {}

    def _on_command(self, watch: _Watch, payload: Any) -> None:
        record = self._record(payload)
        self._remember(record.get("id"), watch.office_id)
        self._bump(watch, "events")

    def _on_requeue(self, watch: _Watch, payload: Any) -> None:
        record = self._record(payload)
        office = record.get("office_id")
        if office is not None and office != watch.office_id:
            return
        old = self._record(payload, "old_record")
        if old.get("status") == "pending":
            return  # already pending: not a requeue
        self._bump(watch, "events")

    def _on_question(self, watch: _Watch, payload: Any) -> None:
        self._bump(watch, "events")

    def _on_result(self, watch: _Watch, payload: Any) -> None:
        office = self._commands.get(self._record(payload).get("command_id") or "")
        if office is None or office == watch.office_id:  # unknown command: maybe ours
            self._bump(watch, "events")

    # -- offices and agents --------------------------------------------------------------------

    async def list_offices(self) -> list[Office]:
        return await self._pages(Office, lambda c: c.table("offices").select("*"))

    # -- sessions ----------------------------------------------------------------------------

    async def list_sessions(
        self, office_id: str, *, include_terminated: bool = False
    ) -> list[AgentSession]:
        def build(c: AsyncClient) -> Any:
            query = c.table("agent_sessions").select("*").eq("office_id", office_id)
            if not include_terminated:
                query = query.neq("status", "terminated")
            return query

        keys: Keys = (("created_at", False), ("session_id", False))
        return await self._pages(AgentSession, build, keys)

    async def set_session_status(
        self, session_id: str, status: SessionStatus, *, reason: str | None = None
    ) -> AgentSession:
        check_session_status(status)
        for _ in range(CAS_ATTEMPTS):
            current = await self.get_session(session_id)
            if current.status == "terminated":
                if status == "terminated":
                    raise StoreConflict(already_ended(session_id, current.end_reason))
                raise StoreConflict(
                    f"session {session_id} is terminated; it cannot become {status}"
                )
            at = now()
            changes: dict[str, Any] = {"status": status, "last_activity_at": at.isoformat()}
            if reason is not None:
                changes["end_reason"] = no_nul(reason)
            if status == "terminated" and current.ended_at is None:
                changes["ended_at"] = at.isoformat()

            def change(
                c: AsyncClient, changes: dict[str, Any] = changes, current: AgentSession = current
            ) -> Any:
                return (
                    c.table("agent_sessions")
                    .update(changes)
                    .eq("session_id", session_id)
                    .eq("status", current.status)
                    .eq("last_activity_at", _stamp(current.last_activity_at))
                )

            rows = await self._rows(change)
            if rows:
                session = AgentSession.model_validate(rows[0])
                if status == "terminated":
                    await self._cancel_session_questions(session)
                return session
        raise StoreConflict(f"session {session_id} kept changing; try again")

    async def _cancel_session_questions(self, session: AgentSession) -> None:
        """The pending questions of an ended session: cancelled (best effort: the session has
        ended whatever happens here, and reconcile cancels what is left on the next start)."""
        changes = {
            "status": "cancelled",
            "cancel_reason": no_nul(session_ended(session.session_id, session.end_reason)),
            "cancelled_at": now().isoformat(),
        }
        try:
            await self._run(
                lambda c: (
                    c.table("user_questions")
                    .update(changes)
                    .eq("session_id", session.session_id)
                    .eq("status", "pending")
                )
            )
        except StoreError as error:
            log.warning(
                "session %s ended, but its pending questions were not cancelled: %s",
                session.session_id,
                error,
            )

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
        row = {
            "id": command.id,
            "office_id": office_id,
            "session_id": session_id,
            "command_type": command_type,
            "payload": no_nul(command.payload),
        }
        rows = await self._rows(
            lambda c: c.table("agent_commands").insert(row),
            missing=f"office {office_id} not found",
            duplicate=f"command {command.id} already exists",
        )
        self._remember(command.id, office_id)
        return AgentCommand.model_validate(rows[0])

    async def list_commands(
        self, office_id: str, *, status: CommandStatus | None = None, limit: int = 100
    ) -> list[AgentCommand]:
        def build(c: AsyncClient) -> Any:
            query = c.table("agent_commands").select("*").eq("office_id", office_id)
            if status is not None:
                query = query.eq("status", status)
            return query

        keys: Keys = (("created_at", True), ("seq", True))
        return await self._pages(AgentCommand, build, keys, limit=max(0, limit))

    async def claim_next_command(
        self,
        office_id: str,
        engine_id: str,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        *,
        skip_types: Sequence[str] = (),
    ) -> AgentCommand | None:
        lease = check_lease(lease_seconds)
        args: dict[str, Any] = {
            "p_office_id": office_id,
            "p_engine_id": engine_id,
            "p_lease_seconds": lease,
            "p_skip_types": list(skip_types),
        }

        async def claim_one() -> dict[str, Any] | None:
            rows = await self._rows(lambda c: c.rpc("semo_claim_next", args))
            if not rows:
                return None
            self._remember(rows[0].get("id"), office_id)
            return rows[0]

        async def reject(row: Any, problem: str) -> None:
            await self._run(
                lambda c: c.rpc(
                    "semo_complete_command",
                    {
                        "p_command_id": row["id"],
                        "p_engine_id": engine_id,
                        "p_success": False,
                        "p_result": None,
                        "p_error": no_nul(problem),
                    },
                )
            )

        row = await claim_runnable(claim_one, reject)
        return None if row is None else AgentCommand.model_validate(row)

    async def renew_leases(
        self,
        engine_id: str,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        command_ids: Sequence[str] | None = None,
    ) -> int:
        args: dict[str, Any] = {
            "p_engine_id": engine_id,
            "p_lease_seconds": check_lease(lease_seconds),
        }
        function = "semo_renew_leases"
        if command_ids is not None:
            function, args["p_command_ids"] = "semo_renew_command_leases", list(command_ids)
        value = await self._run(lambda c: c.rpc(function, args))
        return int(value or 0)

    async def complete_command(
        self,
        command_id: str,
        engine_id: str,
        *,
        success: bool,
        result: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> AgentCommandResult:
        args = {
            "p_command_id": command_id,
            "p_engine_id": engine_id,
            "p_success": success,
            "p_result": None if result is None else no_nul(result),
            "p_error": no_nul(error),
        }
        rows = await self._rows(
            lambda c: c.rpc("semo_complete_command", args),
            duplicate=f"command {command_id} already has a result",
        )
        if not rows:
            raise StoreError(f"completing command {command_id} returned no result row")
        return AgentCommandResult.model_validate(rows[0])

    async def recover_expired(self) -> list[AgentCommand]:
        args = {"p_safe_types": sorted(SAFE_TO_REPEAT), "p_max_attempts": MAX_ATTEMPTS}
        return await self._list(AgentCommand, lambda c: c.rpc("semo_recover_expired", args))

    async def get_result(self, command_id: str) -> AgentCommandResult | None:
        rows = await self._rows(
            lambda c: (
                c.table("agent_command_results").select("*").eq("command_id", command_id).limit(1)
            )
        )
        if rows:
            return AgentCommandResult.model_validate(rows[0])
        exists = await self._rows(
            lambda c: c.table("agent_commands").select("id").eq("id", command_id).limit(1)
        )
        if not exists:
            raise NotFound(f"command {command_id} not found")
        return None

    # -- engines -----------------------------------------------------------------------------

    async def record_heartbeat(
        self, office_id: str, engine_id: str, *, dead_after: float, starting: bool = False
    ) -> EngineHeartbeat:
        args = {
            "p_office_id": office_id,
            "p_engine_id": engine_id,
            "p_dead_after": check_heartbeat(engine_id, dead_after),
            "p_starting": starting,
        }
        rows = await self._rows(
            lambda c: c.rpc("semo_record_heartbeat", args), missing=f"office {office_id} not found"
        )
        if not rows:
            raise StoreError(f"recording the heartbeat of engine {engine_id} returned no row")
        return EngineHeartbeat.model_validate(rows[0])

    async def expire_engine(self, office_id: str, engine_id: str) -> bool:
        args = {"p_office_id": office_id, "p_engine_id": engine_id}
        return bool(await self._run(lambda c: c.rpc("semo_expire_engine", args)))

    async def mark_engine_stopped(self, office_id: str, engine_id: str) -> EngineHeartbeat:
        args = {"p_office_id": office_id, "p_engine_id": engine_id}
        rows = await self._rows(lambda c: c.rpc("semo_mark_engine_stopped", args))
        if not rows:
            raise NotFound(no_heartbeat(office_id, engine_id))
        return EngineHeartbeat.model_validate(rows[0])

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
        args = {
            "p_office_id": office_id,
            "p_engine_id": engine_id,
            "p_session_reason": no_nul(session_reason),
            "p_command_error": no_nul(command_error),
            "p_job_reason": no_nul(job_reason),
            "p_unless_alive": unless_alive,
        }
        rows = await self._rows(lambda c: c.rpc("semo_end_engine", args))
        if not rows:
            raise StoreError(f"ending what engine {engine_id} left returned no row")
        return EngineEnded.model_validate({**rows[0], "engine_id": engine_id})

    async def list_engines(self, office_id: str) -> list[EngineHeartbeat]:
        keys: Keys = (("started_at", False), ("engine_id", False))
        return await self._pages(
            EngineHeartbeat,
            lambda c: c.rpc("semo_list_engines", {"p_office_id": office_id}),
            keys,
        )

    async def forget_engines(self, office_id: str, *, dead_for: float) -> int:
        args = {"p_office_id": office_id, "p_dead_for": check_dead_for(dead_for)}
        value = await self._run(lambda c: c.rpc("semo_forget_engines", args))
        return int(value or 0)

    # -- questions ---------------------------------------------------------------------------

    async def mark_answer_delivered(self, question_id: str) -> bool:
        rows = await self._rows(
            lambda c: (
                c.table("user_questions")
                .update({"answer_delivered_at": now().isoformat()})
                .eq("id", question_id)
                .eq("status", "answered")
                .is_("answer_delivered_at", "null")
            )
        )
        return bool(rows)

    async def _office_rows(self, query: OfficeRows[M]) -> list[M]:
        """See Store._office_rows: a GET a page, and long `narrow` lists in chunks of IN_IDS
        (a URL holds only so many ids)."""
        model, table, office_id = query.model, query.table, query.office_id
        status, narrow, unset = query.status, query.narrow, query.unset

        def build(c: AsyncClient) -> Any:
            select = c.table(table).select("*").eq("office_id", office_id)
            if isinstance(status, str):
                select = select.eq("status", status)
            elif status is not None:
                select = select.in_("status", list(status))
            if narrow is not None:
                select = select.in_(narrow[0], narrow[1])
            if unset is not None:
                select = select.is_(unset, "null")
            return select

        if narrow is None or len(narrow[1]) <= IN_IDS:
            return await self._pages(model, build)
        column, values = narrow
        found: list[M] = []
        for start in range(0, len(values), IN_IDS):
            chunk = (column, values[start : start + IN_IDS])
            found += await self._office_rows(replace(query, narrow=chunk))
        # every office listing's model has created_at and id; the Row bound of M does not say so
        return sorted(found, key=lambda row: (row.created_at, row.id))  # type: ignore[attr-defined]

    async def _transition(
        self,
        table: str,
        row_id: str,
        what: str,
        changes: dict[str, Any],
        conflict: Callable[[dict[str, Any]], str] | None = None,
    ) -> dict[str, Any]:
        """pending -> something, by a PATCH filtered on status=pending; when it changes
        nothing, say why (NotFound, or StoreConflict with `conflict(current row)`)."""
        rows = await self._rows(
            lambda c: c.table(table).update(changes).eq("id", row_id).eq("status", "pending")
        )
        if rows:
            return rows[0]
        current = await self._rows(lambda c: c.table(table).select("*").eq("id", row_id).limit(1))
        if not current:
            raise NotFound(f"no {what} {row_id}")
        if conflict is not None:
            raise StoreConflict(conflict(current[0]))
        raise StoreConflict(f"{what} {row_id} is already {current[0]['status']}")

    async def _close_question(
        self, question_id: str, changes: dict[str, Any], *, answering: bool
    ) -> UserQuestion:
        row = await self._transition(
            "user_questions",
            question_id,
            "question",
            changes,
            lambda current: question_not_pending(
                question_id, current["status"], current.get("cancel_reason"), answering=answering
            ),
        )
        return UserQuestion.model_validate(row)

    async def answer_question(self, question_id: str, answer: str) -> UserQuestion:
        changes = {"status": "answered", "answer": no_nul(answer), "answered_at": now().isoformat()}
        return await self._close_question(question_id, changes, answering=True)

    async def cancel_question(self, question_id: str, reason: str) -> UserQuestion:
        changes = {
            "status": "cancelled",
            "cancel_reason": no_nul(reason),
            "cancelled_at": now().isoformat(),
        }
        return await self._close_question(question_id, changes, answering=False)

    # -- invocations, results, jobs -----------------------------------------------------------

    async def update_invocation(
        self, invocation_id: str, *, status: str, error: str | None = None
    ) -> AgentInvocation:
        check_invocation_status(status)
        changes = {"status": status, "error": no_nul(error), "updated_at": now().isoformat()}
        rows = await self._rows(
            lambda c: (
                c.table("agent_invocations")
                .update(changes)
                .eq("id", invocation_id)
                .neq("status", "cancelled")
            )
        )
        if not rows:
            current = await self._rows(
                lambda c: c.table("agent_invocations").select("*").eq("id", invocation_id).limit(1)
            )
            if not current:
                raise NotFound(f"no invocation {invocation_id}")
            raise StoreConflict(invocation_cancelled(invocation_id, current[0].get("error")))
        return AgentInvocation.model_validate(rows[0])

    async def mark_result_delivered(self, result_id: str) -> AgentResult:
        row = await self._transition(
            "agent_results",
            result_id,
            "result",
            {"status": "delivered", "delivered_at": now().isoformat()},
        )
        return AgentResult.model_validate(row)

    async def _submit_job(self, job: Job, command: AgentCommand, entry: JobEntry) -> AgentCommand:
        args = {
            "p_job": _json(job),
            "p_command_id": command.id,
            "p_entry": _json(entry_of_update(job, entry), skip=("id",)),
        }
        rows = await self._rows(
            lambda c: c.rpc("semo_submit_job", args),
            missing=f"office {job.office_id} not found",
            duplicate=f"job {job.id} already exists",
        )
        self._remember(command.id, job.office_id)
        return AgentCommand.model_validate(rows[0])

    async def update_job(
        self, job_id: str, *, entry: JobEntry | None = None, **changes: Any
    ) -> Job:
        for _ in range(CAS_ATTEMPTS):
            job = await self.get_job(job_id)
            updated = updated_job(job, changes, now())
            step = None if entry is None else entry_of_update(updated, entry)
            args = {
                "p_job_id": job_id,
                "p_updated_at": _stamp(job.updated_at),
                "p_row": _json(updated),
                "p_entry": None if step is None else _json(step, skip=("id",)),
            }
            # one request: the row only if nobody changed it meanwhile, and its step with it

            def update(c: AsyncClient, args: dict[str, Any] = args) -> Any:
                return c.rpc("semo_update_job", args)

            rows = await self._rows(update)
            if rows:
                return Job.model_validate(rows[0])
        raise StoreConflict(f"job {job_id} kept changing; try again")

    async def request_job_cancel(self, job_id: str, reason: str) -> Job:
        args = {"p_job_id": job_id, "p_reason": no_nul(reason)}
        rows = await self._rows(lambda c: c.rpc("semo_request_job_cancel_recorded", args))
        if rows:
            return Job.model_validate(rows[0])
        raise StoreConflict(job_not_cancellable(await self.get_job(job_id)))

    async def cancel_job_work(self, job_id: str, reason: str) -> JobWorkCancelled:
        why = no_nul(reason)
        invocations = await self._rows(
            lambda c: (
                c.table("agent_invocations")
                .update({"status": "cancelled", "error": why, "updated_at": now().isoformat()})
                .eq("job_id", job_id)
                .in_("status", ["pending", "running"])
            )
        )
        results = await self._rows(
            lambda c: (
                c.table("agent_results")
                .update({"status": "cancelled", "cancel_reason": why})
                .eq("job_id", job_id)
                .eq("status", "pending")
            )
        )
        return JobWorkCancelled(
            invocations=[AgentInvocation.model_validate(r) for r in invocations],
            results=[AgentResult.model_validate(r) for r in results],
        )

    async def retry_job(
        self, job_id: str, *, engine_id: str, attempts: int, failed_reason: str, reason: str
    ) -> AgentCommand | None:
        args = {
            "p_job_id": job_id,
            "p_engine_id": engine_id,
            "p_attempts": attempts,
            "p_failed_reason": failed_reason,
            "p_reason": no_nul(reason),
        }
        rows = await self._rows(lambda c: c.rpc("semo_retry_job", args))
        if not rows:
            return None
        self._remember(rows[0].get("id"), rows[0].get("office_id"))
        return AgentCommand.model_validate(rows[0])

    async def _recover_job(self, recovery: JobRecovery) -> Job | None:
        args = {
            "p_job_id": recovery.job_id,
            "p_engine_id": recovery.engine_id,
            "p_attempts": recovery.attempts,
            "p_reason": recovery.reason,
            "p_retry_reason": recovery.retry_reason,
            "p_unless_alive": recovery.unless_alive,
        }
        function = "semo_recover_job_recorded" if recovery.timeline else "semo_recover_job"
        rows = await self._rows(lambda c: c.rpc(function, args))
        return Job.model_validate(rows[0]) if rows else None

    async def _take_over_job(self, takeover: JobTakeover) -> Job | None:
        entry = takeover.entry
        args = {
            "p_job_id": takeover.job_id,
            "p_from_engine": takeover.from_engine,
            "p_attempts": takeover.attempts,
            "p_to_engine": takeover.to_engine,
            "p_entry": None if entry is None else _json(entry, skip=("id",)),
        }
        rows = await self._rows(lambda c: c.rpc("semo_take_over_job", args))
        return Job.model_validate(rows[0]) if rows else None

    async def _start_job(self, job_id: str, engine_id: str, entry: JobEntry | None) -> Job | None:
        args = {
            "p_job_id": job_id,
            "p_engine_id": engine_id,
            "p_entry": None if entry is None else _json(entry, skip=("id",)),
        }
        rows = await self._rows(lambda c: c.rpc("semo_start_job", args))  # 0017
        return Job.model_validate(rows[0]) if rows else None

    async def _requeue_job(self, job_id: str, command_id: str, reason: str) -> AgentCommand | None:
        args = {"p_job_id": job_id, "p_command_id": command_id, "p_reason": reason}
        rows = await self._rows(lambda c: c.rpc("semo_requeue_job", args))  # 0017
        if not rows:
            return None
        self._remember(rows[0].get("id"), rows[0].get("office_id"))
        return AgentCommand.model_validate(rows[0])

    async def add_job_entry(self, entry: JobEntry) -> JobEntry:
        rows = await self._rows(
            lambda c: c.table("job_events").insert(_json(entry, skip=("id",))),
            missing=f"no job {entry.job_id} in office {entry.office_id}",
        )
        return JobEntry.model_validate(rows[0])

    async def list_job_entries(self, job_id: str, *, after: int = 0) -> list[JobEntry]:
        return await self._pages(
            JobEntry,
            lambda c: c.table("job_events").select("*").eq("job_id", job_id).gt("id", after),
            (("id", False),),
        )


def from_config(config: StoreConfig) -> SupabaseStore:
    """The store for SEMO_STORE=supabase (StoreError saying what is missing)."""
    missing = []
    if not config.supabase_url:
        missing.append("SUPABASE_URL (the project URL, e.g. https://xyz.supabase.co)")
    key = config.supabase_key.get_secret_value() if config.supabase_key else ""
    if not key:
        missing.append("SUPABASE_SERVICE_ROLE_KEY (the project's service-role key)")
    if missing:
        raise StoreError(f"the supabase store needs {' and '.join(missing)}")
    assert config.supabase_url is not None
    return SupabaseStore(
        config.supabase_url, key, broadcasts_per_second=config.realtime_broadcasts_per_second
    )
