"""Realtime: Phoenix Channels protocol over a WebSocket, ``vsn=1.0.0`` and ``vsn=2.0.0``.

Written from the public protocol (Phoenix channel messages and Supabase's documented
``postgres_changes`` payloads). With ``vsn=1.0.0`` every frame is one JSON object
``{"topic", "event", "payload", "ref", "join_ref"}``; with ``vsn=2.0.0`` (supabase-js's
default) a JSON array ``[join_ref, ref, topic, event, payload]``, and a client's broadcast may
come as a binary "user broadcast push" frame (kind 3: lengths of join_ref, ref, topic, event,
metadata, the payload's encoding, then those fields and the payload).

Authorization, as on Supabase:
- postgres_changes are delivered to a subscriber only when its role and claims (the API key's,
  or the ``access_token`` of its latest join) can SELECT the row: the row is looked up by its
  primary key as that role, with ``request.jwt.claims`` set (a role with BYPASSRLS, such as
  service_role, sees every row). DELETE events are not checked (the row is gone).
- A channel joined with ``config.private`` is a private channel: the join is refused ("Unauthorized:
  You do not have permissions to read from this Channel topic: <topic>") unless the policies on
  ``realtime.messages`` let the subscriber's role SELECT a broadcast message of that topic
  (``realtime.topic()`` returns it); a broadcast sent on it is relayed only when they let it
  INSERT one. Private and public channels of the same name are separate.

Client → server:
- ``phx_join`` on ``realtime:<name>``; ``payload.config.postgres_changes`` is a list of bindings
  ``{"event": "INSERT"|"UPDATE"|"DELETE"|"*", "schema", "table"?, "filter"?, "select"?}`` and
  ``payload.access_token`` an optional JWT. Reply: ``phx_reply`` ``{"status": "ok", "response":
  {"postgres_changes": [binding + {"id": n}, ...]}}`` (ids are positive, stable per binding), then,
  after the configurable subscribe delay, the ``system`` message ``{"channel": <name>,
  "extension": "postgres_changes", "message": "Subscribed to PostgreSQL", "status": "ok"}``.
  Changes are delivered to a binding only from that moment on: like the real server, changes
  between the join reply (the client's SUBSCRIBED) and this message are not delivered.
  A binding naming an unknown table/column or a bad filter gets a ``system`` message with
  ``"status": "error"`` instead (the client turns it into CHANNEL_ERROR).
- ``heartbeat`` on topic ``phoenix`` → ``phx_reply`` ok with the same ref.
- ``access_token`` → accepted silently (an invalid token gets a ``system`` error).
- ``phx_leave`` → ``phx_reply`` ok, then ``phx_close``.
- ``broadcast`` → relayed to the other sockets joined to the topic (and to the sender when
  ``config.broadcast.self``); acknowledged when ``config.broadcast.ack``.
- anything else on a topic that is not joined → ``phx_reply`` error ``unmatched topic``.

Server → client change events: ``postgres_changes`` with ``payload.ids`` (the ids of every
binding of the channel that matches) and ``payload.data`` = ``{schema, table, commit_timestamp
(ISO 8601 UTC, ms, "Z"), type, columns: [{name, type}], errors: null, record (INSERT/UPDATE),
old_record (UPDATE/DELETE)}``. ``old_record`` is the full old row when the table has
``REPLICA IDENTITY FULL`` and only its primary-key columns otherwise. Filters
(``col=op.value``; eq neq lt lte gt gte in is, several joined by commas) are evaluated against
the new row; DELETE events are not filtered (as on Supabase).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import re
import time
import zlib
from dataclasses import dataclass, field
from datetime import UTC
from typing import TYPE_CHECKING, Any

from websockets.frames import Opcode
from websockets.server import ServerProtocol

from .changes import Change
from .postgrest import parse_list, split_top, unquote

if TYPE_CHECKING:
    from .schema import Table
    from .server import _Core

log = logging.getLogger(__name__)

FILTER_OPS = ("eq", "neq", "lt", "lte", "gt", "gte", "in", "is")


class BindingError(ValueError):
    pass


@dataclass(frozen=True)
class FilterCondition:
    column: str
    op: str
    value: str
    values: tuple[str, ...] = ()

    def matches(self, record: dict[str, Any]) -> bool:
        if self.column not in record:
            return False
        actual = record[self.column]
        if self.op == "is":
            wanted = self.value.lower()
            if wanted == "null":
                return actual is None
            if wanted in ("true", "false"):
                return actual is (wanted == "true")
            return False
        if actual is None:
            return False
        if self.op == "in":
            return any(_compare(actual, v) == 0 for v in self.values)
        result = _compare(actual, self.value)
        if result is None:
            return False
        return {
            "eq": result == 0,
            "neq": result != 0,
            "lt": result < 0,
            "lte": result <= 0,
            "gt": result > 0,
            "gte": result >= 0,
        }[self.op]


def _compare(actual: Any, text: str) -> int | None:
    """Compare a JSON value of the row with a filter's text value, typed by the JSON value."""
    if isinstance(actual, bool):
        if text.lower() not in ("true", "false", "t", "f"):
            return None
        wanted = text.lower() in ("true", "t")
        return (actual > wanted) - (actual < wanted)
    if isinstance(actual, int | float):
        try:
            number = float(text)
        except ValueError:
            return None
        if math.isnan(number):
            return None
        return (actual > number) - (actual < number)
    if isinstance(actual, dict | list):
        try:
            other = json.loads(text)
        except ValueError:
            return None
        return 0 if other == actual else 1
    left = str(actual)
    if _UUID.match(left) and _UUID.match(text):
        left, text = left.lower(), text.lower()
    return (left > text) - (left < text)


