"""EngineClient: a console's handle on an engine that runs elsewhere, through its control socket.

    client = EngineClient(office_paths(config.office.name, config.store_config()))
    await client.start()                 # connect and subscribe (EngineNotRunning if none)
    for session in client.sessions():    # live sessions, kept current from the engine
        pane = TerminalPane(session.terminal)   # attaches: the screen mirrors the engine's
    await client.answer(question_id, option=1)
    await client.close()                 # detach; the engine and its agents go on

It implements the console's `EngineInterface` (semo/engine/interface.py), as `InProcessEngine` does
for an engine in the console's own process. When the engine goes away, `gone` is set with the
reason, every operation raises `EngineGone`, and `on_gone` callbacks run; nothing is ever
reported as delivered to an engine that is not there.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib
import itertools
import logging
import os
import socket
import struct
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from semo.engine.bus import EventBus
from semo.engine.control.mirror import MirrorScreen
from semo.engine.control.views import Record
from semo.engine.control.wire import (
    MAX_SERVER_FRAME_BYTES,
    PROTOCOL_VERSION,
    START_WAIT_SECONDS,
    FrameError,
    StyleBook,
    decode_body,
    encode_frame,
    piece_size,
    read_frame,
)
from semo.engine.interface import (
    AgentView,
    CommandView,
    OfficeView,
    PoolView,
    QuestionView,
    pool_view,
)
from semo.engine.plain_text import plain
from semo.engine.protocol.state import AgentState

if TYPE_CHECKING:  # pydantic and the store's models load when a reply needs them (views.py)
    from semo.engine.jobwork.review import JobDiff, JobReview
    from semo.engine.office.job_ops import JobTimeline, JobView
    from semo.engine.store.models import Job
    from semo.engine.terminal.screen import TerminalScreen

log = logging.getLogger("semo.control.client")

#: seconds an operation waits for the engine's reply
REPLY_TIMEOUT = 30.0
#: characters of input per request (JSON-escaped, even 4-byte characters stay under 1 MiB)
INPUT_CHUNK = 100_000


class EngineNotRunning(ConnectionError):
    """No engine serves the office's control socket."""


def not_running(office: str, error: OSError) -> EngineNotRunning:
    """The error for a control socket that is missing or refuses connections, in plain words."""
    why = (
        "none is running (`semo engine` or `semo demo` starts one)"
        if isinstance(error, FileNotFoundError)
        else "its control socket refuses connections (the engine has stopped)"
    )
    return EngineNotRunning(f"no engine serves office {office!r}: {why}")


class EngineGone(ConnectionError):
    """The engine went away (stopped or killed): nothing was delivered."""


