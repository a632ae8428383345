"""The control server: the engine's Unix socket that consoles attach to (docs/CONSOLE.md).

    server = ControlServer(engine, office_paths(office, store_config))
    await server.start()     # claims the office's socket (refused if a live engine has it)
    server.ready()           # the engine is running: subscriptions are answered
    await server.stop("engine stopped")

How it works: docs/CONSOLE.md, "The control server".
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from semo.engine.control.paths import OfficePaths, private_dir
from semo.engine.control.peers import boot_ticks, refuse_peer
from semo.engine.control.reaper import OrphanReaper, is_subreaper, set_subreaper
from semo.engine.control.views import RECENT_STEPS, last_line, outcome_text, step_view
from semo.engine.control.wire import (
    MAX_REQUEST_BYTES,
    MAX_REQUEST_DEPTH,
    PROTOCOL_VERSION,
    START_WAIT_SECONDS,
    FrameError,
    StyleTable,
    encode_frame,
    encode_line,
    read_frame,
)
from semo.engine.events import SessionOutput
from semo.engine.fsutil import atomic_write
from semo.engine.info_file import read_info
from semo.engine.logs import ThrottledWarnings
from semo.engine.runtime import socket_answers

if TYPE_CHECKING:
    from semo.engine.control.served import ServedEngine
    from semo.engine.sessions.agent_session import AgentSession
    from semo.engine.terminal.screen import TerminalScreen

log = logging.getLogger("semo.control")

FRAME_SECONDS = 1 / 60
#: sessions the console has not typed into for ACTIVE_SECONDS get a frame at most this often
#: (a flooding neighbour costs the engine and the console a third, the echo is not delayed)
BACKGROUND_FRAME_SECONDS = 1 / 20
ACTIVE_SECONDS = 10.0
#: while a console types (a key in the last TYPING_SECONDS), the sessions it is not typing into
#: get a frame at most this often: its panes redraw them no faster then (the console's
#: TerminalPane.TYPING_FRAME_SECONDS), so more frames would only be decoded and dropped
TYPING_FRAME_SECONDS = (
    BACKGROUND_FRAME_SECONDS if os.environ.get("SEMO_CONTROL_TYPING_FRAMES") == "0" else 0.25
)
TYPING_SECONDS = 1.0
#: scrollback lines sent after an attach's first screen
HISTORY_LINES = 2000
#: at most this many new scrollback lines in one frame (a console that fell further behind
#: misses the oldest of them; its screen is still exact)
MAX_NEW_LINES_PER_FRAME = 2000
#: at most this many lines answer a console that asks for the history (`history` op)
MAX_HISTORY_LINES = 10_000
#: bench A/B only: new scrollback lines go to every console, wanted or not (as before `history`)
STREAM_HISTORY_ALWAYS = os.environ.get("SEMO_CONTROL_STREAM_HISTORY") == "1"
#: a console is disconnected when this much of replies and events waits for it and it took
#: no byte for STALL_SECONDS (one message bigger than this is still sent whole)...
MAX_BACKLOG_BYTES = 8 << 20
STALL_SECONDS = 10.0
#: ... or when this much waits, however it reads (the engine's memory is not a console's)
MAX_BACKLOG_HARD_BYTES = 256 << 20
#: how often the office snapshot is recomputed (pool from memory, questions and commands from
#: the store) while a console is subscribed; a session state change recomputes it at once
OFFICE_SECONDS = 1.0
#: a snapshot is sent at least this often even when nothing but ages changed
OFFICE_REFRESH_SECONDS = 30.0
#: commands listed in the office snapshot
RECENT_COMMANDS = 20
#: at most one log line per kind of refused connection this often (docs/SECURITY.md)
REFUSAL_LOG_SECONDS = 10.0


class ControlError(OSError):
    """The control socket cannot be served (another engine has it, unsafe folder...)."""


class OpError(Exception):
    """A request that cannot be done: the message goes back to the console."""


def _heartbeat_start(engine: ServedEngine) -> str | None:
    heartbeat = getattr(engine, "heartbeat", None)
    last = heartbeat.last if heartbeat is not None else None
    return last.started_at.isoformat() if last is not None else None


@dataclass
class _Attach:
    """What one console has of one session's screen."""

    size: tuple[int, int] | None = None
    full: bool = True
    dirty: set[int] = field(default_factory=set)
    pending: bool = True
    cursor: tuple[int, int, bool] | None = None
    modes: tuple[bool, bool] | None = None
    alternate: bool | None = None
    bells: int | None = None
    pushed: int = 0
    history_mark: int | None = None  # history to send: lines pushed before this count
    history: bool = True  # new scrollback lines go with each frame (off: only `pushed`)
    resync: int = 0  # lines of history the console asked for: sent with its next frame
    rewrites: int = 0  # the scrollback's rewrites (reflows) this console's copy is from
    flushed_at: float = float("-inf")  # loop time of the last frame sent
    paused: bool = False  # the console does not show it: no frames until it does
    typed_at: float = float("-inf")  # loop time this console last typed into the session