_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def parse_filter(text: str | None, table: Table | None) -> tuple[FilterCondition, ...]:
    if not text:
        return ()
    conditions = []
    for part in split_top(text):
        column, sep, rest = part.partition("=")
        op, dot, value = rest.partition(".")
        if not sep or not dot or op not in FILTER_OPS:
            raise BindingError(f"Error parsing `filter` params: {text}")
        column = column.strip()
        if table is not None and column not in table.columns:
            raise BindingError(f"Error parsing `filter` params: column {column} does not exist")
        values: tuple[str, ...] = ()
        if op == "in":
            try:
                values = tuple(parse_list(value))
            except Exception:
                raise BindingError(f"Error parsing `filter` params: {text}") from None
        conditions.append(
            FilterCondition(column, op, unquote(value) if op != "in" else value, values)
        )
    return tuple(conditions)


@dataclass
class Binding:
    id: int
    event: str
    schema: str
    table: str | None
    filter: str | None
    select: list[str] | None
    conditions: tuple[FilterCondition, ...]
    echo: dict[str, Any]

    def matches(self, change: Change) -> bool:
        if self.event != "*" and self.event.upper() != change.type:
            return False
        if self.schema not in ("*", change.schema):
            return False
        if self.table not in (None, "*", change.table):
            return False
        if change.type == "DELETE" or not self.conditions:
            return True
        record = change.record or {}
        return all(condition.matches(record) for condition in self.conditions)


def binding_id(binding: dict[str, Any]) -> int:
    """Stable positive id per binding (the real server derives its ids from the binding too)."""
    key = json.dumps(
        {k: binding.get(k) for k in ("event", "schema", "table", "filter")}, sort_keys=True
    )
    return zlib.crc32(key.encode()) % 100_000_000 + 1


@dataclass
class Channel:
    topic: str
    join_ref: str | None
    bindings: list[Binding]
    broadcast_self: bool = False
    broadcast_ack: bool = False
    active: bool = False
    activation: asyncio.Task[None] | None = None
    private: bool = False
    #: a private channel: whether the subscriber may send broadcasts on it
    can_send: bool = True


USER_BROADCAST_PUSH = 3


def decode_v2(data: bytes) -> dict[str, Any] | None:
    """A vsn=2.0.0 frame as a v1-shaped message: a JSON array, or a binary user broadcast."""
    if data[:1] == b"[":
        try:
            join_ref, ref, topic, event, payload = json.loads(data)
        except (ValueError, TypeError):
            return None
        return {
            "join_ref": join_ref,
            "ref": ref,
            "topic": topic,
            "event": event,
            "payload": payload,
        }
    if len(data) < 7 or data[0] != USER_BROADCAST_PUSH:
        return None
    sizes = list(data[1:6])
    encoding = data[6]
    offset, fields = 7, []
    for size in sizes:
        fields.append(data[offset : offset + size].decode("utf-8", "replace"))
        offset += size
    join_ref, ref, topic, user_event, metadata = fields
    body = data[offset:]
    payload: dict[str, Any] = {"type": "broadcast", "event": user_event}
    if metadata:
        with contextlib.suppress(ValueError):
            payload.update(json.loads(metadata))
    try:
        payload["payload"] = json.loads(body) if encoding == 1 else body.decode("latin-1")
    except ValueError:
        return None
    return {
        "join_ref": join_ref or None,
        "ref": ref or None,
        "topic": topic,
        "event": "broadcast",
        "payload": payload,
    }