class RemoteTerminal:
    """A session's terminal seen through the socket: `screen` mirrors the engine's, `write` and
    `resize` go to the engine. Shaped like `TerminalSession` for the console's pane."""

    def __init__(self, client: EngineClient, session_id: str) -> None:
        self._client = client
        self.session_id = session_id
        self.mirror = MirrorScreen()
        self._listeners: list[Callable[[str], None]] = []
        self.attached = False
        self.visible = True
        #: new scrollback lines come with each frame (the protocol's default); a pane that
        #: shows the live screen turns this off and asks for the history when scrolled back
        self.history = True

    @property
    def screen(self) -> TerminalScreen:
        """The mirror: it has what a pane reads of a `TerminalScreen` (control/mirror.py)."""
        return cast("TerminalScreen", self.mirror)

    def write(self, text: str) -> None:
        if self._client.gone is not None:
            from semo.engine.terminal.pty_process import TerminalClosedError

            raise TerminalClosedError(self._client.gone)
        for start in range(0, len(text), INPUT_CHUNK):  # a big paste in frames under the limit
            chunk = text[start : start + INPUT_CHUNK]
            self._client._send({"op": "input", "session": self.session_id, "data": chunk})

    def resize(self, cols: int, rows: int) -> None:
        if self._client.gone is None:
            self._client._send(
                {"op": "resize", "session": self.session_id, "cols": cols, "rows": rows}
            )

    def set_visible(self, visible: bool) -> None:
        """A hidden pane gets no frames; shown again, it gets the whole screen at once."""
        if visible != self.visible and self.attached and self._client.gone is None:
            self._client._send({"op": "pause", "session": self.session_id, "paused": not visible})
        self.visible = visible

    def want_history(self, lines: int) -> None:
        """`lines` > 0: the engine replaces the copy of the scrollback with its last `lines`
        lines, then sends new ones with each frame; 0: only their count (docs/CONSOLE.md)."""
        if self.attached and self._client.gone is None:
            message: dict[str, Any] = {"op": "history", "session": self.session_id}
            message.update({"on": True, "lines": lines} if lines > 0 else {"on": False})
            self._client._send(message)
        self.history = lines > 0

    def add_listener(self, listener: Callable[[str], None]) -> None:
        self._listeners.append(listener)
        self.attach()

    def remove_listener(self, listener: Callable[[str], None]) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)
        if not self._listeners:
            self.detach()

    def attach(self) -> None:
        if not self.attached and self._client.gone is None:
            self.attached = True
            self._client._send(
                {
                    "op": "attach",
                    "session": self.session_id,
                    "paused": not self.visible,
                    "history": self.history,
                }
            )

    def detach(self) -> None:
        if self.attached and self._client.gone is None:
            self._client._send({"op": "detach", "session": self.session_id})
        self.attached = False

    def _changed(self) -> None:
        for listener in list(self._listeners):
            listener("")


class RemoteSession:
    """A live session of the engine, as the console sees it."""

    def __init__(self, client: EngineClient, data: dict[str, Any]) -> None:
        self._client = client
        self.session_id: str = data["session_id"]
        self.role: str = data.get("role") or ""
        self.agent_id: str = data.get("agent_id") or ""
        self.state = AgentState.CREATING
        self.queued = 0
        self.last_line = ""
        self.stale = False
        self.update(data)
        self._terminal: RemoteTerminal | None = None

    def update(self, data: dict[str, Any]) -> None:
        with contextlib.suppress(ValueError):
            self.state = AgentState(data.get("state", self.state.value))
        self.queued = int(data.get("queued", self.queued) or 0)
        #: busy and silent for `stale_after` seconds (AgentSession.stale)
        self.stale = data.get("stale", self.stale) is True
        #: the session's last line as the engine read it (the office snapshot, every second):
        #: current also while no pane shows the session (a hidden pane gets no frames)
        self.last_line = str(data.get("last_line", self.last_line) or "")

    @property
    def ended(self) -> bool:
        return self.state == AgentState.TERMINATED

    @property
    def terminal(self) -> RemoteTerminal:
        if self._terminal is None:
            self._terminal = self._client._terminals.setdefault(
                self.session_id, RemoteTerminal(self._client, self.session_id)
            )
        return self._terminal


class SocketPaths(Protocol):
    """Where an office's engine listens (semo.engine.control.paths.OfficePaths has these)."""

    @property
    def office(self) -> str: ...

    @property
    def socket(self) -> Path: ...


