"""Agent hooks: the command an agent CLI runs for each, and the server that receives them.

How it works: docs/SESSIONS.md, "Claude Code hooks".
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import hashlib
import json
import logging
import os
import re
import secrets
import shlex
import socket
import stat
import struct
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from semo.engine import safe_json
from semo.engine.logs import ThrottledWarnings, add_secret, discard_secret
from semo.engine.runtime import pid_alive, private_dir, runtime_dir

__all__ = [
    "ENV_SOCKET",
    "ENV_TOKEN",
    "HOOK_EVENTS",
    "MAX_CONNECTIONS",
    "MAX_CONNECTIONS_PER_PEER",
    "MAX_JSON_DEPTH",
    "MAX_MESSAGE_BYTES",
    "HookEvent",
    "HookServer",
    "HookServerError",
    "Peer",
    "TurnTextReader",
    "TurnTextRefused",
    "default_hook_command",
    "default_runtime_dir",
    "hook_command_line",
    "is_semo_hook_command",
]

log = logging.getLogger("semo.hooks")

#: The events semo installs hooks for, as the observer (semo.engine.protocol.observer) names them:
#: Claude Code's spelling.
HOOK_EVENTS: tuple[str, ...] = (
    "SessionStart",
    "UserPromptSubmit",
    "Stop",
    "Notification",
    "SessionEnd",
    "PermissionRequest",
)

#: Events whose hook waits for the engine's decision and prints it for Claude Code (the
#: others are reported and answered ``{"ok": true}`` at once).
DECISION_EVENTS: frozenset[str] = frozenset({"PermissionRequest"})

#: Environment variables the shim reads (keep in sync with hook_shim.py).
ENV_SOCKET = "SEMO_HOOK_SOCKET"
ENV_TOKEN = "SEMO_HOOK_TOKEN"

#: Largest accepted request line (the JSON, without its newline).
MAX_MESSAGE_BYTES = 1024 * 1024

#: AF_UNIX paths are limited to sizeof(sun_path) - 1 bytes on Linux (107), 103 on macOS.
_MAX_SOCKET_PATH = 103 if sys.platform == "darwin" else 107

#: The answer to an accepted request (the shim checks for exactly this prefix).
_ACK = b'{"ok": true}\n'

#: At most this much of an oversize request is read (and dropped) after answering it.
_DISCARD_CAP = 16 * MAX_MESSAGE_BYTES

#: What the shim accepts as a token (secrets.token_urlsafe's alphabet).
_TOKEN_RE = re.compile(r"[A-Za-z0-9_-]{16,}")

#: How long a client may take to send its request line.
_READ_TIMEOUT = 5.0

#: Deepest JSON nesting accepted in a request (Claude Code's payloads nest 3 levels).
MAX_JSON_DEPTH = 64

#: Connections served at once, in all and per connecting process (the shim uses one).
MAX_CONNECTIONS = 64
MAX_CONNECTIONS_PER_PEER = 8

#: Seconds a Stop's transcript may take to read before the turn ends without it. Two thirds of
#: it is how long a transcript that is behind the hook is waited for: Claude Code writes the
#: turn's last entry about 0.1 s after the Stop hook starts, but on a loaded machine (two CPUs
#: kept busy) that took over a second, and the turn's earlier blocks were lost. Only a
#: transcript that is behind costs the wait; it runs in a worker thread.
TRANSCRIPT_TIMEOUT = 4.5

#: Worker threads reading transcripts. A session reads one at a time (its events are in order),
#: so a session whose reads hang or wait holds one thread; the others go on.
_TRANSCRIPT_READERS = 4

#: Pending connections the kernel queues for us (a burst beyond waits in the senders' connect).
_BACKLOG = 16

#: One warning line per kind of trouble at most this often (the count of the rest follows).
WARN_INTERVAL = 10.0

#: The flock a serving engine holds, beside its socket: ``hooks-<pid>.sock.lock``.
_LOCK_SUFFIX = ".lock"


# -- the hook command ---------------------------------------------------------------------------


def default_hook_command() -> list[str]:
    """The fastest way to run the shim with this interpreter: the file itself, no ``site``.

    ``-I`` (isolated: no PYTHON* variables, no user site, script dir not on sys.path) and ``-S``
    (no ``site``: no .pth processing) keep start-up to the bare interpreter; the shim needs only
    the standard library. ``semo hook`` and ``python -m semo.engine.protocol.hook_shim`` work too.
    """
    shim = Path(__file__).resolve().with_name("hook_shim.py")
    return [sys.executable, "-I", "-S", str(shim)]


def hook_command_line(command: Sequence[str], event: str) -> str:
    """The shell command line Claude Code runs for ``event`` (it runs hooks through a shell)."""
    if not command:
        raise ValueError("hook command must not be empty")
    return shlex.join([*command, event])


#: the shim by module name (today's and the pre-`semo.` one) or by file
_SHIM_NAMES = ("semo.engine.protocol.hook_shim", "engine.protocol.hook_shim", "hook_shim.py")


def is_semo_hook_command(command_line: Any) -> bool:
    """Whether a hook's ``command`` is one of ours: it runs the hook shim (by module name or
    file) or ``semo hook`` (any path to ``semo``)."""
    if not isinstance(command_line, str):
        return False
    try:
        words = shlex.split(command_line)
    except ValueError:
        words = command_line.split()
    for i, word in enumerate(words):
        base = os.path.basename(word)
        if base in _SHIM_NAMES:
            return True
        if base == "semo" and i + 1 < len(words) and words[i + 1] == "hook":
            return True
    return False


# -- the receiving end ------------------------------------------------------------------------


class HookEvent(BaseModel):
    """One hook report from a session's Claude Code, authenticated by its token."""

    model_config = ConfigDict(frozen=True)

    session_key: str
    event: str  # Claude Code's event name, e.g. "Stop"
    payload: dict[str, Any]  # the JSON Claude Code wrote on the hook's stdin
    received_at: float  # time.monotonic() when the engine had the whole message
    received_wall: datetime = Field(default_factory=lambda: datetime.now(UTC))
    sent_at: float | None = None  # the shim's time.time() when it sent, if it said
    #: the turn's whole text, read (safely) by the session's TurnTextReader from where the
    #: hook said it is (Claude Code's Stop: its ``transcript_path``); None when the session has
    #: no reader, the place was refused, or it held no such text
    transcript_text: str | None = None

    @property
    def last_assistant_message(self) -> str | None:
        """The model's exact final text (Stop)."""
        value = self.payload.get("last_assistant_message")
        return value if isinstance(value, str) else None

    @property
    def prompt(self) -> str | None:
        """The prompt as submitted (UserPromptSubmit)."""
        value = self.payload.get("prompt")
        return value if isinstance(value, str) else None