class _Connection:
    def __init__(
        self,
        server: ControlServer,
        number: int,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.server = server
        self.number = number
        self.reader = reader
        self.writer = writer
        self.subscribed = False
        self.attached: dict[str, _Attach] = {}
        self.styles = StyleTable()
        self.backlog: deque[bytes] = deque()
        self.backlog_bytes = 0
        self.latest: dict[str, bytes] = {}  # kind -> its message still in the backlog
        self.draining_since: float | None = None  # monotonic time the pending write began
        self.wake = asyncio.Event()
        self.closed = False
        self._timer: asyncio.TimerHandle | None = None
        self.bytes_sent = 0
        self.frames_sent = 0
        self.typed_at = float("-inf")  # loop time this console last typed (any session)

    # -- queueing ------------------------------------------------------------------------------

    def send(self, message: dict[str, Any] | bytes, *, latest: str | None = None) -> None:
        """Queue `message`. With `latest`, a message of that kind still queued is dropped
        first: only the newest counts (the office snapshot). A console that left more than
        MAX_BACKLOG_BYTES unread is disconnected, however big this one message is."""
        if self.closed:
            return
        data = message if isinstance(message, bytes) else encode_frame(message)
        if latest is not None and latest in self.latest:
            stale = self.latest.pop(latest)
            with contextlib.suppress(ValueError):
                self.backlog.remove(stale)
                self.backlog_bytes -= len(stale)
        if self._stalled():
            log.warning("console %d reads too slowly: disconnected", self.number)
            self.close()
            return
        self.backlog.append(data)
        self.backlog_bytes += len(data)
        if latest is not None:
            self.latest[latest] = data
        self.wake.set()

    def _stalled(self) -> bool:
        """Whether what waits for this console is too much for how it reads."""
        if self.backlog_bytes > MAX_BACKLOG_HARD_BYTES:
            return True
        if self.backlog_bytes <= MAX_BACKLOG_BYTES or self.draining_since is None:
            return False
        return time.monotonic() - self.draining_since > STALL_SECONDS

    def screen_changed(self, session_id: str, rows: set[int]) -> None:
        state = self.attached.get(session_id)
        if state is None:
            return
        state.dirty |= rows
        state.pending = True
        self.wake.set()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.wake.set()
            with contextlib.suppress(Exception):
                self.writer.close()

    # -- the writer ----------------------------------------------------------------------------

    async def write_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while not self.closed:
            await self.wake.wait()
            self.wake.clear()
            if self.closed:
                break
            chunks: list[bytes] = list(self.backlog)
            self.backlog.clear()
            self.backlog_bytes = 0
            self.latest.clear()
            frames, next_due = self.server.screen_frames(self, loop.time())
            chunks += frames
            if next_due is not None and self._timer is None:
                self._timer = loop.call_at(next_due, self._frame_due)
            if not chunks:
                continue
            data = b"".join(chunks)
            self.writer.write(data)
            self.bytes_sent += len(data)
            self.frames_sent += len(chunks)
            self.draining_since = time.monotonic()
            try:
                await self.writer.drain()
            except (ConnectionError, OSError):
                self.close()
                break
            finally:
                self.draining_since = None
            if any(s.history_mark is not None for s in self.attached.values()):
                self.writer.write(b"".join(self.server.history_frames(self)))
                with contextlib.suppress(ConnectionError, OSError):
                    await self.writer.drain()

    async def flush(self, timeout: float = 1.0) -> None:
        """Write what is queued now (a last error before closing), within `timeout`."""
        data = b"".join(self.backlog)
        self.backlog.clear()
        self.backlog_bytes = 0
        self.latest.clear()
        if data and not self.closed:
            self.writer.write(data)
            with contextlib.suppress(ConnectionError, OSError, TimeoutError):
                async with asyncio.timeout(timeout):
                    await self.writer.drain()

    def _frame_due(self) -> None:
        self._timer = None
        self.wake.set()


class ControlServer:
    def __init__(
        self,
        engine: ServedEngine,
        paths: OfficePaths,
        *,
        request_stop: Callable[[], None] | None = None,
    ) -> None:
        self.engine = engine
        self.paths = paths
        self._request_stop = request_stop or (lambda: os.kill(os.getpid(), signal.SIGTERM))
        #: why the engine stops, when a console or `semo stop` asked (else a signal did)
        self.stop_reason: str | None = None
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[_Connection] = set()
        self._numbers = itertools.count(1)
        self._ready = asyncio.Event()
        self._watched: set[str] = set()  # sessions whose output we listen to
        self._sizes: dict[str, dict[int, tuple[int, int]]] = {}  # session -> console -> size
        self._latest: dict[str, int] = {}  # session -> the console that used it last
        self._office_changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._made_subreaper = False
        self._results: dict[str, str] = {}
        #: the latest routing steps, oldest first: a console that attaches later shows them
        self._steps: deque[dict[str, Any]] = deque(maxlen=RECENT_STEPS)
        self._step_numbers = itertools.count()
        self._socket_inode: int | None = None
        self.started_at = time.time()
        #: connections refused (another uid, or a process this engine started); logged at most
        #: one line per kind every REFUSAL_LOG_SECONDS, with the count of those left out
        self.refused = 0
        self._refusals = ThrottledWarnings(log, REFUSAL_LOG_SECONDS)

    # -- life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Claim the office's socket and serve it (ControlError when a live engine has it)."""
        path = self.paths.socket
        try:
            private_dir(path.parent)
        except OSError as error:
            raise ControlError(f"cannot use {path.parent}: {error}") from None
        if socket_answers(path):
            raise ControlError(
                f"another engine already serves office {self.paths.office!r} on this machine "
                f"({path}); attach with `semo console` or stop it with `semo stop`"
            )
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # left by an engine that was killed
        if len(os.fsencode(path)) >= 107:
            raise ControlError(f"the socket path is too long for a Unix socket: {path}")
        old_umask = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(self._serve, path=os.fspath(path))
        finally:
            os.umask(old_umask)
        os.chmod(path, 0o600)
        self._socket_inode = os.stat(path).st_ino
        atomic_write(
            self.paths.info,
            json.dumps(
                {
                    "pid": os.getpid(),
                    "engine_id": self.engine.engine_id,
                    "office": self.paths.office,
                    "socket": str(path),
                    "started_at": self.started_at,
                    # ties this file to the run's heartbeat row: after a SIGKILL the next
                    # engine with this id need not watch the row run out (liveness.py)
                    "heartbeat_started_at": _heartbeat_start(self.engine),
                }
            ),
            mode=0o600,
        )
        self._tasks.append(asyncio.create_task(self._forward_events(), name="control events"))
        self._tasks.append(asyncio.create_task(self._office_loop(), name="control office"))
        # agents that daemonize stay descendants, so still no consoles
        # (semo/engine/control/reaper.py)
        self._made_subreaper = not is_subreaper() and set_subreaper(True)
        if self._made_subreaper:
            self._tasks.append(asyncio.create_task(OrphanReaper().run(), name="control reaper"))
        elif not is_subreaper():
            log.warning("control socket: cannot make the engine a child subreaper")
        log.info("control socket %s", path)

    def ready(self) -> None:
        """The engine runs: subscriptions and operations are answered from now on (the
        engine resumed a killed engine's Claude Code conversations before this)."""
        self._ready.set()
        self._office_changed.set()

    async def stop(self, reason: str) -> None:
        bye = encode_frame({"t": "bye", "reason": reason})
        for connection in list(self._connections):
            connection.send(bye)
        if self._connections:  # a moment for the goodbyes to go out
            await asyncio.sleep(0.05)
        if self._server is not None:
            self._server.close()
        for connection in list(self._connections):
            connection.close()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        self._refusals.flush()
        if self._made_subreaper:
            set_subreaper(False)
            self._made_subreaper = False
        self._remove_files()

    def _remove_files(self) -> None:
        path = self.paths.socket
        with contextlib.suppress(OSError):
            if self._socket_inode is not None and os.stat(path).st_ino == self._socket_inode:
                path.unlink()  # ours, not a newer engine's
                info = read_info(self.paths.info)
                if info is not None and info.get("pid") == os.getpid():
                    with contextlib.suppress(OSError):
                        self.paths.info.unlink()

    @property
    def consoles(self) -> int:
        return len(self._connections)

    # -- connections ---------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted_at = boot_ticks()
        refusal = refuse_peer(writer.get_extra_info("socket"), os.getpid(), accepted_at)
        if refusal is not None:  # another uid, or an agent (or what it started): no console
            self.refused += 1
            self._refusals.warning(refusal.kind, f"control socket: refused {refusal.text}")
            writer.close()
            return
        connection = _Connection(self, next(self._numbers), reader, writer)
        self._connections.add(connection)
        connection.send(
            {
                "t": "hello",
                "v": PROTOCOL_VERSION,
                "pid": os.getpid(),
                "engine_id": self.engine.engine_id,
                "office": self.paths.office,
                "running": self._ready.is_set(),
            }
        )
        writer_task = asyncio.create_task(connection.write_loop())
        try:
            while not connection.closed:
                try:
                    request = await read_frame(reader, MAX_REQUEST_BYTES, MAX_REQUEST_DEPTH)
                except FrameError as error:  # said before the connection closes
                    connection.send({"t": "error", "error": str(error)})
                    await connection.flush()
                    break
                except (ConnectionError, OSError):
                    break
                if request is None:
                    break
                await self._handle(connection, request)
        finally:
            self._forget(connection)
            connection.close()
            writer_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await writer_task

    def _forget(self, connection: _Connection) -> None:
        self._connections.discard(connection)
        for session_id in list(connection.attached):
            self._detach(connection, session_id)

    async def _handle(self, connection: _Connection, request: dict[str, Any]) -> None:
        op = request.get("op")
        request_id = request.get("id")
        handler = _OPS.get(op) if isinstance(op, str) else None
        failure: str | None
        try:
            if handler is None:
                raise OpError(f"unknown operation {op!r}")
            if op not in ("ping", "detach") and not self._ready.is_set():
                async with asyncio.timeout(START_WAIT_SECONDS):  # keeps a cancellation
                    await self._ready.wait()
            result = await handler(self, connection, request)
        except OpError as error:
            result, failure = None, str(error)
        except TimeoutError:
            result, failure = None, "the engine is still starting"
        except Exception as error:  # an operation that failed in the engine
            log.info("control: %s failed: %s", op, error)
            result, failure = None, str(error) or type(error).__name__
        else:
            failure = None
        if request_id is None:
            if failure is not None:
                connection.send({"t": "error", "op": op, "error": failure})
            return
        if failure is None:
            connection.send({"t": "reply", "id": request_id, "ok": True, "result": result})
        else:
            connection.send({"t": "reply", "id": request_id, "ok": False, "error": failure})

    # -- sessions and their screens ------------------------------------------------------------

    def _session(self, request: dict[str, Any]) -> AgentSession:
        session_id = request.get("session")
        manager = self.engine.manager
        session = (
            manager.sessions.get(session_id) if manager and isinstance(session_id, str) else None
        )
        if session is None or session.ended:
            raise OpError(f"no live session {session_id!r} in this engine")
        return session

    def _watch(self, session: AgentSession) -> None:
        if session.session_id in self._watched:
            return
        self._watched.add(session.session_id)
        screen = session.terminal.screen
        session_id = session.session_id

        def on_output(_chunk: str) -> None:
            rows = set(screen.dirty)
            screen.dirty.clear()
            for connection in self._connections:
                connection.screen_changed(session_id, rows)

        session.terminal.add_listener(on_output)

    def _detach(self, connection: _Connection, session_id: str) -> None:
        connection.attached.pop(session_id, None)
        sizes = self._sizes.get(session_id)
        if sizes is None:
            return
        sizes.pop(connection.number, None)
        if not sizes:
            del self._sizes[session_id]
        if self._latest.get(session_id) == connection.number:
            del self._latest[session_id]
            if sizes:  # the console that used it most recently among those left
                self._latest[session_id] = next(reversed(sizes))
                self._apply_size(session_id)

    def _used_by(
        self, connection: _Connection, session_id: str, size: tuple[int, int] | None
    ) -> None:
        """Size policy (tmux's `window-size latest`): the PTY takes the size of the console
        that most recently attached, resized or typed into the session."""
        sizes = self._sizes.setdefault(session_id, {})
        if size is not None:
            sizes.pop(connection.number, None)
            sizes[connection.number] = size
        elif connection.number in sizes:
            sizes[connection.number] = sizes.pop(connection.number)  # most recent last
        if connection.number in sizes:
            self._latest[session_id] = connection.number
            self._apply_size(session_id)

    def _apply_size(self, session_id: str) -> None:
        number = self._latest.get(session_id)
        size = self._sizes.get(session_id, {}).get(number) if number is not None else None
        manager = self.engine.manager
        session = manager.sessions.get(session_id) if manager else None
        if size is None or session is None or session.ended:
            return
        screen = session.terminal.screen
        if (screen.columns, screen.lines) != size:
            with contextlib.suppress(Exception):
                session.resize(*size)
            for connection in self._connections:
                connection.screen_changed(session_id, set())

    def screen_frames(
        self, connection: _Connection, now: float
    ) -> tuple[list[bytes], float | None]:
        """Frames of the sessions whose update is due; and when the next one is due (None:
        nothing pending). The session being typed into comes first."""
        frames: list[bytes] = []
        next_due: float | None = None
        manager = self.engine.manager
        states = sorted(connection.attached.items(), key=lambda item: -item[1].typed_at)
        for session_id, state in states:
            if not state.pending or state.paused:
                continue
            active = now - state.typed_at < ACTIVE_SECONDS
            interval = FRAME_SECONDS if active else BACKGROUND_FRAME_SECONDS
            if (
                now - connection.typed_at < TYPING_SECONDS
                and now - state.typed_at >= TYPING_SECONDS
            ):
                interval = max(interval, TYPING_FRAME_SECONDS)  # typing elsewhere
            due = state.flushed_at + interval
            echo = state.typed_at > state.flushed_at  # typed since its last frame: no wait
            if due > now and not state.full and not echo:
                next_due = due if next_due is None else min(next_due, due)
                continue
            state.pending = False
            state.flushed_at = now
            session = manager.sessions.get(session_id) if manager else None
            if session is None:
                continue
            frame = self._screen_frame(connection, session_id, session.terminal.screen, state)
            frames.append(encode_frame(frame))
        return frames, next_due

    def _screen_frame(
        self,
        connection: _Connection,
        session_id: str,
        screen: TerminalScreen,
        state: _Attach,
    ) -> dict[str, Any]:
        styles = connection.styles
        frame: dict[str, Any] = {"t": "screen", "s": session_id}
        if styles.begin_frame():
            frame["styles_reset"] = 1
        size = (screen.columns, screen.lines)
        if state.full or size != state.size:
            frame["size"] = list(size)
            frame["full"] = 1
            rows: Sequence[int] = range(screen.lines)
            state.size = size
        else:
            rows = sorted(y for y in state.dirty if 0 <= y < screen.lines)
        first_attach = state.full and state.history_mark is None and state.cursor is None
        state.full = False
        state.dirty.clear()
        if rows:
            frame["rows"] = {str(y): encode_line(screen.row_line(y), styles) for y in rows}
        cursor = screen.cursor
        cursor_state = (cursor.x, cursor.y, bool(cursor.hidden))
        if cursor_state != state.cursor:
            frame["cursor"] = list(cursor_state)
            state.cursor = cursor_state
        modes = (screen.modes.application_cursor_keys, screen.modes.bracketed_paste)
        if modes != state.modes:
            frame["modes"] = list(modes)
            state.modes = modes
        if screen.alternate != state.alternate:
            frame["alt"] = screen.alternate
            state.alternate = screen.alternate
        if screen.bells != state.bells:
            frame["bells"] = screen.bells
            state.bells = screen.bells
        scrollback = screen.scrollback
        pushed = scrollback.total_pushed
        streams = state.history or STREAM_HISTORY_ALWAYS
        if state.resync and not first_attach:
            # asked for: the copy is replaced in this one frame (never seen half-replaced)
            frame["sb_reset"] = 1
            frame["pushed"] = pushed
            start = max(0, len(scrollback) - state.resync)
            frame["history"] = [
                encode_line(scrollback[i], styles) for i in range(start, len(scrollback))
            ]
            state.pushed = pushed
            state.rewrites = scrollback.rewrites
            state.resync = 0
        elif first_attach or (streams and scrollback.rewrites != state.rewrites):
            # a reflow re-wrapped every line: the console's copy is replaced, as on attach
            frame["sb_reset"] = 1
            frame["pushed"] = pushed
            state.pushed = pushed
            state.history_mark = pushed
            state.rewrites = scrollback.rewrites
            state.resync = 0
        elif pushed != state.pushed:
            new = min(pushed - state.pushed, len(scrollback), MAX_NEW_LINES_PER_FRAME)
            if not streams:
                new = 0  # the console asks for the history when its operator scrolls back
            if new > 0:
                start = len(scrollback) - new
                frame["sb"] = [
                    encode_line(scrollback[i], styles) for i in range(start, len(scrollback))
                ]
            frame["pushed"] = pushed
            state.pushed = pushed
        new_styles = styles.take_new()
        if new_styles:
            frame["styles"] = new_styles
        return frame

    def history_frames(self, connection: _Connection) -> list[bytes]:
        """The scrollback before each newly attached session's first screen."""
        frames: list[bytes] = []
        manager = self.engine.manager
        for session_id, state in connection.attached.items():
            mark, state.history_mark = state.history_mark, None
            if mark is None:
                continue
            session = manager.sessions.get(session_id) if manager else None
            if session is None:
                continue
            scrollback = session.terminal.screen.scrollback
            end = len(scrollback) - (scrollback.total_pushed - mark)
            start = max(0, end - HISTORY_LINES)
            if end <= start:
                continue
            frame: dict[str, Any] = {"t": "screen", "s": session_id}
            if connection.styles.begin_frame():
                frame["styles_reset"] = 1
            frame["history"] = [
                encode_line(scrollback[i], connection.styles) for i in range(start, end)
            ]
            new_styles = connection.styles.take_new()
            if new_styles:
                frame["styles"] = new_styles
            frames.append(encode_frame(frame))
        return frames

    # -- the office ----------------------------------------------------------------------------

    async def _forward_events(self) -> None:
        with self.engine.bus.subscribe() as events:
            async for event in events:
                if isinstance(event, SessionOutput):
                    continue
                if event.kind == "routing_step":
                    roles = {agent.id: role for role, agent in self.engine.agents.items()}
                    self._steps.append(step_view(event, roles, next(self._step_numbers)))
                if event.kind in ("session_status", "job", "routing_step", "command_finished"):
                    self._office_changed.set()
                subscribers = [c for c in self._connections if c.subscribed]
                if not subscribers:
                    continue
                frame = encode_frame({"t": "event", "e": event.model_dump(mode="json")})
                for connection in subscribers:
                    connection.send(frame)

    async def _office_loop(self) -> None:
        last_key: str | None = None
        last_sent = 0.0
        while True:
            # asyncio.timeout, not wait_for: on 3.11 wait_for returns the wait's result when a
            # cancellation meets a change, the loop runs on and the engine's stop waits forever
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(OFFICE_SECONDS):
                    await self._office_changed.wait()
            self._office_changed.clear()
            if not self._ready.is_set() or not any(c.subscribed for c in self._connections):
                last_key = None
                continue
            try:
                snapshot = await self.office_snapshot()
            except Exception as error:
                log.warning("control: the office snapshot failed: %s", error)
                continue
            key = json.dumps(_without_ages(snapshot), sort_keys=True, default=str)
            now = time.monotonic()
            if key == last_key and now - last_sent < OFFICE_REFRESH_SECONDS:
                continue
            last_key, last_sent = key, now
            frame = encode_frame({"t": "office", "office": snapshot})
            for connection in self._connections:
                if connection.subscribed:
                    connection.send(frame, latest="office")

    async def office_snapshot(self) -> dict[str, Any]:
        engine = self.engine
        office = engine.office
        pool = engine.pool.status() if engine.pool is not None else None
        sessions = [
            {
                "session_id": s.session_id,
                "role": s.role,
                "agent_id": s.agent_id,
                "state": s.state.value,
                "queued": s.queued,
                "ended": s.ended,
                "stale": s.stale,
                # the list shows it for every session, also those no console shows (no frames)
                "last_line": last_line(s.terminal.screen.text_rows()),
            }
            for s in engine.sessions()
            if not s.ended
        ]
        snapshot: dict[str, Any] = {
            "name": office.name if office else self.paths.office,
            "id": office.id if office else None,
            "backend": engine.store.backend,
            "connection": engine.connection_state(),
            "engine_id": engine.engine_id,
            "pid": os.getpid(),
            "consoles": len(self._connections),
            "agents": {role: a.model_dump(mode="json") for role, a in engine.agents.items()},
            "sessions": sessions,
            "pool": pool.model_dump(mode="json") if pool else None,
            # routing steps live on the bus only: the latest of them, for the commands panel
            "steps": list(self._steps),
        }
        try:
            questions = await engine.pending_questions()
            commands = await engine.recent_commands(RECENT_COMMANDS)
            for command in commands:
                if command.status in ("completed", "failed") and command.id not in self._results:
                    result = await engine.store.get_result(command.id)
                    if result is not None:
                        self._results[command.id] = outcome_text(result)
        except Exception as error:  # a store that is down must not stop the snapshot
            snapshot["store_error"] = str(error)[:200]
        else:
            snapshot["questions"] = [q.model_dump(mode="json") for q in questions]
            snapshot["commands"] = [c.model_dump(mode="json") for c in commands]
            # only the listed commands' outcomes are kept (the cache never outgrows the list)
            self._results = {c.id: self._results[c.id] for c in commands if c.id in self._results}
            snapshot["results"] = dict(self._results)
        return snapshot

    # -- operations ----------------------------------------------------------------------------

    async def op_ping(self, connection: _Connection, request: dict[str, Any]) -> Any:
        return {"consoles": len(self._connections)}

    async def op_subscribe(self, connection: _Connection, request: dict[str, Any]) -> Any:
        connection.subscribed = True
        return await self.office_snapshot()

    async def op_attach(self, connection: _Connection, request: dict[str, Any]) -> Any:
        session = self._session(request)
        self._watch(session)
        connection.attached[session.session_id] = _Attach(
            paused=request.get("paused") is True, history=request.get("history") is not False
        )
        size = _size(request)
        if size is not None:
            self._used_by(connection, session.session_id, size)
        connection.wake.set()
        return None

    async def op_detach(self, connection: _Connection, request: dict[str, Any]) -> Any:
        session_id = request.get("session")
        if isinstance(session_id, str):
            self._detach(connection, session_id)
        return None

    async def op_pause(self, connection: _Connection, request: dict[str, Any]) -> Any:
        """`paused`: true while the console does not show the session (a hidden pane); on
        false the whole screen follows at once."""
        state = connection.attached.get(str(request.get("session")))
        if state is None:
            raise OpError(f"not attached to session {request.get('session')!r}")
        paused = request.get("paused") is True
        if state.paused and not paused:
            state.full = state.pending = True
            connection.wake.set()
        state.paused = paused
        return None

    async def op_history(self, connection: _Connection, request: dict[str, Any]) -> Any:
        """`on`: the console shows the session's history (its operator scrolled back): the
        last `lines` lines (default HISTORY_LINES) replace its copy with the next frame, and
        new lines go with every frame until `on` is false again (then only `pushed`)."""
        state = connection.attached.get(str(request.get("session")))
        if state is None:
            raise OpError(f"not attached to session {request.get('session')!r}")
        on = request.get("on") is not False
        lines = request.get("lines", HISTORY_LINES)
        if not isinstance(lines, int) or isinstance(lines, bool) or lines < 0:
            raise OpError("history's `lines` is a count of lines")
        if on:
            state.resync = min(max(lines, 1), MAX_HISTORY_LINES)
            state.pending = True
            connection.wake.set()
        state.history = on
        return None

    async def op_input(self, connection: _Connection, request: dict[str, Any]) -> Any:
        session = self._session(request)
        data = request.get("data")
        if not isinstance(data, str):
            raise OpError("input needs a string `data`")
        self._used_by(connection, session.session_id, None)
        state = connection.attached.get(session.session_id)
        if state is not None:
            state.typed_at = asyncio.get_running_loop().time()
        connection.typed_at = asyncio.get_running_loop().time()
        session.write(data)
        return None

    async def op_resize(self, connection: _Connection, request: dict[str, Any]) -> Any:
        session = self._session(request)
        size = _size(request)
        if size is None:
            raise OpError("resize needs cols and rows between 1 and 1000")
        self._used_by(connection, session.session_id, size)
        return None

    async def op_prompt(self, connection: _Connection, request: dict[str, Any]) -> Any:
        session = self._session(request)
        text = request.get("text")
        if not isinstance(text, str) or not text.strip():
            raise OpError("a prompt needs text")
        self.engine.send_prompt(session.session_id, text)
        return None

    async def op_answer(self, connection: _Connection, request: dict[str, Any]) -> Any:
        question_id = request.get("question")
        text, option = request.get("text"), request.get("option")
        if not isinstance(question_id, str):
            raise OpError("answer needs a question id")
        question = await self.engine.answer(
            question_id,
            text=text if isinstance(text, str) else None,
            option=option if isinstance(option, int) else None,
        )
        self._office_changed.set()
        return question.model_dump(mode="json")

    async def op_new_session(self, connection: _Connection, request: dict[str, Any]) -> Any:
        role = request.get("role")
        if not isinstance(role, str):
            raise OpError("new_session needs a role")
        session = await self.engine.new_session(role)
        self._office_changed.set()
        return {"session_id": session.session_id}

    async def op_cancel(self, connection: _Connection, request: dict[str, Any]) -> Any:
        await self.engine.cancel(self._session(request).session_id)
        return None

    async def op_terminate(self, connection: _Connection, request: dict[str, Any]) -> Any:
        await self.engine.terminate(self._session(request).session_id)
        self._office_changed.set()
        return None

    # -- jobs ----------------------------------------------------------------------------------

    async def op_jobs(self, connection: _Connection, request: dict[str, Any]) -> Any:
        jobs = await self.engine.list_jobs(include_ended=request.get("all") is not False)
        return [job.model_dump(mode="json") for job in jobs]

    async def op_job(self, connection: _Connection, request: dict[str, Any]) -> Any:
        job_id = request.get("job")
        if not isinstance(job_id, str):
            raise OpError("job needs a job id")
        return (await self.engine.job_timeline(job_id)).model_dump(mode="json")

    async def op_job_review(self, connection: _Connection, request: dict[str, Any]) -> Any:
        job_id = request.get("job")
        if not isinstance(job_id, str):
            raise OpError("job_review needs a job id")
        return (await self.engine.job_review(job_id)).model_dump(mode="json")

    async def op_job_diff(self, connection: _Connection, request: dict[str, Any]) -> Any:
        job_id = request.get("job")
        if not isinstance(job_id, str):
            raise OpError("job_diff needs a job id")
        return (await self.engine.job_diff(job_id)).model_dump(mode="json")

    async def op_create_job(self, connection: _Connection, request: dict[str, Any]) -> Any:
        role, task, context = request.get("role"), request.get("task"), request.get("context")
        if not isinstance(role, str) or not isinstance(task, str):
            raise OpError("create_job needs a role and a task")
        if context is not None and not isinstance(context, dict):
            raise OpError("a job's context is a JSON object")
        job = await self.engine.create_job(role, task, context)
        return job.model_dump(mode="json")

    async def op_cancel_job(self, connection: _Connection, request: dict[str, Any]) -> Any:
        job_id, reason = request.get("job"), request.get("reason")
        if not isinstance(job_id, str):
            raise OpError("cancel_job needs a job id")
        job = await self.engine.cancel_job(job_id, reason if isinstance(reason, str) else "")
        return job.model_dump(mode="json")

    async def op_record_start(self, connection: _Connection, request: dict[str, Any]) -> Any:
        return str(self.engine.start_recording(self._session(request).session_id))

    async def op_record_stop(self, connection: _Connection, request: dict[str, Any]) -> Any:
        self.engine.stop_recording(self._session(request).session_id)
        return None

    async def op_stop(self, connection: _Connection, request: dict[str, Any]) -> Any:
        """Stop the engine (its agents too): graceful, as on SIGTERM."""
        self.stop_reason = "stopped by an operator (semo stop or a console)"
        asyncio.get_running_loop().call_later(0.05, self._request_stop)
        agents = sum(1 for s in self.engine.sessions() if not s.ended)
        return {"pid": os.getpid(), "agents": agents}  # `semo stop` says what it waits for

    async def op_stats(self, connection: _Connection, request: dict[str, Any]) -> Any:
        return [
            {"console": c.number, "bytes_sent": c.bytes_sent, "frames_sent": c.frames_sent}
            for c in self._connections
        ]


_OPS: dict[str, Callable[[ControlServer, _Connection, dict[str, Any]], Any]] = {
    name[3:]: getattr(ControlServer, name) for name in dir(ControlServer) if name.startswith("op_")
}


def _size(request: dict[str, Any]) -> tuple[int, int] | None:
    cols, rows = request.get("cols"), request.get("rows")
    if isinstance(cols, int) and isinstance(rows, int) and 0 < cols <= 1000 and 0 < rows <= 1000:
        return cols, rows
    return None


def _without_ages(snapshot: dict[str, Any]) -> dict[str, Any]:
    """The snapshot minus what changes with the clock alone (ages), to see real changes."""
    pool = snapshot.get("pool")
    if not pool:
        return snapshot
    sessions = {
        sid: {k: v for k, v in s.items() if k not in ("age_s", "idle_s", "leased_s")}
        for sid, s in pool.get("sessions", {}).items()
    }
    breakers = {
        role: {k: v for k, v in b.items() if k != "retry_after_s"}
        for role, b in pool.get("breakers", {}).items()
    }
    waiters = [{k: v for k, v in w.items() if k != "waited_s"} for w in pool.get("waiters") or []]
    return {
        **snapshot,
        "pool": {**pool, "sessions": sessions, "breakers": breakers, "waiters": waiters},
    }


def stop_reason(engine: ServedEngine, default: str) -> str:
    """Why `engine` stops: what a console or `semo stop` said (the op), else `default`."""
    control = engine.control
    return control.stop_reason if control is not None and control.stop_reason else default