class EngineClient:
    def __init__(self, paths: SocketPaths, *, preconnect: Preconnect | None = None) -> None:
        """`preconnect`: a connection begun before the event loop ran (the console's start)."""
        self.paths = paths
        self.bus = EventBus()
        self.office: OfficeView | None = None
        #: the office's agents by role
        self.agents: dict[str, AgentView] = {}
        #: the store's backend, as the engine says it
        self.backend = "?"
        self._pool: PoolView | None = None
        self.engine_id: str | None = None
        self.pid: int | None = None
        self.consoles = 0
        #: why the engine is gone (None while connected)
        self.gone: str | None = "not connected"
        self._sessions: dict[str, RemoteSession] = {}
        self._terminals: dict[str, RemoteTerminal] = {}
        self._questions: list[QuestionView] = []
        self._commands: list[CommandView] = []
        self._steps: list[dict[str, Any]] = []  # the latest routing steps (snapshot "steps")
        #: finished commands' outcomes by id ("ok", or what went wrong)
        self._results: dict[str, str] = {}
        self._preconnect = preconnect
        #: the engine said it is stopping: it closes the connection soon after its goodbye
        self._stopping = False
        self._connection_state = "?"
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._read_task: asyncio.Task[None] | None = None
        self._ids = itertools.count(1)
        self._replies: dict[int, asyncio.Future[Any]] = {}
        self._styles = StyleBook()
        self._office_listeners: list[Callable[[], None]] = []
        self._gone_listeners: list[Callable[[str], None]] = []
        self.hello: dict[str, Any] = {}

    # -- life cycle ----------------------------------------------------------------------------

    async def connect(self) -> None:
        """Connect (EngineNotRunning when nothing serves the socket)."""
        try:
            reader, writer = await asyncio.open_unix_connection(
                str(self.paths.socket), limit=1 << 20
            )
        except (FileNotFoundError, ConnectionRefusedError) as error:
            raise not_running(self.paths.office, error) from None
        sock: socket.socket = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        try:
            if sock is not None:
                check_peer(sock, self.paths.socket)
            hello = await read_frame(reader, MAX_SERVER_FRAME_BYTES)
            check_hello(hello)
        except EngineNotRunning:
            writer.close()
            raise
        assert hello is not None
        self._connected(reader, writer, hello)

    def _connected(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, hello: dict[str, Any]
    ) -> None:
        self._reader, self._writer = reader, writer
        self.hello = hello
        self.engine_id = hello.get("engine_id")
        self.pid = hello.get("pid")
        self.gone = None
        self._stopping = False  # (an engine that stopped said so: this one is a new run)
        self._read_task = asyncio.create_task(self._read_loop(), name="control client")

    async def start(self) -> None:
        """Connect if needed and subscribe to the office (what `Engine.start` is to the
        in-process console)."""
        if self._preconnect is not None:
            preconnect, self._preconnect = self._preconnect, None
            if await self._take_over(preconnect):
                _load_event_models_soon()
                return
        if self.gone is not None:
            await self.connect()
        # a starting engine answers once it runs (its warm sessions may take a while)
        snapshot = await self.request({"op": "subscribe"}, timeout=START_WAIT_SECONDS + 10)
        self._apply_office(snapshot)
        _load_event_models_soon()

    async def _take_over(self, preconnect: Preconnect) -> bool:
        """Use the connection `preconnect` made and its snapshot; False when it has none (no
        engine answered then: connect again, one may have started since)."""
        try:
            handoff = await asyncio.wrap_future(preconnect.result)
        except EngineNotRunning:
            return False
        handoff.sock.setblocking(False)
        reader, writer = await asyncio.open_unix_connection(sock=handoff.sock, limit=1 << 20)
        self._ids = itertools.count(handoff.next_id)
        self._connected(reader, writer, handoff.hello)
        for frame in handoff.frames:  # what came between the hello and the snapshot, in order
            self._frame(frame)
        self._apply_office(handoff.snapshot)
        return True

    async def close(self) -> None:
        """Detach: the engine and its agents go on."""
        writer = self._writer
        self._lost("detached")
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
        if self._read_task is not None:
            self._read_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._read_task

    async def stop(self, reason: str = "console closed") -> None:
        """The console is done: detach (the engine and its agents go on)."""
        await self.close()

    async def stop_office(self) -> None:
        """Ask the engine to stop, its agents too."""
        await self.stop_engine()

    def on_office(self, listener: Callable[[], None]) -> None:
        """Called after each office snapshot (sessions, pool, questions, commands)."""
        self._office_listeners.append(listener)

    def on_gone(self, listener: Callable[[str], None]) -> None:
        """Called once with the reason when the engine goes away."""
        self._gone_listeners.append(listener)

    # -- requests ------------------------------------------------------------------------------

    def _send(self, message: dict[str, Any]) -> None:
        if self.gone is not None or self._writer is None:
            raise EngineGone(self._gone_message())
        if self._stopping and message.get("op") in _HOUSEKEEPING:
            return  # a write racing the engine's close would fail and lose its goodbye
        self._writer.write(encode_frame(message))

    async def request(self, message: dict[str, Any], timeout: float = REPLY_TIMEOUT) -> Any:
        """Send an operation and wait for its reply (RuntimeError with the engine's message
        when it failed, EngineGone when the engine went away first)."""
        request_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._replies[request_id] = future
        try:
            self._send({**message, "id": request_id})
            async with asyncio.timeout(timeout):  # wait_for may lose a cancellation on 3.11
                return await future
        finally:
            self._replies.pop(request_id, None)

    def _gone_message(self) -> str:
        return (
            f"the engine of office {self.paths.office!r} is not running ({self.gone}): "
            "nothing was delivered"
        )

    # -- the EngineInterface (semo/engine/interface.py) -------------------------------------------

    def sessions(self) -> Sequence[RemoteSession]:
        return list(self._sessions.values())

    def session(self, session_id: str) -> RemoteSession | None:
        return self._sessions.get(session_id)

    def last_line(self, session_id: str) -> str | None:
        """The session's last line from the latest office snapshot (a hidden pane gets no
        frames: the mirror of its screen is behind)."""
        session = self._sessions.get(session_id)
        return session.last_line if session is not None else None

    def pool_status(self) -> PoolView | None:
        return self._pool

    @property
    def office_id(self) -> str:
        assert self.office is not None and self.office.id is not None
        return self.office.id

    def connection_state(self) -> str:
        return self._connection_state if self.gone is None else "engine gone"

    async def pending_questions(self) -> list[QuestionView]:
        return list(self._questions)

    async def recent_commands(self, limit: int = 20) -> list[CommandView]:
        return self._commands[:limit]

    async def command_outcome(self, command_id: str) -> str | None:
        """What the engine said of the finished command (views.outcome_text, at most 60
        characters); None until it did."""
        text = self._results.get(command_id)
        if text is None:
            return None
        return "ok" if text == "ok" else plain(text or "failed", one_line=True)[:60]

    def recent_steps(self) -> list[dict[str, Any]]:
        """The engine's latest routing steps, oldest first: what a console that attaches
        now missed (semo.engine.control.views.step_view's fields)."""
        return list(self._steps)

    async def answer(
        self, question_id: str, *, text: str | None = None, option: int | None = None
    ) -> str | None:
        """The answer as the engine recorded it."""
        result = await self.request(
            {"op": "answer", "question": question_id, "text": text, "option": option}
        )
        answer = result.get("answer") if isinstance(result, dict) else None
        return answer if isinstance(answer, str) else None

    def send_prompt(self, session_id: str, text: str) -> None:
        self._send({"op": "prompt", "session": session_id, "text": text})

    async def prompt(self, session_id: str, text: str) -> None:
        await self.request({"op": "prompt", "session": session_id, "text": text})

    async def cancel(self, session_id: str) -> None:
        await self.request({"op": "cancel", "session": session_id})

    async def terminate(self, session_id: str) -> None:
        await self.request({"op": "terminate", "session": session_id})
        session = self._sessions.pop(session_id, None)
        if session is not None:
            session.state = AgentState.TERMINATED

    async def new_session(self, role: str) -> RemoteSession:
        result = await self.request({"op": "new_session", "role": role})
        session_id = result["session_id"]
        session = self._sessions.get(session_id)
        if session is None:
            session = self._sessions[session_id] = RemoteSession(
                self, {"session_id": session_id, "role": role, "state": "creating"}
            )
        return session

    async def list_jobs(self, *, include_ended: bool = True) -> list[JobView]:
        from semo.engine.office.job_ops import JobView

        result = await self.request({"op": "jobs", "all": include_ended})
        return [JobView.model_validate(job) for job in result]

    async def job_timeline(self, job_id: str) -> JobTimeline:
        from semo.engine.office.job_ops import JobTimeline

        return JobTimeline.model_validate(await self.request({"op": "job", "job": job_id}))

    async def job_review(self, job_id: str) -> JobReview:
        from semo.engine.jobwork.review import JobReview

        return JobReview.model_validate(await self.request({"op": "job_review", "job": job_id}))

    async def job_diff(self, job_id: str) -> JobDiff:
        from semo.engine.jobwork.review import JobDiff

        return JobDiff.model_validate(await self.request({"op": "job_diff", "job": job_id}))

    async def create_job(self, role: str, task: str, context: dict[str, Any] | None = None) -> Job:
        result = await self.request(
            {"op": "create_job", "role": role, "task": task, "context": context}
        )
        from semo.engine.store.models import Job

        return Job.model_validate(result)

    async def cancel_job(self, job_id: str, reason: str = "") -> Job:
        result = await self.request({"op": "cancel_job", "job": job_id, "reason": reason})
        from semo.engine.store.models import Job

        return Job.model_validate(result)

    async def start_recording(self, session_id: str) -> Path:
        return Path(await self.request({"op": "record_start", "session": session_id}))

    async def stop_recording(self, session_id: str) -> None:
        await self.request({"op": "record_stop", "session": session_id})

    async def demo_job(self, started: Callable[[str], None]) -> None:
        """Nothing: a demo engine in the background runs its own job."""

    async def stop_engine(self) -> int | None:
        """Ask the engine to stop (its agents too); returns its pid."""
        return (await self.stop_engine_reply())[0]

    async def stop_engine_reply(self) -> tuple[int | None, int | None]:
        """Ask the engine to stop (its agents too); returns its pid and how many agents it
        is stopping (None each when its reply does not say)."""
        result = await self.request({"op": "stop"})
        if not isinstance(result, dict):
            return None, None
        pid, agents = result.get("pid"), result.get("agents")
        return (
            pid if isinstance(pid, int) else None,
            agents if isinstance(agents, int) and agents >= 0 else None,
        )

    # -- reading -------------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        reason = "the engine closed the connection"
        assert self._reader is not None
        try:
            while True:
                frame = await read_frame(self._reader, MAX_SERVER_FRAME_BYTES)
                if frame is None:
                    break
                try:
                    reason = self._frame(frame) or reason
                except Exception:  # one frame the console cannot apply must not end the rest
                    log.exception("a %r frame from the engine was not applied", frame.get("t"))
        except (FrameError, ConnectionError, OSError) as error:
            reason = f"the connection to the engine broke: {error}"
        except asyncio.CancelledError:
            return
        self._lost(reason)

    def _frame(self, frame: dict[str, Any]) -> str | None:
        """Apply one frame from the engine; the reason it gives when it says goodbye."""
        kind = frame.get("t")
        if kind == "screen":
            self._apply_screen(frame)
        elif kind == "reply":
            self._reply(frame)
        elif kind == "event":
            self._event(frame.get("e"))
        elif kind == "office":
            self._apply_office(frame.get("office") or {})
        elif kind == "bye":
            # gone from now on: a write after this (a pane detaching as its session ended) would
            # fail on the closing socket and the failure would hide this reason
            reason = f"the engine stopped: {frame.get('reason') or 'no reason'}"
            self._lost(reason)
            return reason
        elif kind == "error":
            log.warning("engine: %s", frame.get("error"))
        return None

    def _lost(self, reason: str) -> None:
        if self.gone is not None:
            return
        self.gone = reason
        for future in self._replies.values():
            if not future.done():
                future.set_exception(EngineGone(self._gone_message()))
        for terminal in self._terminals.values():
            terminal.attached = False
        for listener in list(self._gone_listeners):
            listener(reason)

    def _reply(self, frame: dict[str, Any]) -> None:
        request_id = frame.get("id")
        future = self._replies.get(request_id) if isinstance(request_id, int) else None
        if future is None or future.done():
            return
        if frame.get("ok"):
            future.set_result(frame.get("result"))
        else:
            future.set_exception(RuntimeError(str(frame.get("error") or "failed")))

    def _apply_screen(self, frame: dict[str, Any]) -> None:
        if frame.get("styles_reset"):
            self._styles.clear()
        styles = frame.get("styles")
        if styles:
            self._styles.add(styles)
        session_id = frame.get("s")
        terminal = self._terminals.get(session_id) if isinstance(session_id, str) else None
        if terminal is None:
            return
        terminal.mirror.apply(frame, self._styles)
        terminal._changed()

    def _event(self, data: Any) -> None:
        if isinstance(data, dict) and data.get("kind") == "engine_status":
            self._stopping = data.get("status") in ("stopping", "stopped")
        from pydantic import ValidationError

        from semo.engine.events import SessionStatusChanged, event_from_json

        try:
            event = event_from_json(data)
        except ValidationError:
            return
        if isinstance(event, SessionStatusChanged):
            session = self._sessions.get(event.session_id)
            if event.status == "terminated":
                if session is not None:
                    session.state = AgentState.TERMINATED
                    del self._sessions[event.session_id]
                self._terminals.pop(event.session_id, None)
            elif session is None:
                self._sessions[event.session_id] = RemoteSession(
                    self,
                    {
                        "session_id": event.session_id,
                        "role": event.role or "",
                        "agent_id": event.agent_id,
                        "state": event.status,
                    },
                )
            else:
                session.update({"state": event.status})
        self.bus.publish(event)

    def _apply_office(self, data: dict[str, Any]) -> None:
        if not data:
            return
        self.office = OfficeView(name=data.get("name") or self.paths.office, id=data.get("id"))
        self.backend = data.get("backend") or "?"
        self._connection_state = data.get("connection") or "?"
        self.consoles = int(data.get("consoles") or 0)
        agents = data.get("agents") or {}
        self.agents = {
            role: AgentView(a.get("id") or "", role, str(a.get("name") or ""))
            for role, a in agents.items()
        }
        live = {s["session_id"]: s for s in data.get("sessions") or []}
        for session_id in list(self._sessions):
            if session_id not in live:
                self._sessions.pop(session_id).state = AgentState.TERMINATED
        for session_id, row in live.items():
            session = self._sessions.get(session_id)
            if session is None:
                self._sessions[session_id] = RemoteSession(self, row)
            else:
                session.update(row)
        if data.get("pool"):
            self._pool = pool_view(data["pool"])
        if "questions" in data:
            self._questions = [question_view(q) for q in data["questions"]]
            self._commands = [command_view(c) for c in data.get("commands") or []]
            self._steps = list(data.get("steps") or [])
            self._results.update(data.get("results") or {})
        for listener in list(self._office_listeners):
            listener()