@dataclass(order=True)
class _Outgoing:
    due: float
    seq: int
    text: str = field(compare=False)


class RealtimeSocket:
    """One client WebSocket; all methods run on the emulator's event loop."""

    _seq = 0

    def __init__(
        self,
        core: _Core,
        protocol: ServerProtocol,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        claims: dict[str, Any],
        vsn: str = "1.0.0",
    ) -> None:
        RealtimeSocket._seq += 1
        self.vsn = vsn
        self.id = RealtimeSocket._seq
        self.core = core
        self.protocol = protocol
        self.reader = reader
        self.writer = writer
        self.claims = claims
        self.channels: dict[str, Channel] = {}
        self.closed = False
        self.frozen = False
        self.last_seen = time.monotonic()
        self._events: asyncio.Queue[_Outgoing] = asyncio.Queue()
        self._counter = 0
        self._message: list[bytes] = []

    # -- transport ------------------------------------------------------------------------------

    def _flush(self) -> None:
        for chunk in self.protocol.data_to_send():
            if chunk:
                self.writer.write(chunk)
            elif self.writer.can_write_eof():
                with contextlib.suppress(OSError):
                    self.writer.write_eof()

    def encode(self, message: dict[str, Any]) -> str:
        if self.vsn == "2.0.0":
            fields = [message.get(k) for k in ("join_ref", "ref", "topic", "event", "payload")]
            return json.dumps(fields, separators=(",", ":"))
        return json.dumps(message, separators=(",", ":"))

    def send(self, message: dict[str, Any]) -> None:
        if self.closed or self.frozen:
            return
        try:
            self.protocol.send_text(self.encode(message).encode())
            self._flush()
        except Exception:
            self.abort()

    def abort(self) -> None:
        """Close the TCP connection without a WebSocket close frame (an abrupt drop)."""
        self.closed = True
        self.writer.transport.abort()

    def freeze(self) -> None:
        """Go silent without closing: read nothing (pings and heartbeats go unanswered), send
        nothing (change events are counted as dropped), like a half-open connection."""
        self.frozen = True
        with contextlib.suppress(Exception):
            self.writer.transport.pause_reading()

    def kick(self) -> int:
        """Fail every joined channel with `phx_error`, as when the server-side channel crashes;
        the client has to join again. Returns how many channels were kicked."""
        channels = list(self.channels.values())
        for channel in channels:
            self._leave(channel)
            self.send(
                {
                    "topic": channel.topic,
                    "event": "phx_error",
                    "payload": {},
                    "ref": channel.join_ref,
                    "join_ref": channel.join_ref,
                }
            )
        return len(channels)

    def close(self, code: int = 1000, reason: str = "") -> None:
        if self.closed:
            return
        with contextlib.suppress(Exception):
            self.protocol.send_close(code, reason)
            self._flush()
        self.closed = True
        self.writer.transport.close()

    async def run(self) -> None:
        sender = asyncio.create_task(self._sender())
        try:
            while not self.closed:
                data = await self.reader.read(65536)
                self.last_seen = time.monotonic()
                if data:
                    self.protocol.receive_data(data)
                else:
                    self.protocol.receive_eof()
                self._flush()
                for frame in self.protocol.events_received():
                    if frame.opcode in (Opcode.TEXT, Opcode.CONT, Opcode.BINARY):
                        self._message.append(frame.data)
                        if frame.fin:
                            text = b"".join(self._message)
                            self._message = []
                            await self._on_text(text)
                if not data or self.protocol.close_expected():
                    break
        except (ConnectionError, OSError):
            pass
        finally:
            self.closed = True
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await sender
            for channel in self.channels.values():
                if channel.activation:
                    channel.activation.cancel()
            if not self.writer.transport.is_closing():
                self.writer.transport.close()

    # -- change events --------------------------------------------------------------------------

    def wants(self, change: Change) -> bool:
        """Whether a joined channel of this socket has a binding for the change."""
        return any(
            channel.active and any(b.matches(change) for b in channel.bindings)
            for channel in self.channels.values()
        )

    def dispatch(self, change: Change, table: Table | None) -> None:
        for channel in self.channels.values():
            if not channel.active:
                continue
            ids = list(dict.fromkeys(b.id for b in channel.bindings if b.matches(change)))
            if not ids:
                continue
            selects = [b.select for b in channel.bindings if b.id in ids]
            select = (
                None
                if any(s is None for s in selects)
                else sorted({c for s in selects for c in s or []})
            )
            if self.core.lose_event():
                continue
            if not self.core.spend(1):
                self.core.shut_down(channel.topic)
                continue
            message = {
                "topic": channel.topic,
                "event": "postgres_changes",
                "payload": {"ids": ids, "data": change_data(change, table, select)},
                "ref": None,
                "join_ref": channel.join_ref,
            }
            self._counter += 1
            due = time.monotonic() + self.core.event_delay
            self._events.put_nowait(_Outgoing(due, self._counter, self.encode(message)))

    async def _sender(self) -> None:
        while True:
            item = await self._events.get()
            wait = item.due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if self.closed or self.frozen:
                self.core.count("events_dropped")
                continue
            try:
                self.protocol.send_text(item.text.encode())
                self._flush()
                self.core.count("events_sent")
            except Exception:
                self.core.count("events_dropped")

    # -- protocol -------------------------------------------------------------------------------

    def reply(
        self, topic: str, ref: Any, join_ref: Any, status: str, response: dict[str, Any]
    ) -> None:
        self.send(
            {
                "topic": topic,
                "event": "phx_reply",
                "payload": {"status": status, "response": response},
                "ref": ref,
                "join_ref": join_ref,
            }
        )

    def system(self, channel: Channel, status: str, message: str) -> None:
        self.send(
            {
                "topic": channel.topic,
                "event": "system",
                "payload": {
                    "channel": channel.topic.removeprefix("realtime:"),
                    "extension": "postgres_changes",
                    "message": message,
                    "status": status,
                },
                "ref": None,
                "join_ref": channel.join_ref,
            }
        )

    async def _on_text(self, text: bytes) -> None:
        try:
            message = decode_v2(text) if self.vsn == "2.0.0" else json.loads(text)
            if message is None:
                raise ValueError("not a vsn 2.0.0 message")
            topic = message["topic"]
            event = message["event"]
            payload = message.get("payload") or {}
        except (ValueError, KeyError, TypeError):
            log.warning("realtime: unparseable message %r", text[:200])
            return
        ref = message.get("ref")
        join_ref = message.get("join_ref")
        if topic == "phoenix" and event == "heartbeat":
            self.core.count("heartbeats")
            self.reply("phoenix", ref, None, "ok", {})
            return
        if event == "phx_join":
            await self._join(topic, ref, join_ref if join_ref is not None else ref, payload)
            return
        channel = self.channels.get(topic)
        if channel is None:
            self.reply(topic, ref, join_ref, "error", {"reason": "unmatched topic"})
            return
        if event == "phx_leave":
            self._leave(channel)
            self.reply(topic, ref, join_ref, "ok", {})
            self.send(
                {
                    "topic": topic,
                    "event": "phx_close",
                    "payload": {},
                    "ref": channel.join_ref,
                    "join_ref": channel.join_ref,
                }
            )
        elif event == "access_token":
            token = payload.get("access_token")
            if token:
                claims = self.core.check_token(token)
                if claims is None:
                    self.system(channel, "error", "Invalid JWT Token")
                else:
                    self.claims = claims
        elif event == "broadcast":
            if channel.can_send:
                self.core.broadcast(self, channel, payload)
            if channel.broadcast_ack:
                if channel.can_send:
                    self.reply(topic, ref, join_ref, "ok", {})
                else:
                    reason = "Unauthorized: You do not have permissions to write to this Channel"
                    self.reply(topic, ref, join_ref, "error", {"reason": reason})
        elif event == "presence":
            self.reply(topic, ref, join_ref, "ok", {})
        else:
            self.reply(topic, ref, join_ref, "error", {"reason": f"unknown event {event}"})

    def close_channel(self, channel: Channel) -> None:
        """The server closes the channel (phx_close) and forgets it."""
        self._leave(channel)
        self.send(
            {
                "topic": channel.topic,
                "event": "phx_close",
                "payload": {},
                "ref": channel.join_ref,
                "join_ref": channel.join_ref,
            }
        )

    def _leave(self, channel: Channel) -> None:
        if channel.activation:
            channel.activation.cancel()
        channel.active = False
        self.channels.pop(channel.topic, None)

    async def _join(self, topic: str, ref: Any, join_ref: Any, payload: dict[str, Any]) -> None:
        self.core.count("joins")
        token = payload.get("access_token")
        if token:
            claims = self.core.check_token(token)
            if claims is None:
                self.reply(topic, ref, join_ref, "error", {"reason": "Invalid JWT Token"})
                return
            self.claims = claims
        if not topic.startswith("realtime:"):
            self.reply(topic, ref, join_ref, "error", {"reason": "unmatched topic"})
            return
        old = self.channels.get(topic)
        if old is not None:
            self._leave(old)
        config = payload.get("config") or {}
        private = bool(config.get("private"))
        can_send = True
        if private:
            name = topic.removeprefix("realtime:")
            can_read, can_send = await self.core.authorize_channel(self.claims, name)
            if not can_read:
                reason = (
                    "Unauthorized: You do not have permissions to read from this Channel topic:"
                    f" {name}"
                )
                self.reply(topic, ref, join_ref, "error", {"reason": reason})
                return
        raw_bindings = config.get("postgres_changes") or []
        await self.core.refresh_capture(raw_bindings)
        bindings: list[Binding] = []
        errors: list[str] = []
        echoes: list[dict[str, Any]] = []
        for raw in raw_bindings:
            schema = raw.get("schema") or "public"
            table_name = raw.get("table")
            event = raw.get("event") or "*"
            echo = {k: raw[k] for k in ("event", "schema", "table", "filter", "select") if k in raw}
            echo.setdefault("schema", schema)
            echo["id"] = binding_id(echo)
            echoes.append(echo)
            table = (
                self.core.cache.table(schema, table_name) if table_name not in (None, "*") else None
            )
            try:
                if event not in ("*", "INSERT", "UPDATE", "DELETE"):
                    raise BindingError(f"invalid event {event}")
                if table_name not in (None, "*") and table is None:
                    raise BindingError(f"table {schema}.{table_name} does not exist")
                if table_name not in (None, "*") and (schema, table_name) not in (
                    self.core.realtime_tables
                ):  # hosted Realtime fails the whole channel, not just this binding
                    raise BindingError(f"{schema}.{table_name} is not in the publication")
                conditions = parse_filter(raw.get("filter"), table)
            except BindingError as error:
                errors.append(
                    "Unable to subscribe to changes with given parameters. Please check Realtime is"
                    f" enabled for the given connect parameters: [{_describe(raw)}] ({error})"
                )
                continue
            bindings.append(
                Binding(
                    echo["id"],
                    event,
                    schema,
                    table_name,
                    raw.get("filter"),
                    raw.get("select"),
                    conditions,
                    echo,
                )
            )
        broadcast = config.get("broadcast") or {}
        channel = Channel(
            topic,
            join_ref,
            bindings,
            broadcast_self=bool(broadcast.get("self")),
            broadcast_ack=bool(broadcast.get("ack")),
            private=private,
            can_send=can_send,
        )
        self.channels[topic] = channel
        self.reply(topic, ref, join_ref, "ok", {"postgres_changes": echoes})
        if (config.get("presence") or {}).get("enabled"):
            self.send(
                {
                    "topic": topic,
                    "event": "presence_state",
                    "payload": {},
                    "ref": None,
                    "join_ref": join_ref,
                }
            )
        if raw_bindings:
            channel.activation = asyncio.create_task(self._activate(channel, errors))

    async def _activate(self, channel: Channel, errors: list[str]) -> None:
        delay = self.core.subscribe_delay
        if delay > 0:
            await asyncio.sleep(delay)
        if self.channels.get(channel.topic) is not channel or self.closed:
            return
        if errors:
            self.system(channel, "error", "; ".join(errors))
            return
        channel.active = True
        self.system(channel, "ok", "Subscribed to PostgreSQL")