class TurnTextRefused(Exception):
    """The place a hook names for its turn's text is not one semo reads; the message says why."""


class TurnTextReader(Protocol):
    """Reads a turn's whole text from where a hook says it is (an adapter's, per session).

    The hook's payload is agent input: the reader refuses any place but the session's own."""

    @property
    def event(self) -> str:
        """The event whose payload names the place (the one that ends a turn)."""
        ...

    def source(self, payload: dict[str, Any]) -> str | None:
        """Where `payload` says the text is, for messages (None: it names no place)."""
        ...

    def read(self, payload: dict[str, Any], *, wait: float) -> str | None:
        """The turn's text, waiting up to `wait` seconds for it to be complete. Blocking;
        raises TurnTextRefused."""
        ...


class HookServerError(OSError):
    """The hook server cannot start (path too long, in use, unsafe directory...)."""


def default_runtime_dir() -> Path:
    """``$XDG_RUNTIME_DIR/semo`` when that is a directory, else ``<tmp>/semo-<uid>``."""
    return runtime_dir()


def _private_dir(path: Path) -> Path:
    """Create ``path`` (mode 0700) or check that the existing one is ours and private."""
    return private_dir(path, HookServerError)


def _token_key(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


EventCallback = Callable[[HookEvent], object]
#: Decides a DECISION_EVENTS event: the hook's output for Claude Code, or None (no decision:
#: Claude Code asks in its own dialog). Cancelled when the hook goes away before it decided.
Decider = Callable[[HookEvent], Awaitable[dict[str, Any] | None]]


@dataclass(eq=False)
class _Connection:
    task: asyncio.Task[None]
    peer: Peer
    reading: bool = True  # still waiting for its request line (may be dropped under pressure)
    output: dict[str, Any] | None = None  # a decision for Claude Code (DECISION_EVENTS)


@dataclass(frozen=True)
class Peer:
    """Who is connected (SO_PEERCRED); pid/uid None where the OS does not tell."""

    pid: int | None
    uid: int | None

    def __str__(self) -> str:
        return f"pid {self.pid} uid {self.uid}" if self.pid is not None else "unknown peer"


class HookServer:
    """Receives hook reports on a Unix socket and turns them into :class:`HookEvent` s.

    ``socket_path``: default ``<runtime_dir>/hooks-<pid>.sock`` with ``runtime_dir`` defaulting to
    :func:`default_runtime_dir` (created 0700). ``on_event`` is called (in the loop, not awaited)
    for each accepted event; events are also put on ``queue`` (default: a new unbounded
    ``self.events`` when no callback is given). ``events``: the accepted event names.
    ``read_timeout``: seconds a client gets to send its whole request line.

    Rejected requests (no or wrong token, malformed or too deeply nested JSON, unknown event,
    over :data:`MAX_MESSAGE_BYTES`, too slow) are counted in ``rejected`` by reason, logged on
    ``semo.hooks`` at most once per reason every ``warn_interval`` seconds (never with the
    token) and answered ``{"ok": false, "error": reason}``.

    Connections are limited: a peer other than ``allowed_uids`` (default: our own uid) is
    refused, one process may hold ``max_connections_per_peer`` at a time, and when
    ``max_connections`` are open the oldest connection still waiting for its request (from the
    process holding the most) is dropped to make room. Events of one session are delivered in
    the order they were received. A session registered with a :class:`TurnTextReader` gets
    its turn's text read (Claude Code's: `semo.engine.agents.claude.transcript`) in a worker thread
    within ``transcript_timeout`` seconds, into :attr:`HookEvent.transcript_text`.
    """

    def __init__(
        self,
        socket_path: Path | str | None = None,
        *,
        runtime_dir: Path | str | None = None,
        on_event: EventCallback | None = None,
        queue: asyncio.Queue[HookEvent] | None = None,
        events: Iterable[str] = HOOK_EVENTS,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        read_timeout: float = _READ_TIMEOUT,
        max_connections: int = MAX_CONNECTIONS,
        max_connections_per_peer: int = MAX_CONNECTIONS_PER_PEER,
        allowed_uids: Iterable[int] | None = None,
        transcript_timeout: float = TRANSCRIPT_TIMEOUT,
        warn_interval: float = WARN_INTERVAL,
    ) -> None:
        if socket_path is None:
            base = Path(runtime_dir) if runtime_dir is not None else default_runtime_dir()
            # one socket per engine process: several engines (and test runs) share a machine
            socket_path = base / f"hooks-{os.getpid()}.sock"
        self.path = Path(socket_path)
        if len(os.fsencode(self.path)) > _MAX_SOCKET_PATH:
            raise HookServerError(
                f"socket path is {len(os.fsencode(self.path))} bytes, over the AF_UNIX limit "
                f"of {_MAX_SOCKET_PATH}: {self.path}"
            )
        self.lock_path = self.path.with_name(self.path.name + _LOCK_SUFFIX)
        self.on_event = on_event
        self.events: asyncio.Queue[HookEvent] | None = queue
        if queue is None and on_event is None:
            self.events = asyncio.Queue()
        self.accepted_events = frozenset(events)
        self.max_message_bytes = max_message_bytes
        self.read_timeout = read_timeout
        self.max_connections = max_connections
        self.max_connections_per_peer = max_connections_per_peer
        self.allowed_uids = frozenset((os.getuid(),) if allowed_uids is None else allowed_uids)
        self.transcript_timeout = transcript_timeout
        self.accepted = 0
        self.rejected: Counter[str] = Counter()
        self._warnings = ThrottledWarnings(log, warn_interval)
        self._sessions: dict[bytes, str] = {}  # sha256(token) -> session key
        self._tokens: dict[str, str] = {}  # session key -> token
        self._readers_of: dict[str, TurnTextReader] = {}  # session key -> its turn text reader
        self._order: dict[str, asyncio.Lock] = {}  # session key -> delivery in arrival order
        self._server: asyncio.AbstractServer | None = None
        self._inode: tuple[int, int] | None = None
        self._lock_fd: int | None = None
        self._clients: set[asyncio.Task[None]] = set()
        self._connections: dict[Peer, list[_Connection]] = {}
        self._open = 0
        self._readers: ThreadPoolExecutor | None = None
        #: decides PermissionRequest events (the engine's approvals); None: never decided here
        self.decide: Decider | None = None
        #: whether a session's CLI can have sent this event now (the session's turn gate,
        #: semo/engine/protocol/turn_gate.py); None: every event with a valid token is taken
        self.admit: Callable[[str, str], bool] | None = None

    # -- sessions --------------------------------------------------------------------------

    def register_session(
        self,
        session_key: str,
        token: str | None = None,
        *,
        transcripts: TurnTextReader | None = None,
    ) -> str:
        """Issue (or, with ``token``, adopt) the session's token; a previous one stops working.

        ``transcripts``: what reads the session's turn texts where its hooks say they are;
        without it no place a hook names is ever read for this session."""
        if token is not None and not _TOKEN_RE.fullmatch(token):
            raise ValueError("a hook token is 16+ characters of [A-Za-z0-9_-]")
        self.unregister(session_key)
        token = token or secrets.token_urlsafe(32)
        self._sessions[_token_key(token)] = session_key
        self._tokens[session_key] = token
        add_secret(token)  # redacted in every log line while the session holds it
        if transcripts is not None:
            self._readers_of[session_key] = transcripts
        return token

    def unregister(self, session_key: str) -> None:
        token = self._tokens.pop(session_key, None)
        if token is not None:
            self._sessions.pop(_token_key(token), None)
            discard_secret(token)
        self._readers_of.pop(session_key, None)
        self._order.pop(session_key, None)

    def env_for(self, session_key: str) -> dict[str, str]:
        """The variables to add to the session's environment (register the session first)."""
        try:
            token = self._tokens[session_key]
        except KeyError:
            raise KeyError(f"session {session_key!r} is not registered") from None
        return {ENV_SOCKET: str(self.path), ENV_TOKEN: token}

    # -- life cycle ------------------------------------------------------------------------

    @property
    def serving(self) -> bool:
        return self._server is not None and self._server.is_serving()

    @property
    def open_connections(self) -> int:
        return self._open

    async def start(self) -> HookServer:
        """Bind and listen. A socket left by a dead engine is replaced; a live one is not.

        The engine holds an ``flock`` on ``<socket>.lock`` while it serves: that is how other
        engines tell a live socket from a stale one without connecting to it."""
        if self._server is not None:
            return self
        _private_dir(self.path.parent)
        self._lock_fd = await asyncio.to_thread(_claim_socket_path, self.path, self.lock_path)
        try:
            await asyncio.to_thread(_clear_stale_siblings, self.path)
            self._server = await asyncio.start_unix_server(
                self._handle,
                path=str(self.path),
                limit=self.max_message_bytes + 2,
                backlog=_BACKLOG,  # also how many the loop accepts at a time: fds in flight
            )
            os.chmod(self.path, 0o600)
            st = os.stat(self.path)
        except BaseException:
            _release_lock(self.lock_path, self._lock_fd)
            self._lock_fd = None
            raise
        self._inode = (st.st_dev, st.st_ino)
        log.debug("hook server listening on %s", self.path)
        return self

    async def close(self) -> None:
        """Stop listening, drop open connections, remove the socket file (if still ours)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for task in list(self._clients):
            task.cancel()
        if self._clients:
            await asyncio.gather(*self._clients, return_exceptions=True)
        await server.wait_closed()
        try:
            st = os.stat(self.path)
            if (st.st_dev, st.st_ino) == self._inode:
                os.unlink(self.path)
        except FileNotFoundError:
            pass
        self._inode = None
        for session_key in list(self._tokens):
            self.unregister(session_key)  # the tokens are dead: stop redacting them
        _release_lock(self.lock_path, self._lock_fd)
        self._lock_fd = None
        if self._readers is not None:
            self._readers.shutdown(wait=False, cancel_futures=True)
            self._readers = None

    async def __aenter__(self) -> HookServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- connections -----------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        peer = _peer(writer)
        refusal = self._admit(peer)
        if refusal is not None:
            self._reject(refusal, peer)
            writer.close()
            return
        conn = _Connection(task, peer)
        self._connections.setdefault(peer, []).append(conn)
        self._open += 1
        self._clients.add(task)
        try:
            error = await self._serve_one(reader, writer, conn)
            if error is None and conn.output is not None:
                answer = {"ok": True, "output": conn.output}
                writer.write(json.dumps(answer, ensure_ascii=False).encode() + b"\n")
            elif error is None:
                writer.write(_ACK)
            else:
                writer.write(json.dumps({"ok": False, "error": error}).encode() + b"\n")
            await writer.drain()
            if error == "oversize":
                await self._discard_rest(reader, writer)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._forget(conn)
            self._clients.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _admit(self, peer: Peer) -> str | None:
        """None to serve a new connection, else why it is refused (making room if needed)."""
        if peer.uid is not None and peer.uid not in self.allowed_uids:
            return "foreign_peer"
        known = peer.pid is not None  # without SO_PEERCRED every peer looks the same
        if known and len(self._connections.get(peer, ())) >= self.max_connections_per_peer:
            return "too_many_connections"
        if self._open >= self.max_connections:
            waiting = [c for conns in self._connections.values() for c in conns if c.reading]
            if not waiting:
                return "too_many_connections"
            busiest = max(len(self._connections[c.peer]) for c in waiting)
            victim = next(c for c in waiting if len(self._connections[c.peer]) == busiest)
            self._forget(victim)
            victim.task.cancel()
            self._reject("dropped_for_room", victim.peer)
        return None

    def _forget(self, conn: _Connection) -> None:
        conns = self._connections.get(conn.peer)
        if conns is None or conn not in conns:
            return
        conns.remove(conn)
        self._open -= 1
        if not conns:
            del self._connections[conn.peer]

    async def _discard_rest(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Read and drop what an oversize sender is still sending (briefly, up to a cap), so
        that it gets to read the answer instead of a connection reset."""
        if writer.can_write_eof():
            writer.write_eof()
        dropped = 0
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(min(1.0, self.read_timeout)):
                while dropped < _DISCARD_CAP and (chunk := await reader.read(1 << 16)):
                    dropped += len(chunk)

    async def _read_line(self, reader: asyncio.StreamReader) -> bytes | str:
        """The request line, or the reason it cannot be had."""
        try:
            async with asyncio.timeout(self.read_timeout):
                line = await reader.readuntil(b"\n")
        except asyncio.LimitOverrunError:
            return "oversize"
        except asyncio.IncompleteReadError as exc:
            line = exc.partial  # EOF without a newline: the whole request
            if not line:
                return "empty"
        except TimeoutError:
            return "timeout"
        line = line.rstrip(b"\r\n")
        if len(line) > self.max_message_bytes:
            return "oversize"
        return line

    # -- requests --------------------------------------------------------------------------

    async def _serve_one(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: _Connection
    ) -> str | None:
        line = await self._read_line(reader)
        conn.reading = False
        received_at = time.monotonic()
        if isinstance(line, str):
            return self._reject(line, conn.peer)
        try:
            message = safe_json.loads(
                line, max_bytes=self.max_message_bytes, max_depth=MAX_JSON_DEPTH
            )
        except safe_json.JSONInputError as exc:
            reason = "too_deep" if exc.reason == "too_deep" else "malformed_json"
            return self._reject(reason, conn.peer)
        if not isinstance(message, dict):
            return self._reject("malformed_json", conn.peer)
        token = message.get("token")
        if not isinstance(token, str) or not token:
            return self._reject("missing_token", conn.peer)
        session_key = self._sessions.get(_token_key(token))
        if session_key is None:
            return self._reject("bad_token", conn.peer)
        event = message.get("event")
        if not isinstance(event, str) or event not in self.accepted_events:
            return self._reject("unknown_event", conn.peer, session_key, repr(event)[:60])
        payload = message.get("payload")
        if not isinstance(payload, dict):
            return self._reject("bad_payload", conn.peer, session_key)
        named = payload.get("hook_event_name")
        if named is not None and named != event:
            return self._reject("event_mismatch", conn.peer, session_key, repr(named)[:60])
        if self.admit is not None and not self.admit(session_key, event):
            # no turn semo started can have sent it: the agent's own
            # (semo/engine/protocol/turn_gate.py)
            return self._reject("no_turn", conn.peer, session_key, event)
        sent_at = message.get("sent_at")
        order = self._order.setdefault(session_key, asyncio.Lock())
        async with order:  # a Stop being read does not let a later event overtake it
            transcript_text = None
            turn_reader = self._readers_of.get(session_key)
            if turn_reader is not None and event == turn_reader.event:
                transcript_text = await self._turn_text(session_key, turn_reader, payload)
            hook_event = HookEvent(
                session_key=session_key,
                event=event,
                payload=payload,
                received_at=received_at,
                sent_at=(
                    float(sent_at)
                    if isinstance(sent_at, int | float) and not isinstance(sent_at, bool)
                    else None
                ),
                transcript_text=transcript_text,
            )
            self.accepted += 1
            self._deliver(hook_event)
        if event in DECISION_EVENTS and self.decide is not None:
            conn.output = await self._decision(hook_event, reader)
        return None

    async def _decision(
        self, event: HookEvent, reader: asyncio.StreamReader
    ) -> dict[str, Any] | None:
        """The decider's output for ``event``; None when the hook went away first (its
        connection closed: Claude Code gave up on it) or the decider failed."""
        assert self.decide is not None
        deciding = asyncio.ensure_future(self.decide(event))
        gone = asyncio.ensure_future(reader.read(1))  # the shim sends nothing more: EOF
        try:
            await asyncio.wait({deciding, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not deciding.done():
                deciding.cancel()
            gone.cancel()
            await asyncio.gather(deciding, gone, return_exceptions=True)
        if deciding.cancelled():
            return None
        error = deciding.exception()
        if error is not None:
            log.error("deciding %s of session %s failed: %r", event.event, event.session_key, error)
            return None
        return deciding.result()

    async def _turn_text(
        self, session_key: str, reader: TurnTextReader, payload: dict[str, Any]
    ) -> str | None:
        """The turn's text from where the hook said it is, or None (refusals are logged)."""
        where = reader.source(payload)
        if where is None:
            return None
        if self._readers is None:
            self._readers = ThreadPoolExecutor(_TRANSCRIPT_READERS, "semo-transcript")
        # then the best text so far, in time
        read = functools.partial(reader.read, payload, wait=self.transcript_timeout * 2 / 3)
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.transcript_timeout):
                return await loop.run_in_executor(self._readers, read)
        except TurnTextRefused as exc:
            problem = str(exc)
        except TimeoutError:
            problem = f"not read within {self.transcript_timeout:g} s"
        except Exception as exc:  # never lose the turn's end over its text
            problem = f"cannot be read ({type(exc).__name__}: {exc})"
        self.rejected["transcript"] += 1
        self._warnings.warning(
            "transcript",
            f"{where[:200]} of session {session_key} refused: {problem}; "
            "the turn ends with the hook's own text",
        )
        return None

    def _deliver(self, event: HookEvent) -> None:
        if self.events is not None:
            self.events.put_nowait(event)
        if self.on_event is not None:
            try:
                self.on_event(event)
            except Exception:
                log.exception("hook callback failed: %s %s", event.session_key, event.event)

    def _reject(
        self,
        reason: str,
        peer: Peer,
        session_key: str | None = None,
        detail: str = "",
    ) -> str:
        self.rejected[reason] += 1
        text = (
            f"rejected hook message: {reason}{f' ({detail})' if detail else ''}"
            f"{f' session={session_key}' if session_key else ''} from {peer}"
        )
        if reason == "empty":  # connected and closed without a word: nothing to warn about
            log.debug("%s", text)
        else:
            self._warnings.warning(reason, text)
        return reason


# -- the socket path: one live engine each, stale ones found without connecting ---------------


def _claim_socket_path(path: Path, lock_path: Path) -> int:
    """Take ``lock_path``'s flock (or fail: a live engine has it) and clear a stale ``path``.
    Returns the lock's file descriptor, held until :func:`_release_lock`."""
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        fd = os.open(lock_path, flags, 0o600)
    except OSError as exc:
        raise HookServerError(f"cannot open {lock_path}: {exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise HookServerError(f"{path} is in use by a running engine") from None
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return fd
    if not stat.S_ISSOCK(st.st_mode):
        _release_lock(lock_path, fd)
        raise HookServerError(f"{path} exists and is not a socket; not replacing it")
    log.info("removing stale hook socket %s (no engine holds its lock)", path)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    return fd


def _release_lock(lock_path: Path, fd: int | None) -> None:
    if fd is None:
        return
    with contextlib.suppress(OSError):
        if _same_file(lock_path, fd):
            os.unlink(lock_path)
    os.close(fd)


def _same_file(path: Path, fd: int) -> bool:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def _clear_stale_siblings(ours: Path) -> None:
    """Remove other engines' sockets in ``ours``'s folder that no live engine serves.

    A socket with a lock file is stale when its lock can be taken; one without (an engine from
    before lock files) when the pid in its name (``hooks-<pid>.sock``) is not running. Nothing
    is sent to any socket."""
    folder = ours.parent
    names = {p.name for p in folder.glob("hooks*.sock")}
    names |= {p.name[: -len(_LOCK_SUFFIX)] for p in folder.glob("hooks*.sock" + _LOCK_SUFFIX)}
    for name in sorted(names - {ours.name}):
        with contextlib.suppress(OSError):
            _clear_if_stale(folder / name, folder / (name + _LOCK_SUFFIX))


def _clear_if_stale(path: Path, lock_path: Path) -> None:
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        pid = _pid_in_name(path.name)
        if pid is not None and not pid_alive(pid) and stat.S_ISSOCK(os.lstat(path).st_mode):
            log.info("removing stale hook socket %s (engine pid %d is gone)", path, pid)
            os.unlink(path)
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # a live engine holds it
        if not _same_file(lock_path, fd):
            return  # replaced meanwhile: a new engine's
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISSOCK(os.lstat(path).st_mode):
                log.info("removing stale hook socket %s (no engine holds its lock)", path)
                os.unlink(path)
        os.unlink(lock_path)
    finally:
        os.close(fd)


def _pid_in_name(name: str) -> int | None:
    match = re.fullmatch(r"hooks-(\d+)\.sock", name)
    return int(match.group(1)) if match else None


def _peer(writer: asyncio.StreamWriter) -> Peer:
    """The connecting process (SO_PEERCRED) where the OS tells."""
    sock = writer.get_extra_info("socket")
    peercred = getattr(socket, "SO_PEERCRED", None)
    if sock is None or peercred is None:
        return Peer(None, None)
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, peercred, struct.calcsize("3i"))
        pid, uid, _gid = struct.unpack("3i", raw)
    except OSError:
        return Peer(None, None)
    return Peer(pid, uid)