def question_view(data: dict[str, Any]) -> QuestionView:
    """A snapshot's question (store.models.UserQuestion's JSON)."""
    row = Record(data)
    return QuestionView(
        id=row.id,
        agent_id=row.agent_id,
        session_id=data.get("session_id"),
        question_type=data.get("question_type") or "text",
        question=row.question,
        options=list(data.get("options") or []),
        created_at=row.created_at,
    )


def command_view(data: dict[str, Any]) -> CommandView:
    """A snapshot's command (store.models.AgentCommand's JSON)."""
    row = Record(data)
    return CommandView(
        id=row.id,
        created_at=row.created_at,
        command_type=row.command_type,
        status=row.status,
        payload=dict(data.get("payload") or {}),
    )


#: what a console sends only to keep its view current: not worth sending to a stopping engine
_HOUSEKEEPING = frozenset({"attach", "detach", "pause", "resize"})
#: seconds after the snapshot before the event models load (after the first frame)
EVENT_MODELS_DELAY = 1.0


def _load_event_models_soon() -> None:
    """Import semo.engine.events (pydantic and the store's models) in a thread once the first frame
    is drawn: the first event the engine sends would otherwise stop the console for as long
    (0.1-0.3 s on a loaded machine)."""
    if "semo.engine.events" in sys.modules:
        return

    def load() -> None:
        with contextlib.suppress(Exception):
            importlib.import_module("semo.engine.events")

    timer = threading.Timer(EVENT_MODELS_DELAY, load)
    timer.daemon = True
    timer.start()