def _describe(raw: dict[str, Any]) -> str:
    return ", ".join(
        f"{k}: {raw.get(k)}" for k in ("event", "schema", "table", "filter") if k in raw
    )


def change_data(change: Change, table: Table | None, select: list[str] | None) -> dict[str, Any]:
    stamp = change.commit_timestamp
    utc = stamp.astimezone(UTC) if stamp.tzinfo else stamp.replace(tzinfo=UTC)
    commit = utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"
    if table is not None:
        columns = [{"name": c.name, "type": c.typname} for c in table.columns.values()]
    else:
        columns = [
            {"name": k, "type": "unknown"} for k in (change.record or change.old_record or {})
        ]
    if select:
        columns = [c for c in columns if c["name"] in select]

    def pick(row: dict[str, Any] | None) -> dict[str, Any]:
        row = row or {}
        return {k: v for k, v in row.items() if k in select} if select else dict(row)

    data: dict[str, Any] = {
        "schema": change.schema,
        "table": change.table,
        "commit_timestamp": commit,
        "type": change.type,
        "columns": columns,
        "errors": None,
    }
    if change.type in ("INSERT", "UPDATE"):
        data["record"] = pick(change.record)
    if change.type in ("UPDATE", "DELETE"):
        old = change.old_record or {}
        if table is None or table.replica_identity != "f":
            keys = table.primary_key if table is not None else []
            old = {k: v for k, v in old.items() if k in keys}
        data["old_record"] = pick(old)
    return data
