"""Supabase emulator for tests: a PostgREST subset and Realtime (Phoenix v1) on one origin,
backed by a real PostgreSQL database, for the unmodified official `supabase` client (2.34.1).

    from tests.support.supabase_emulator import (
        SupabaseEmulator, default_migrations, temporary_database)

    with temporary_database(migrations=default_migrations()) as dsn, SupabaseEmulator(dsn) as emu:
        client = await acreate_client(emu.url, emu.service_role_key)   # or emu.anon_key
        ...
        emu.drop_sockets(); emu.set_event_loss(0.05, seed=1); emu.stats().events_dropped

`http://127.0.0.1:PORT` serves `/rest/v1/...` (see `postgrest.py` for the exact subset and error
shapes), `/realtime/v1/websocket?apikey=...&vsn=1.0.0|2.0.0` (see `realtime.py` for the messages
and the authorization of changes and private channels), `/realtime/v1/api/broadcast` and a
minimal `/auth/v1` (`gotrue.py`: password sign-in of users made with `emu.create_user(email,
password)`). As strict as Supabase by default: REST requests run as the JWT's role with RLS
(`switch_roles=True`), reads are capped at `max_rows=1000`, Realtime changes reach only
subscribers who may SELECT the row, private channels only those the realtime.messages policies
admit. `temporary_database` makes the database Supabase-shaped first (roles with Supabase's
default privileges, auth.users, realtime.messages: `prepare_supabase_database`).
The server runs in a daemon thread with its own asyncio loop (sync and async tests alike; every
public method is thread-safe; `async with` works too). Keys are HS256 JWTs signed with
`emu.jwt_secret` (`emu.sign_jwt({...})` makes more, e.g. role `authenticated` with claims).
Requests need `apikey` = one of the two keys (else 401), and a valid `Authorization: Bearer`
JWT if one is sent (else 401 PGRST301). Tables and functions are introspected from the
database (reloaded when an unknown name is asked for, or with `emu.reload_schema()`).

Change source. The shared test server runs `wal_level=replica` (and must not be restarted),
so `change_source="auto"` uses triggers + LISTEN/NOTIFY there: a per-emulator "slot" row in
`_semo_emu.slots`, an AFTER row trigger on every published table writing to
`_semo_emu.changes`, drained with DELETE ... RETURNING on each notification (`changes.py`). On
a server with `wal_level=logical` it uses wal2json through a temporary logical replication
slot per emulator instance (dropped on close). The whole test file passes with both sources
(the wal2json run used a private cluster started with wal_level=logical; point
`SEMO_TEST_POSTGRES` at such a server to repeat it). Realtime emits changes only for tables in
the `supabase_realtime` publication when it exists (a binding on any other table fails the
whole channel with a system error, as hosted) (`temporary_database` creates it empty, as
Supabase does, before the migrations run), for every table of `public` otherwise.

Fault injection (thread-safe): `drop_sockets(code=None)` (TCP abort → client sees 1006; or a
close frame with `code`), `freeze_sockets()` (half-open: nothing read or sent),
`kick_channels()` (`phx_error` on every joined channel), `set_event_loss(fraction, seed)`,
`set_event_delay(seconds)`, `set_subscribe_delay(seconds)` (gap between SUBSCRIBED and
"Subscribed to PostgreSQL", in which changes are not delivered), `pause_realtime()` /
`resume_realtime()` (new WebSocket upgrades get HTTP 503), `fail_rest(n, status)`,
`refuse_realtime(status, retry_after)` (e.g. 429 with Retry-After), `set_max_rows(n)`
("Max rows", for tables and set-returning functions alike), `set_message_quota(n)` (messages
a second: over it a channel gets "Too many messages per second" and is closed).
Counters: `stats()` → connections, connections_refused, sockets_dropped, joins, heartbeats,
changes_read, events_sent, events_dropped, rest_requests, rest_failures_injected,
open_sockets; `wait_until(pred)` / `await async_wait_until(pred)`.

What realtime-py 2.34.1 does (observed against this emulator; the tests pin it down):
- Socket lost (TCP drop 1006, close frame 1011 → ConnectionClosedError; close 1000/1001 →
  ConnectionClosedOK, same handling): the subscribe callback gets CHANNEL_ERROR once (error =
  the ConnectionClosed exception); `connect()` runs at once (first attempt without delay), and
  on success every errored channel rejoins with the same join payload: SUBSCRIBED again, then
  "Subscribed to PostgreSQL" again. Changes committed before the new "Subscribed to
  PostgreSQL" are never delivered (nothing is buffered for an absent client).
- Reconnect failing: `max_retries` attempts in all (default 5, the immediate one included),
  sleeping `initial_backoff * 2**(n-1)` between them (default 1, 2, 4, 8 s: it gives up about
  15 s after the drop). Then the exception ends the listen task ("Task exception was never
  retrieved"), `realtime.is_connected` is False, channels stay ERRORED, and NO further status
  callback fires (the last one seen is the CHANNEL_ERROR of the drop). It never retries by
  itself, even once the server is back; `await client.realtime.connect()` (which can raise)
  reconnects and rejoins the errored channels (SUBSCRIBED fires again). Options:
  `AsyncClientOptions(realtime={"max_retries": ..., "initial_backoff": ...})`.
- Channel-level errors (`phx_error`, a `system` message with status "error", an error reply to
  the join): CHANNEL_ERROR (error = Exception(json payload)), then the channel's rejoin timer
  joins again on the same socket after 1, 2, 5, 10, 10, ... s, forever (30 s for rate-limit
  reasons); a join without reply within `timeout` (10 s) gives TIMED_OUT, then the same timer.
- An exception raised by any callback ends the listen task silently: the socket stays open,
  heartbeats continue, the channel stays JOINED, no status callback fires and no message is
  handled any more. Watch `client.realtime._listen_task.done()`; callbacks must never raise.
- A half-open socket is not noticed by realtime-py (it sends a heartbeat every
  max(hb_interval, 15) s and ignores the replies); only the `websockets` keepalive (ping every
  20 s, 20 s timeout, not configurable through realtime-py) closes it, with 1011 "keepalive
  ping timeout": observed CHANNEL_ERROR ~50 s after `freeze_sockets()`, then reconnect.
- SUBSCRIBED fires on the join reply, before "Subscribed to PostgreSQL" (an `on_system`
  callback sees the latter); binding ids must be non-zero and the echoed bindings must match
  event/schema/table/filter exactly, else CHANNEL_ERROR "mismatch between server and client
  bindings". Callbacks get the raw payload `{"ids": [...], "data": {...}}`; `data["type"]` is a
  str enum equal to "INSERT"/"UPDATE"/"DELETE".
"""

from .auth import sign_jwt, verify_jwt
from .db import (
    ADMIN_DSN,
    default_migrations,
    ensure_supabase_roles,
    prepare_supabase_database,
    temporary_database,
)
from .server import Stats, SupabaseEmulator

__all__ = [
    "ADMIN_DSN",
    "Stats",
    "SupabaseEmulator",
    "default_migrations",
    "ensure_supabase_roles",
    "prepare_supabase_database",
    "sign_jwt",
    "temporary_database",
    "verify_jwt",
]