def check_peer(sock: socket.socket, path: Path) -> None:
    """EngineNotRunning unless the process serving `path` runs as our uid (SO_PEERCRED): a
    socket of another user is never an engine of ours (it could have made the folder first)."""
    peercred = getattr(socket, "SO_PEERCRED", None)
    if peercred is None:
        return
    _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, peercred, 12))
    if uid != os.getuid():
        raise EngineNotRunning(f"{path} is served by uid {uid}, not by us: not connecting")


def check_hello(hello: dict[str, Any] | None) -> None:
    """EngineNotRunning unless `hello` is an engine's greeting in this client's protocol."""
    if hello is None or hello.get("t") != "hello":
        raise EngineNotRunning("the control socket did not greet")
    if hello.get("v") != PROTOCOL_VERSION:
        raise EngineNotRunning(
            f"the engine speaks control protocol {hello.get('v')}, this console "
            f"{PROTOCOL_VERSION}: restart it with `semo stop` then `semo console`"
        )


# -- connecting before the event loop runs -----------------------------------------------------


@dataclass
class FirstScreen:
    """What a console can paint before its app runs (semo/console/first_frame.py)."""

    snapshot: dict[str, Any]
    #: the first full screen frame of each session `pick` chose, by session id (a session
    #: that ended meanwhile has none)
    screens: dict[str, dict[str, Any]]


