"""The emulator process: one origin for `/rest/v1`, `/realtime/v1/websocket`,
`/realtime/v1/api/broadcast` and a minimal `/auth/v1` (gotrue.py), in a thread.

The server runs on its own asyncio loop in a daemon thread, so synchronous and asynchronous
tests use it alike; every public method of `SupabaseEmulator` is thread-safe.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import random
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Self
from urllib.parse import parse_qs

import psycopg
from psycopg import sql
from websockets.server import ServerProtocol

from .auth import InvalidToken, project_keys, sign_jwt, verify_jwt
from .changes import (
    Change,
    ChangeFeed,
    TriggerChangeFeed,
    Wal2JsonChangeFeed,
    published_tables,
    wal_level,
)
from .db import Pool
from .gotrue import GoTrue, create_user
from .http import HttpServer, Request, Response, encode_response
from .postgrest import Auth, Postgrest
from .realtime import RealtimeSocket
from .schema import SchemaCache, Table

log = logging.getLogger(__name__)

COUNTERS = (
    "connections",  # WebSocket connections accepted
    "connections_refused",  # upgrades refused (paused, bad key)
    "quota_shutdowns",  # messages over the message quota (their channel shut down)
    "sockets_dropped",  # sockets closed by drop_sockets()
    "joins",
    "heartbeats",
    "changes_read",  # row changes read from the database (before fan-out)
    "events_sent",  # postgres_changes messages written to a socket
    "events_dropped",  # messages lost on purpose (set_event_loss) or because the socket went away
    "rest_requests",
    "rest_failures_injected",
)


@dataclass(frozen=True)
class Stats:
    connections: int
    connections_refused: int
    quota_shutdowns: int
    sockets_dropped: int
    joins: int
    heartbeats: int
    changes_read: int
    events_sent: int
    events_dropped: int
    rest_requests: int
    rest_failures_injected: int
    open_sockets: int


@dataclass(frozen=True)
class _Target:
    """A channel named by a server-side broadcast."""

    topic: str
    private: bool
    broadcast_self: bool = True


class _Core:
    """Loop-side state. Only `count`, `lose_event` and the plain settings are touched from
    other threads (under `lock`)."""

    def __init__(self, emulator: SupabaseEmulator) -> None:
        self.emulator = emulator
        self.lock = threading.Lock()
        self.counters = dict.fromkeys(COUNTERS, 0)
        self.cache = SchemaCache(emulator.schemas)
        self.pool = Pool(emulator.dsn, emulator.pool_size)
        self.sockets: set[RealtimeSocket] = set()
        self.realtime_tables: set[tuple[str, str]] = set()
        self.feed: ChangeFeed | None = None
        self.http: HttpServer | None = None
        self.stop_event: asyncio.Event | None = None
        self._reload_lock: asyncio.Lock | None = None
        # settings (written by the test thread)
        self.event_loss = 0.0
        self.rng = random.Random()
        self.event_delay = 0.0
        self.subscribe_delay = emulator.initial_subscribe_delay
        self.paused = False
        #: the project's Realtime messages per second (None: no quota) and this second's count
        self.message_quota: int | None = None
        self._quota_second = 0
        self._quota_used = 0
        #: (HTTP status, Retry-After or None) of refused upgrades while paused
        self.refusal: tuple[int, float | None] = (503, None)
        self.rest_failures: list[int] = []
        self.postgrest = Postgrest(
            self.pool, self.cache, self.reload, emulator.switch_roles, emulator.max_rows
        )
        self.gotrue: GoTrue | None = None
        self._bypass: dict[tuple[str, str, str], bool] = {}

    # -- counters and faults ----------------------------------------------------------------------

    def count(self, name: str, n: int = 1) -> None:
        with self.lock:
            self.counters[name] += n

    def lose_event(self) -> bool:
        with self.lock:
            if self.event_loss <= 0 or self.rng.random() >= self.event_loss:
                return False
            self.counters["events_dropped"] += 1
            return True

    def drop_sockets(self, code: int | None) -> int:
        sockets = [s for s in self.sockets if not s.closed]
        for sock in sockets:
            if code is None:
                sock.abort()
            else:
                sock.close(code, "dropped by the emulator")
        self.count("sockets_dropped", len(sockets))
        return len(sockets)

    def freeze_sockets(self) -> int:
        sockets = [s for s in self.sockets if not s.closed and not s.frozen]
        for sock in sockets:
            sock.freeze()
        return len(sockets)

    def kick_channels(self) -> int:
        return sum(
            sock.kick() for sock in list(self.sockets) if not sock.closed and not sock.frozen
        )

    # -- lifecycle --------------------------------------------------------------------------------

    async def main(self, started: concurrent.futures.Future[int]) -> None:
        self.stop_event = asyncio.Event()
        self._reload_lock = asyncio.Lock()
        try:
            async with self.pool.connection() as conn:
                level = await wal_level(conn)
                await self.cache.load(conn)
            self.emulator.wal_level = level
            source = self.emulator.change_source
            if source == "auto":
                source = "wal2json" if level == "logical" else "triggers"
            if source == "wal2json":
                self.feed = Wal2JsonChangeFeed(self.emulator.dsn, self.on_changes)
            else:
                self.feed = TriggerChangeFeed(self.emulator.dsn, self.on_changes)
            await self.feed.start()
            await self.refresh_capture()
            self.http = HttpServer(self.handle, self.upgrade)
            port = await self.http.start(self.emulator.host, self.emulator.port)
            self.gotrue = GoTrue(
                self.pool, self.emulator.jwt_secret, f"http://{self.emulator.host}:{port}"
            )
        except BaseException as error:
            await self.shutdown()
            started.set_exception(error)
            return
        started.set_result(port)
        reaper = asyncio.create_task(self._reap_silent_sockets())
        await self.stop_event.wait()
        reaper.cancel()
        await self.shutdown()

    async def _reap_silent_sockets(self) -> None:
        """Like Phoenix, close sockets that sent nothing (not even a heartbeat) for too long."""
        while True:
            await asyncio.sleep(1)
            limit = time.monotonic() - self.emulator.heartbeat_timeout
            for sock in list(self.sockets):
                if not sock.closed and sock.last_seen < limit:
                    sock.abort()

    async def shutdown(self) -> None:
        for sock in list(self.sockets):
            sock.close(1001, "emulator shutting down")
        if self.http is not None:
            await self.http.close()
        if self.feed is not None:
            await self.feed.stop()
        await self.pool.close()

    async def reload(self) -> None:
        assert self._reload_lock is not None
        async with self._reload_lock, self.pool.connection() as conn:
            await self.cache.load(conn)

    async def refresh_capture(self, bindings: list[dict[str, Any]] | None = None) -> None:
        """Capture the tables Realtime publishes: those of `supabase_realtime` when the
        publication exists, every table of the exposed schemas otherwise."""
        wanted = {(b.get("schema") or "public", b.get("table")) for b in bindings or []}
        if any(self.cache.table(s, t) is None for s, t in wanted if t not in (None, "*")):
            await self.reload()
        async with self.pool.connection() as conn:
            published = await published_tables(conn, self.cache.schemas, self.emulator.publication)
        if published is None:
            tables = [key for key, t in self.cache.tables.items() if t.kind in ("r", "p")]
        else:
            tables = published
        self.realtime_tables = set(tables)
        assert self.feed is not None
        await self.feed.capture(tables)

    # -- realtime ---------------------------------------------------------------------------------

    async def on_changes(self, changes: list[Change]) -> None:
        self.count("changes_read", len(changes))
        for change in changes:
            key = (change.schema, change.table)
            if key not in self.realtime_tables:
                continue
            table = self.cache.table(*key)
            if table is None:
                await self.reload()
                table = self.cache.table(*key)
            seen: dict[str, bool] = {}
            for sock in list(self.sockets):
                if sock.closed or not sock.wants(change):
                    continue
                key = json.dumps(sock.claims, sort_keys=True, default=str)
                if not self.emulator.realtime_rls:
                    seen[key] = True
                elif key not in seen:
                    seen[key] = await self.can_see(sock.claims, change, table)
                if seen[key]:
                    sock.dispatch(change, table)

    async def as_role(self, conn: psycopg.AsyncConnection, claims: dict[str, Any]) -> None:
        """Inside a transaction: run as the JWT's role, with its claims, as PostgREST does."""
        role = str(claims.get("role") or "anon")
        await conn.execute(
            "SELECT set_config('request.jwt.claims', %s, true),"
            " set_config('request.jwt.claim.sub', %s, true),"
            " set_config('request.jwt.claim.role', %s, true)",
            [json.dumps(claims), str(claims.get("sub") or ""), role],
        )
        await conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role)))

    async def can_see(self, claims: dict[str, Any], change: Change, table: Table | None) -> bool:
        """Whether the JWT's role and claims can SELECT the changed row (looked up by its
        primary key), as Supabase Realtime checks RLS; DELETE events are not checked."""
        if change.type == "DELETE" or table is None or not table.primary_key:
            return True
        role = str(claims.get("role") or "anon")
        if await self._sees_every_row(role, table):
            return True
        record = change.record or {}
        where = sql.SQL(" AND ").join(
            sql.SQL("{}::text = {}").format(sql.Identifier(k), sql.Literal(str(record.get(k))))
            for k in table.primary_key
        )
        statement = sql.SQL("SELECT 1 FROM {}.{} WHERE {}").format(
            sql.Identifier(table.schema), sql.Identifier(table.name), where
        )
        try:
            async with self.pool.connection() as conn, conn.transaction(force_rollback=True):
                await self.as_role(conn, claims)
                return await (await conn.execute(statement)).fetchone() is not None
        except psycopg.Error:
            return False

    async def _sees_every_row(self, role: str, table: Table) -> bool:
        """A role with BYPASSRLS and SELECT on the table (service_role) sees every row: no
        per-change query (cached per role and table)."""
        key = (role, table.schema, table.name)
        if key not in self._bypass:
            try:
                async with self.pool.connection() as conn:
                    row = await (
                        await conn.execute(
                            "SELECT r.rolbypassrls AND has_table_privilege(r.oid, %s, 'SELECT')"
                            " FROM pg_roles r WHERE r.rolname = %s",
                            [f'"{table.schema}"."{table.name}"', role],
                        )
                    ).fetchone()
            except psycopg.Error:
                return False
            self._bypass[key] = bool(row and row[0])
        return self._bypass[key]

    async def authorize_channel(self, claims: dict[str, Any], topic: str) -> tuple[bool, bool]:
        """(may read, may send) on the private channel `topic`: whether the policies on
        realtime.messages let the JWT's role SELECT, and INSERT, a broadcast message of that
        topic (realtime.topic() returns it), as Supabase's Realtime Authorization checks."""
        try:
            async with self.pool.connection() as conn, conn.transaction(force_rollback=True):
                exists = await (
                    await conn.execute("SELECT to_regclass('realtime.messages') IS NOT NULL")
                ).fetchone()
                if not exists or not exists[0]:
                    return False, False
                row = await (
                    await conn.execute(
                        "INSERT INTO realtime.messages (topic, extension, private, event)"
                        " VALUES (%s, 'broadcast', true, 'authorization') RETURNING id",
                        [topic],
                    )
                ).fetchone()
                assert row is not None
                await conn.execute("SELECT set_config('realtime.topic', %s, true)", [topic])
                await self.as_role(conn, claims)
                read = await (
                    await conn.execute("SELECT 1 FROM realtime.messages WHERE id = %s", [row[0]])
                ).fetchone()
                try:
                    async with conn.transaction():
                        await conn.execute(
                            "INSERT INTO realtime.messages (topic, extension, private, event)"
                            " VALUES (%s, 'broadcast', true, 'authorization')",
                            [topic],
                        )
                    write = True
                except psycopg.Error:
                    write = False
                return read is not None, write
        except psycopg.Error:
            return False, False

    def spend(self, messages: int) -> bool:
        """Count `messages` against the quota of this second; False when it is exceeded (the
        caller shuts the channel down, as Realtime does: "Too many messages per second")."""
        if self.message_quota is None:
            return True
        second = int(time.monotonic())
        if second != self._quota_second:
            self._quota_second, self._quota_used = second, 0
        self._quota_used += messages
        if self._quota_used > self.message_quota:
            self.count("quota_shutdowns")
            return False
        return True

    def shut_down(self, topic: str) -> None:
        """Every socket's channel `topic`: a system error "Too many messages per second",
        then closed (the client rejoins it later)."""
        for sock in list(self.sockets):
            channel = sock.channels.get(topic)
            if channel is not None:
                sock.system(channel, "error", "Too many messages per second")
                sock.close_channel(channel)

    def broadcast(
        self, sender: RealtimeSocket | None, channel: Any, payload: dict[str, Any]
    ) -> None:
        receivers = [
            sock
            for sock in list(self.sockets)
            if not (sock is sender and not channel.broadcast_self)
            and (target := sock.channels.get(channel.topic)) is not None
            and target.private == channel.private
        ]
        if not self.spend(1 + len(receivers)):  # the message in, and each delivery
            self.shut_down(channel.topic)
            return
        for sock in list(self.sockets):
            if sock is sender and not channel.broadcast_self:
                continue
            target = sock.channels.get(channel.topic)
            if target is not None and target.private == channel.private:
                sock.send(
                    {
                        "topic": channel.topic,
                        "event": "broadcast",
                        "payload": payload,
                        "ref": None,
                        "join_ref": target.join_ref,
                    }
                )

    def check_token(self, token: str) -> dict[str, Any] | None:
        try:
            return verify_jwt(token, self.emulator.jwt_secret)
        except InvalidToken:
            return None

    async def upgrade(
        self, request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        def refuse(status: int, message: str, retry_after: float | None = None) -> None:
            self.count("connections_refused")
            body = json.dumps({"message": message}).encode()
            headers = [("Content-Type", "application/json")]
            if retry_after is not None:
                headers.append(("Retry-After", f"{retry_after:g}"))
            response = Response(status, body, headers)
            writer.write(encode_response(response, keep_alive=False))
            writer.close()

        if request.path.rstrip("/") != "/realtime/v1/websocket":
            refuse(404, "not found")
            return
        if self.paused:
            status, retry_after = self.refusal
            message = (
                "Too many connected users" if status == 429 else "realtime is paused by the test"
            )
            refuse(status, message, retry_after)
            return
        params = parse_qs(request.query)
        apikey = (params.get("apikey") or [request.header("apikey") or ""])[0]
        if apikey not in (self.emulator.anon_key, self.emulator.service_role_key):
            refuse(403, "Invalid API key" if apikey else "No API key found in request")
            return
        vsn = (params.get("vsn") or ["1.0.0"])[0]
        if vsn not in ("1.0.0", "2.0.0"):
            refuse(400, f"the emulator speaks vsn=1.0.0 and 2.0.0, not {vsn}")
            return
        protocol = ServerProtocol()
        protocol.receive_data(request.head)
        events = protocol.events_received()
        if not events or protocol.handshake_exc is not None:
            refuse(400, f"bad WebSocket handshake: {protocol.handshake_exc}")
            return
        response = protocol.accept(events[0])  # type: ignore[arg-type]
        protocol.send_response(response)
        for chunk in protocol.data_to_send():
            writer.write(chunk)
        if response.status_code != 101:
            writer.close()
            return
        claims = self.check_token(apikey) or {"role": "anon"}
        sock = RealtimeSocket(self, protocol, reader, writer, claims, vsn)
        self.sockets.add(sock)
        self.count("connections")
        try:
            await sock.run()
        finally:
            self.sockets.discard(sock)

    # -- REST -------------------------------------------------------------------------------------

    def authenticate(self, request: Request) -> Auth | Response:
        apikey = request.header("apikey") or (parse_qs(request.query).get("apikey") or [None])[0]
        if not apikey:
            return Response.json(
                401,
                {
                    "message": "No API key found in request",
                    "hint": "No `apikey` request header or url param was found.",
                },
            )
        if apikey not in (self.emulator.anon_key, self.emulator.service_role_key):
            return Response.json(
                401,
                {
                    "message": "Invalid API key",
                    "hint": "Double check your Supabase `anon` or `service_role` API key.",
                },
            )
        token = apikey
        authorization = request.header("authorization")
        if authorization:
            scheme, _, value = authorization.partition(" ")
            if scheme.lower() != "bearer" or not value.strip():
                return Response.json(
                    401,
                    {
                        "code": "PGRST301",
                        "details": None,
                        "hint": None,
                        "message": "Bearer token required",
                    },
                )
            token = value.strip()
        try:
            claims = verify_jwt(token, self.emulator.jwt_secret)
        except InvalidToken as error:
            return Response.json(
                401, {"code": "PGRST301", "details": None, "hint": None, "message": str(error)}
            )
        return Auth(str(claims.get("role") or "anon"), claims)

    async def auth_request(self, request: Request) -> Response:
        apikey = request.header("apikey") or (parse_qs(request.query).get("apikey") or [None])[0]
        if apikey not in (self.emulator.anon_key, self.emulator.service_role_key):
            return Response.json(401, {"message": "Invalid API key"})
        assert self.gotrue is not None
        return await self.gotrue.handle(request, request.path[len("/auth/v1/") :].strip("/"))

    async def broadcast_request(self, request: Request) -> Response:
        """POST {"messages": [{"topic", "event", "payload", "private"?}]}: broadcasts sent by a
        server (Supabase's REST broadcast API); on a private topic only when the JWT's role
        may send on it (the service role may)."""
        if request.method != "POST":
            return Response.json(405, {"message": "POST only"})
        auth = self.authenticate(request)
        if isinstance(auth, Response):
            return auth
        try:
            messages = (request.json() or {}).get("messages")
            if not isinstance(messages, list):
                raise ValueError("messages must be a list")
        except (ValueError, AttributeError) as error:
            return Response.json(400, {"message": f"bad broadcast body: {error}"})
        for message in messages:
            topic = str(message.get("topic") or "")
            private = bool(message.get("private"))
            if private and not (await self.authorize_channel(auth.claims, topic))[1]:
                continue
            channel = _Target(f"realtime:{topic}", private)
            payload = {
                "type": "broadcast",
                "event": message.get("event"),
                "payload": message.get("payload"),
            }
            self.broadcast(None, channel, payload)
        return Response(202)

    async def handle(self, request: Request) -> Response:
        if request.method == "OPTIONS":
            return Response(
                204,
                headers=[
                    ("Access-Control-Allow-Origin", "*"),
                    ("Access-Control-Allow-Methods", "GET, POST, PATCH, DELETE, HEAD, OPTIONS"),
                    ("Access-Control-Allow-Headers", "*"),
                ],
            )
        if request.path in ("/", "/health"):
            return Response.json(200, {"status": "ok"})
        if request.path.startswith("/auth/v1/"):
            return await self.auth_request(request)
        if request.path.rstrip("/") == "/realtime/v1/api/broadcast":
            return await self.broadcast_request(request)
        if not request.path.startswith("/rest/v1"):
            return Response.json(404, {"message": f"the emulator does not serve {request.path}"})
        self.count("rest_requests")
        with self.lock:
            failure = self.rest_failures.pop(0) if self.rest_failures else None
        if failure is not None:
            self.count("rest_failures_injected")
            return Response.json(
                failure,
                {
                    "code": str(failure),
                    "details": None,
                    "hint": None,
                    "message": "injected failure",
                },
            )
        auth = self.authenticate(request)
        if isinstance(auth, Response):
            return auth
        rest_path = request.path[len("/rest/v1") :].strip("/")
        try:
            return await self.postgrest.handle(request, rest_path, auth)
        except psycopg.OperationalError as error:
            return Response.json(
                503,
                {
                    "code": "PGRST000",
                    "details": str(error),
                    "hint": None,
                    "message": "Database unavailable",
                },
            )
        except Exception as error:  # an emulator bug must not look like a hang
            log.exception("REST request failed")
            return Response.json(
                500,
                {
                    "code": "XX000",
                    "details": repr(error),
                    "hint": None,
                    "message": "emulator error",
                },
            )


class SupabaseEmulator:
    """A Supabase stand-in (PostgREST subset + Realtime) backed by a real Postgres database.

        with SupabaseEmulator(dsn) as emu:
            client = await acreate_client(emu.url, emu.service_role_key)
            ...
            emu.drop_sockets()

    `switch_roles` (default on, as Supabase): run each REST request as the JWT's role (`anon`,
    `authenticated`, `service_role`; `prepare_supabase_database` creates them) so row-level
    security and privileges apply; off, requests run as the DSN's user. `change_source`: "auto"
    (wal2json when `wal_level=logical`, else triggers), "triggers" or "wal2json".
    `subscribe_delay`: seconds between the join reply and "Subscribed to PostgreSQL" (changes
    in between are not delivered, as on Supabase).
    `heartbeat_timeout`: a socket that sends nothing for this long is closed (Phoenix: 60 s;
    realtime-py sends a heartbeat every max(hb_interval, 15) s). `max_rows`: Supabase's "Max
    rows" (PostgREST `db-max-rows`, 1000 on a new project): no table read or set-returning RPC
    answers more rows, whatever its `limit`; None lifts the cap. `realtime_rls` (default on):
    postgres_changes reach only subscribers who may SELECT the row; off, every subscriber of a
    matching binding gets it (benchmarks compare the two).
    """

    def __init__(
        self,
        dsn: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        jwt_secret: str | None = None,
        schemas: tuple[str, ...] = ("public",),
        switch_roles: bool = True,
        change_source: str = "auto",
        subscribe_delay: float = 0.0,
        pool_size: int = 8,
        heartbeat_timeout: float = 60.0,
        publication: str = "supabase_realtime",
        max_rows: int | None = 1000,
        realtime_rls: bool = True,
    ) -> None:
        if change_source not in ("auto", "triggers", "wal2json"):
            raise ValueError(
                f"change_source must be auto, triggers or wal2json, not {change_source!r}"
            )
        self.dsn = dsn
        self.host = host
        self.port = port
        self.jwt_secret = jwt_secret or secrets.token_urlsafe(32)
        self.schemas = schemas
        self.switch_roles = switch_roles
        self.change_source = change_source
        self.initial_subscribe_delay = subscribe_delay
        self.heartbeat_timeout = heartbeat_timeout
        self.pool_size = pool_size
        self.publication = publication
        self.max_rows = max_rows
        self.realtime_rls = realtime_rls
        self.anon_key, self.service_role_key = project_keys(self.jwt_secret)
        self.wal_level: str | None = None
        self._core: _Core | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> Self:
        if self._thread is not None:
            raise RuntimeError("the emulator is already running")
        self._core = _Core(self)
        started: concurrent.futures.Future[int] = concurrent.futures.Future()
        loop = asyncio.new_event_loop()
        self._loop = loop

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                assert self._core is not None
                loop.run_until_complete(self._core.main(started))
            finally:
                with contextlib.suppress(Exception):
                    pending = asyncio.all_tasks(loop)
                    for task in pending:
                        task.cancel()
                    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                loop.close()

        self._thread = threading.Thread(target=run, name="supabase-emulator", daemon=True)
        self._thread.start()
        try:
            self.port = started.result(timeout=30)
        except BaseException:
            self._thread.join(5)
            self._thread = None
            raise
        return self

    def close(self) -> None:
        thread, loop, core = self._thread, self._loop, self._core
        if thread is None or loop is None or core is None:
            return
        if core.stop_event is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(core.stop_event.set)
        thread.join(15)
        self._thread = None
        if thread.is_alive():
            raise RuntimeError("the emulator did not stop within 15 s")

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.close)

    # -- addresses and keys -----------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def rest_url(self) -> str:
        return f"{self.url}/rest/v1"

    @property
    def realtime_url(self) -> str:
        return f"ws://{self.host}:{self.port}/realtime/v1/websocket"

    @property
    def change_feed(self) -> str:
        """The change source in use: "triggers" or "wal2json"."""
        return self._core.feed.kind if self._core and self._core.feed else "?"

    def create_user(self, email: str, password: str) -> str:
        """A Supabase Auth user (auth.users) who can sign in with this password; their id."""
        return create_user(self.dsn, email, password)

    def sign_jwt(self, claims: dict[str, Any]) -> str:
        """A token for `Authorization: Bearer` / `access_token` (e.g. role authenticated)."""
        claims = {"iat": int(time.time()), "exp": int(time.time()) + 3600, **claims}
        return sign_jwt(claims, self.jwt_secret)

    # -- fault injection (thread-safe) ------------------------------------------------------------

    def _core_or_fail(self) -> _Core:
        if self._core is None or self._thread is None:
            raise RuntimeError("the emulator is not running")
        return self._core

    def _in_loop(self, fn: Callable[[], Any]) -> Any:
        self._core_or_fail()
        assert self._loop is not None
        if threading.current_thread() is self._thread:
            return fn()
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def call() -> None:
            try:
                future.set_result(fn())
            except BaseException as error:
                future.set_exception(error)

        self._loop.call_soon_threadsafe(call)
        return future.result(timeout=10)

    def drop_sockets(self, code: int | None = None) -> int:
        """Close every Realtime WebSocket now. Default: abruptly (TCP abort, no close frame; the
        client sees code 1006). With `code` (e.g. 1001, 1011): a close frame with that code.
        Returns how many sockets were dropped."""
        core = self._core_or_fail()
        return self._in_loop(lambda: core.drop_sockets(code))

    def freeze_sockets(self) -> int:
        """Make every Realtime WebSocket silent without closing it (a half-open connection):
        nothing is read or sent any more. realtime-py has no heartbeat timeout; only the
        `websockets` keepalive (ping every 20 s, 20 s timeout) notices. Returns how many."""
        core = self._core_or_fail()
        return self._in_loop(core.freeze_sockets)

    def kick_channels(self) -> int:
        """Send `phx_error` on every joined channel and forget it server-side (a crashed
        channel); the socket stays up. Returns how many channels were kicked."""
        core = self._core_or_fail()
        return self._in_loop(core.kick_channels)

    def set_event_loss(self, fraction: float, seed: int | None = None) -> None:
        """Lose this share (0..1) of postgres_changes messages before they are sent."""
        if not 0.0 <= fraction <= 1.0:
            raise ValueError("fraction must be within 0..1")
        core = self._core_or_fail()
        with core.lock:
            core.event_loss = fraction
            if seed is not None:
                core.rng = random.Random(seed)

    def set_event_delay(self, seconds: float) -> None:
        """Send every postgres_changes message this much later (order is kept)."""
        self._core_or_fail().event_delay = max(0.0, float(seconds))

    def set_subscribe_delay(self, seconds: float) -> None:
        """Delay "Subscribed to PostgreSQL" (and the start of delivery) after a join reply."""
        self._core_or_fail().subscribe_delay = max(0.0, float(seconds))

    def pause_realtime(self) -> None:
        """Refuse new WebSocket connections (HTTP 503) until resume_realtime()."""
        self.refuse_realtime(503)

    def refuse_realtime(self, status: int, retry_after: float | None = None) -> None:
        """Refuse new WebSocket connections with HTTP `status` (429: "Too many connected
        users", with `Retry-After` seconds when given) until resume_realtime()."""
        core = self._core_or_fail()
        core.refusal = (status, retry_after)
        core.paused = True

    def set_message_quota(self, per_second: int | None) -> None:
        """The project's Realtime messages per second (Free 100, Pro 500; None: no quota):
        every broadcast received and every delivery counts; over it, the channel gets a system
        error "Too many messages per second" and is closed."""
        self._core_or_fail().message_quota = per_second

    def resume_realtime(self) -> None:
        self._core_or_fail().paused = False

    def fail_rest(self, count: int = 1, status: int = 503) -> None:
        """Answer the next `count` REST requests with `status` (PostgREST-shaped body)."""
        core = self._core_or_fail()
        with core.lock:
            core.rest_failures.extend([status] * count)

    def set_max_rows(self, rows: int | None) -> None:
        """Change "Max rows" (as the project's API settings do, at once): no read answers more."""
        self.max_rows = rows
        self._core_or_fail().postgrest.max_rows = rows

    def reload_schema(self) -> None:
        """Re-read tables/functions and the realtime publication (after DDL)."""
        core = self._core_or_fail()
        assert self._loop is not None

        async def reload() -> None:
            await core.reload()
            await core.refresh_capture()

        asyncio.run_coroutine_threadsafe(reload(), self._loop).result(timeout=30)

    # -- observation ------------------------------------------------------------------------------

    def stats(self) -> Stats:
        core = self._core_or_fail()
        with core.lock:
            counters = dict(core.counters)
        for _ in range(100):  # the loop thread may change the set while we copy it
            try:
                sockets = list(core.sockets)
                break
            except RuntimeError:
                continue
        else:
            sockets = []
        return Stats(**counters, open_sockets=sum(1 for s in sockets if not s.closed))

    def wait_until(self, predicate: Callable[[Stats], bool], timeout: float = 10.0) -> Stats:
        """Block until predicate(stats()) holds; raise TimeoutError with the last stats."""
        deadline = time.monotonic() + timeout
        while True:
            stats = self.stats()
            if predicate(stats):
                return stats
            if time.monotonic() > deadline:
                raise TimeoutError(f"emulator condition not met within {timeout}s: {stats}")
            time.sleep(0.01)

    async def async_wait_until(
        self, predicate: Callable[[Stats], bool], timeout: float = 10.0
    ) -> Stats:
        deadline = time.monotonic() + timeout
        while True:
            stats = self.stats()
            if predicate(stats):
                return stats
            if time.monotonic() > deadline:
                raise TimeoutError(f"emulator condition not met within {timeout}s: {stats}")
            await asyncio.sleep(0.01)