@dataclass
class Handoff:
    """A connection made in a thread, ready for an EngineClient to take over."""

    sock: socket.socket
    hello: dict[str, Any]
    snapshot: dict[str, Any]
    #: frames that arrived after the hello and before the snapshot's reply
    frames: list[dict[str, Any]] = field(default_factory=list)
    next_id: int = 2


class Preconnect:
    """Connects to an office's control socket and subscribes, in a thread, while the console
    imports Textual and builds its app (its start is mostly imports: the engine's answer
    comes meanwhile). `greeted()` says whether an engine answered; `result` gives the
    `Handoff` (or EngineNotRunning, or the error) to `EngineClient(preconnect=...)`."""

    def __init__(
        self,
        socket_path: Path,
        office: str,
        pick: Callable[[dict[str, Any]], list[str]] | None = None,
    ) -> None:
        """`pick`: the sessions of the snapshot whose screens `first_screen` gives (each is
        attached to at once, until its first full screen came, then detached)."""
        self.socket_path = socket_path
        self.office = office
        self.result: concurrent.futures.Future[Handoff] = concurrent.futures.Future()
        self._greeted: concurrent.futures.Future[bool] = concurrent.futures.Future()
        self._pick = pick
        self._first: concurrent.futures.Future[FirstScreen | None] = concurrent.futures.Future()
        threading.Thread(target=self._run, name="semo preconnect", daemon=True).start()

    def first_screen(self, timeout: float) -> FirstScreen | None:
        """The office snapshot and the first screens of the sessions `pick` chose, once they
        came (within `timeout` s); None without them (no engine, too slow)."""
        try:
            return self._first.result(timeout)
        except concurrent.futures.TimeoutError:
            return None

    def greeted(self, timeout: float = 10.0) -> bool:
        """True once something accepted the connection (an engine; `result` says whether it
        greeted in this protocol); False when nothing listens, or after `timeout` s."""
        try:
            return self._greeted.result(timeout)
        except concurrent.futures.TimeoutError:
            return False

    def _run(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            handoff = self._connect(sock)
        except BaseException as error:
            sock.close()
            if not self._greeted.done():
                self._greeted.set_result(False)
            if not self._first.done():
                self._first.set_result(None)
            self.result.set_exception(error)
        else:
            self.result.set_result(handoff)

    def _connect(self, sock: socket.socket) -> Handoff:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        sock.settimeout(10.0)
        try:
            sock.connect(str(self.socket_path))
        except (FileNotFoundError, ConnectionRefusedError) as error:
            raise not_running(self.office, error) from None
        self._greeted.set_result(True)  # something serves the socket (check_hello says what)
        check_peer(sock, self.socket_path)
        hello = _read_frame_blocking(sock)
        check_hello(hello)
        assert hello is not None
        sock.settimeout(START_WAIT_SECONDS + 10)  # a starting engine answers once it runs
        sock.sendall(encode_frame({"op": "subscribe", "id": 1}))
        frames = []
        while True:
            frame = _read_frame_blocking(sock)
            if frame is None:
                raise EngineGone("the engine closed the connection")
            if frame.get("t") == "reply" and frame.get("id") == 1:
                break
            frames.append(frame)
        if not frame.get("ok"):
            raise RuntimeError(str(frame.get("error") or "failed"))
        snapshot = frame.get("result") or {}
        sessions = self._pick(snapshot) if self._pick is not None else []
        screens = self._attach_once(sock, sessions, frames)
        self._first.set_result(FirstScreen(snapshot, screens))
        return Handoff(sock, hello, snapshot, frames, next_id=2 + len(sessions))

    def _attach_once(
        self, sock: socket.socket, sessions: list[str], frames: list[dict[str, Any]]
    ) -> dict[str, dict[str, Any]]:
        """Attach to each of `sessions` (requests 2, 3...) for its first full screen, then
        detach. Every frame read goes on to the client too, in order: a screen frame defines
        style ids the connection's later frames only refer to (semo/engine/control/wire.py)."""
        waiting = {2 + index: session for index, session in enumerate(sessions)}
        for request_id, session in waiting.items():
            attach = {"op": "attach", "id": request_id, "session": session, "history": False}
            sock.sendall(encode_frame(attach))
        screens: dict[str, dict[str, Any]] = {}
        wanted = set(sessions)
        while waiting or wanted:
            frame = _read_frame_blocking(sock)
            if frame is None:
                raise EngineGone("the engine closed the connection")
            frames.append(frame)
            if frame.get("t") == "reply" and frame.get("id") in waiting:
                session = waiting.pop(frame["id"])
                if not frame.get("ok"):  # the session ended meanwhile: no screen comes
                    wanted.discard(session)
            elif frame.get("t") == "screen" and frame.get("s") in wanted:
                screens[frame["s"]] = frame
                wanted.discard(frame["s"])
        for session in sessions:
            sock.sendall(encode_frame({"op": "detach", "session": session}))
        return screens


def _read_frame_blocking(sock: socket.socket) -> dict[str, Any] | None:
    """wire.read_frame on a blocking socket, reading no byte past the message."""
    body = bytearray()
    while True:
        header = _recv_exactly(sock, 4)
        if not header and not body:
            return None
        if len(header) < 4:
            raise FrameError("the stream ended inside a frame header")
        size, more = piece_size(header, len(body), MAX_SERVER_FRAME_BYTES)
        piece = _recv_exactly(sock, size)
        if len(piece) < size:
            raise FrameError("the stream ended inside a frame")
        body += piece
        if not more:
            return decode_body(body)


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    """`size` bytes, or fewer when the stream ends (b"" at a clean end before any)."""
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:], size - got)
        if n == 0:
            break
        got += n
    return bytes(buffer[:got])
