"""One agent session: a CLI in a PTY, its protocol observer, and a FIFO input queue.

How it works: docs/SESSIONS.md, "An agent session".
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from semo.engine.agents import registry
from semo.engine.agents.base import AgentAdapter
from semo.engine.protocol.hooks import HookEvent
from semo.engine.protocol.messages import ProtocolMessage
from semo.engine.protocol.monitor import DEFAULT_STALE_AFTER, Signal
from semo.engine.protocol.observer import (
    AgentObserver,
    MessageFound,
    ObserverEvent,
)
from semo.engine.protocol.state import AgentState, StateChange
from semo.engine.protocol.turn_gate import TurnGate
from semo.engine.sessions.profiles import AgentProfile, paste, sanitize_input
from semo.engine.terminal.pty_process import ExitStatus, TerminalClosedError
from semo.engine.terminal.session import TerminalSession

log = logging.getLogger("semo.sessions")

PromptKind = Literal["prompt", "answer"]

#: Screen reads are coalesced: at most one observer pass per frame while output streams.
FRAME_SECONDS = 1 / 60
#: How often the session checks for a stale (silent while busy) agent.
TICK_SECONDS = 1.0
#: After a paste's first echo, this much quiet before Enter (the CLI may redraw in steps).
PASTE_SETTLE_SECONDS = 0.01
PASTE_SETTLE_TIMEOUT = 1.0
#: Output chunks kept for late subscribers (bounded output history). One chunk is what one
#: turn of reading took in (up to the terminal's read size), however many pieces it came in.
OUTPUT_HISTORY_CHUNKS = 256
#: seconds an agent gets to exit after SIGHUP/SIGTERM before it is killed, when nobody says
#: otherwise (an operator's terminate command); the engine's stop gives [engine] shutdown_grace
TERMINATE_GRACE = 2.0


class SessionError(Exception):
    """A session operation that cannot be done (ended session, failed delivery...)."""


class SessionEnded(SessionError):
    pass


class DeliveryFailed(SessionError):
    pass


class PromptWithdrawn(SessionError):
    """The prompt's gate said no just before it would have been typed (its job was
    cancelled): it was never typed."""


#: asked right before a queued prompt is typed: None to type it, or why it must not be
PromptGate = Callable[[], Awaitable[str | None]]


@dataclass(frozen=True)
class OutputChunk:
    seq: int
    data: str
    at: float


@dataclass(frozen=True)
class PromptDelivered:
    prompt_id: int
    kind: PromptKind
    waited: float  # seconds in the queue before the agent was ready
    attempts: int
    at: float


SessionEvent = ObserverEvent | OutputChunk | PromptDelivered
SessionListener = Callable[["AgentSession", SessionEvent], None]


@dataclass
class _Queued:
    prompt_id: int
    text: str
    kind: PromptKind
    enqueued_at: float
    delivered: asyncio.Future[PromptDelivered]
    gate: PromptGate | None = None


@dataclass
class TurnResult:
    """What a finished turn left: the agent's text and the protocol messages in it."""

    state: AgentState
    text: str
    messages: list[ProtocolMessage] = field(default_factory=list)


class AgentSession:
    def __init__(
        self,
        session_id: str,
        argv: Sequence[str],
        profile: AgentProfile,
        *,
        adapter: AgentAdapter | None = None,
        role: str = "",
        agent_id: str = "",
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        cols: int = 120,
        rows: int = 40,
        record: str | os.PathLike[str] | None = None,
        stale_after: float = DEFAULT_STALE_AFTER,
    ) -> None:
        self.session_id = session_id
        self.role = role
        #: a person interrupted the current turn (`cancel(by_operator=True)`)
        self.interrupted_by_operator = False
        self.agent_id = agent_id
        self.profile = profile
        #: the agent CLI's adapter (engine.agents): default, the profile's
        self.adapter = adapter or registry.adapter(profile.name)
        self.cwd = Path(cwd) if cwd is not None else None
        self.terminal = TerminalSession(argv, cols=cols, rows=rows, cwd=cwd, env=env, record=record)
        self._transcript_text: str | None = None  # the Stop's turn text, read by the hooks
        self.observer = AgentObserver(
            self.adapter.screen_reader(profile),
            read_transcript=lambda _path: self._transcript_text,
            stale_after=stale_after,
            screen=self.terminal.screen if profile.uses_hooks else None,
        )
        self.created_at = time.monotonic()
        self.last_activity = self.created_at
        self.output_history: list[OutputChunk] = []
        self.delivered = 0
        self._listeners: list[SessionListener] = []
        self._queue: list[_Queued] = []
        self._queue_changed = asyncio.Event()
        self._state_changed = asyncio.Event()
        self._submitted = asyncio.Event()
        #: the hook reports this session's CLI can have sent (semo/engine/protocol/turn_gate.py;
        #: the session manager asks it before the hook server delivers or decides one)
        self.turns = TurnGate()
        self._output_seen = asyncio.Event()
        self._ids = itertools.count(1)
        self._seq = itertools.count(1)
        self._turn_output: list[str] = []  # this turn of reading's pieces, not notified yet
        self._frame: asyncio.TimerHandle | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._turn_start_line = 0
        self._ending: str | None = None
        self._typing: _Queued | None = None
        self._last_turn_text = ""
        #: the CLI's own id of this conversation, from its hooks (what its resume takes)
        self.conversation_id: str | None = None
        self._turn_messages: list[ProtocolMessage] = []

    # -- life cycle ----------------------------------------------------------------------------

    @property
    def state(self) -> AgentState:
        return self.observer.state

    @property
    def stale(self) -> bool:
        """Busy and silent for `stale_after` seconds (reported once, as a `stale` signal),
        until the agent prints again or its turn ends."""
        return self.observer.monitor.stale and self.observer.tracker.busy

    @property
    def pid(self) -> int | None:
        process = self.terminal.process
        return process.pid if process is not None else None

    @property
    def ended(self) -> bool:
        return self.state == AgentState.TERMINATED

    @property
    def exit_status(self) -> ExitStatus | None:
        return self.terminal.exit_status

    def add_listener(self, listener: SessionListener) -> None:
        self._listeners.append(listener)

    def start(self) -> None:
        """Spawn the CLI (TerminalSpawnError with the reason if it cannot start)."""
        self.terminal.add_listener(self._on_output)
        self.terminal.add_turn_listener(self._output_turn_done)
        self.terminal.add_exit_listener(self._on_exit)
        self.terminal.add_resize_listener(self._flush_screen)
        self.terminal.start()
        self._tasks = [
            asyncio.create_task(self._deliver_loop(), name=f"deliver {self.session_id}"),
            asyncio.create_task(self._tick_loop(), name=f"tick {self.session_id}"),
        ]

    async def wait_ready(self, timeout: float) -> None:
        """Until the agent is at its prompt; SessionEnded if it exits, TimeoutError on timeout."""
        await self._wait_state(lambda s: s == AgentState.READY, timeout, "ready")

    async def wait_for_state(self, state: AgentState, timeout: float) -> None:
        await self._wait_state(lambda s: s == state, timeout, str(state))

    async def terminate(self, reason: str = "terminated", grace: float = TERMINATE_GRACE) -> None:
        """End the CLI: SIGHUP and SIGTERM to its process group and the rest of its session,
        SIGKILL to what is left after `grace` seconds; queued prompts fail with SessionEnded."""
        self._ending = reason
        if self._frame is not None:
            self._frame.cancel()
        if self.terminal.process is not None:
            await self.terminal.close(grace)
        self._set_state(AgentState.TERMINATED, reason)
        self._fail_queue(SessionEnded(f"session {self.session_id} ended: {reason}"))
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # -- input ---------------------------------------------------------------------------------

    def submit(
        self, text: str, kind: PromptKind = "prompt", gate: PromptGate | None = None
    ) -> asyncio.Future[PromptDelivered]:
        """Queue `text`; the future resolves when the agent confirmed it (or fails:
        PromptWithdrawn when `gate`, asked right before typing, gives a reason)."""
        if self.ended:
            raise SessionEnded(f"session {self.session_id} has ended")
        text = sanitize_input(text)
        if not text.strip():
            raise SessionError(
                "an empty prompt cannot be delivered (nothing left once control "
                "characters are removed)"
            )
        future: asyncio.Future[PromptDelivered] = asyncio.get_running_loop().create_future()
        self._queue.append(_Queued(next(self._ids), text, kind, time.monotonic(), future, gate))
        self._queue_changed.set()
        return future

    def post(self, text: str, kind: PromptKind = "prompt") -> None:
        """`submit` for callers that do not wait: a failed delivery is logged, not lost."""

        def check(future: asyncio.Future[PromptDelivered]) -> None:
            if not future.cancelled() and (error := future.exception()) is not None:
                log.warning("session %s: a prompt was not delivered: %s", self.session_id, error)

        self.submit(text, kind).add_done_callback(check)

    @property
    def queued(self) -> int:
        return len(self._queue)

    async def deliver(
        self,
        text: str,
        *,
        timeout: float,
        kind: PromptKind = "prompt",
        gate: PromptGate | None = None,
    ) -> PromptDelivered:
        """Queue `text` and wait until the agent took it; on timeout or cancellation it leaves
        the queue (unless it is being typed at that moment), so a caller that gave up is not
        typed later. `gate`: see `submit`."""
        return await self._delivery(self.submit(text, kind, gate), timeout)

    async def _delivery(
        self, delivered: asyncio.Future[PromptDelivered], timeout: float
    ) -> PromptDelivered:
        try:
            # asyncio.timeout, not wait_for: 3.11's wait_for returns the result when a
            # cancellation meets the delivery, and the cancelled caller goes on
            async with asyncio.timeout(timeout):
                return await asyncio.shield(delivered)
        except (TimeoutError, asyncio.CancelledError):
            self._withdraw(delivered)
            raise

    async def execute(
        self, text: str, *, timeout: float, kind: PromptKind = "prompt"
    ) -> TurnResult:
        """Deliver `text` and wait until the turn it started ends (ready or waiting_input).
        The result is taken when that turn ends, so a prompt typed right after it (semo's
        feedback on a message the turn held) cannot empty its messages or replace its text."""
        deadline = time.monotonic() + timeout
        turn_end = (AgentState.READY, AgentState.WAITING_INPUT)
        delivered = self.submit(text, kind)
        ours = self._queue[-1].prompt_id
        messages: list[list[ProtocolMessage]] = []  # this turn's list, once it was typed
        result: list[TurnResult] = []

        def watch(_session: AgentSession, event: SessionEvent) -> None:
            if result:
                return
            if isinstance(event, PromptDelivered) and event.prompt_id == ours:
                messages.append(self._turn_messages)  # the next prompt starts a new list
                if self.state in turn_end:  # the turn ended before the agent confirmed it
                    result.append(TurnResult(self.state, self._last_turn_text, list(messages[0])))
            elif messages and isinstance(event, StateChange) and event.state in turn_end:
                result.append(TurnResult(event.state, self._last_turn_text, list(messages[0])))

        self._listeners.append(watch)
        try:
            await self._delivery(delivered, timeout)
            remaining = max(0.0, deadline - time.monotonic())
            await self._wait_state(lambda _state: bool(result), remaining, "turn end")
            return result[0]
        finally:
            self._listeners.remove(watch)

    def write(self, text: str) -> None:
        """Raw input, at once (an operator's keystrokes, a dialog answer); an Enter in it may
        submit a prompt, so a turn may report (self.turns)."""
        self._check_running()
        if "\r" in text or "\n" in text:
            self.turns.submitted()
        self.observer.typed(text)
        self.terminal.write(text)

    async def send_keys(self, spec: str) -> None:
        self._check_running()
        await self.terminal.send_keys(spec)

    async def cancel(self, *, by_operator: bool = False) -> None:
        """Interrupt the running turn (Esc for Claude Code, Ctrl+C for others). `by_operator`:
        a person asked (the console's F8, a `cancel` command): the turn's end (or the agent's,
        if Ctrl+C ends it) is theirs, not a crash or an error (`interrupted_by_operator`)."""
        if by_operator:
            self.interrupted_by_operator = True
        await self.send_keys(self.profile.cancel_keys)

    def resize(self, cols: int, rows: int) -> None:
        self.terminal.resize(cols, rows)
        self.observer.resized(self.terminal.screen)  # the rows were re-wrapped: nothing new

    # -- output --------------------------------------------------------------------------------

    def screen_rows(self) -> list[str]:
        return self.terminal.screen.text_rows()

    def last_lines(self, count: int) -> list[str]:
        """The last `count` lines: scrollback then the screen, trailing blank rows dropped."""
        screen = self.terminal.screen
        rows = screen.text_rows()
        while rows and not rows[-1]:
            rows.pop()
        if len(rows) >= count:
            return rows[-count:]
        need = count - len(rows)
        history = [line.text for line in list(screen.scrollback)[-need:]] if need else []
        return history + rows

    # -- hooks and the screen ------------------------------------------------------------------

    def on_hook(self, event: HookEvent) -> None:
        """A hook report for this session (routed here by the session manager, once its turn
        gate `turns` admitted it)."""
        self.last_activity = time.monotonic()
        if conversation := self.adapter.conversation_id(event.payload):
            self.conversation_id = conversation
        if event.event == "UserPromptSubmit":
            self._submitted.set()
            self._turn_messages = []
        elif event.event == "Stop":
            self._last_turn_text = event.last_assistant_message or ""
        self._transcript_text = event.transcript_text  # never a file read here
        self._dispatch(self.observer.on_hook(event.event, event.payload, event.received_at))

    def permission_decided(self) -> None:
        """Its permission request was decided: the agent works again (not waiting_input)."""
        self._dispatch(self.observer.permission_decided(time.monotonic()))

    def _on_output(self, text: str) -> None:
        self.last_activity = time.monotonic()
        self._turn_output.append(text)
        self._output_seen.set()
        if self._frame is None:
            loop = asyncio.get_running_loop()
            self._frame = loop.call_later(FRAME_SECONDS, self._read_screen)

    def _output_turn_done(self) -> None:
        """One OutputChunk per turn of reading (a turn hands the screen several pieces): the
        bus gets as many session_output events as before the pieces, not one per piece."""
        if not self._turn_output:
            return
        text = "".join(self._turn_output)
        self._turn_output.clear()
        chunk = OutputChunk(next(self._seq), text, self.last_activity)
        self.output_history.append(chunk)
        if len(self.output_history) > OUTPUT_HISTORY_CHUNKS:
            del self.output_history[: -OUTPUT_HISTORY_CHUNKS // 2]
        self._notify(chunk)

    def _flush_screen(self) -> None:
        """Read what the observer has not read yet, before a resize cuts the rows."""
        if self._frame is not None:
            self._frame.cancel()
            self._read_screen()

    def _read_screen(self) -> None:
        self._frame = None
        if not self.ended:
            self._dispatch(self.observer.on_screen(self.terminal.screen, time.monotonic()))

    def _on_exit(self, status: ExitStatus) -> None:
        self._output_turn_done()  # what was read while the child exited
        self._flush_screen()
        if self._ending is not None:  # we ended it: not a crash
            self._set_state(AgentState.TERMINATED, self._ending)
            self._fail_queue(SessionEnded(f"session {self.session_id} ended: {self._ending}"))
            return
        self._dispatch(self.observer.on_exit(status.code, status.signal, time.monotonic()))
        what = status.describe()
        self._fail_queue(SessionEnded(f"session {self.session_id} exited ({what})"))

    def _dispatch(self, events: list[ObserverEvent]) -> None:
        for event in events:
            if isinstance(event, MessageFound):
                self._turn_messages.append(event.message)
            if isinstance(event, StateChange):
                self._on_state(event)
            elif isinstance(event, Signal) and event.kind == "stale":
                log.warning("session %s (%s) is stale: %s", self.session_id, self.role, event.text)
            self._notify(event)

    def _on_state(self, change: StateChange) -> None:
        if change.state == AgentState.EXECUTING and change.previous != AgentState.EXECUTING:
            self.interrupted_by_operator = False  # a new turn
        if change.previous == AgentState.EXECUTING and not self.profile.uses_hooks:
            self._last_turn_text = "\n".join(self._lines_since(self._turn_start_line))
        self._state_changed.set()
        self._queue_changed.set()

    def _notify(self, event: SessionEvent) -> None:
        for listener in self._listeners:
            try:
                listener(self, event)
            except Exception:
                log.exception("session listener failed (%s)", self.session_id)

    def _set_state(self, state: AgentState, reason: str) -> None:
        change = self.observer.tracker.set(state, "engine", reason, time.monotonic())
        if change is not None:
            self.observer.events.append(change)
            self._dispatch_change(change)

    def _dispatch_change(self, change: StateChange) -> None:
        self._on_state(change)
        self._notify(change)

    # -- delivery ------------------------------------------------------------------------------

    def _accepts(self, item: _Queued) -> bool:
        state = self.state
        if state == AgentState.READY:
            return True
        if item.kind != "answer" or state != AgentState.WAITING_INPUT:
            return False
        last = self.observer.tracker.history[-1] if self.observer.tracker.history else None
        return last is not None and last.source == "protocol"

    def _next(self) -> _Queued | None:
        """The first item the agent takes now, wherever it is in the queue: while it waits for
        the operator an answer overtakes the prompts queued before it (they stay queued, in
        order, until the agent is ready again); items of one kind keep their order."""
        return next((item for item in self._queue if self._accepts(item)), None)

    async def _deliver_loop(self) -> None:
        while True:
            while (item := self._next()) is None:
                self._queue_changed.clear()
                await self._queue_changed.wait()
            if item.gate is not None and not await self._gate_opens(item):
                continue
            self._typing = item
            try:
                attempts = await self._deliver(item)
            except (DeliveryFailed, TerminalClosedError) as error:
                # TerminalClosedError: the agent exited while its prompt was typed
                self._pop(item)
                if not item.delivered.done():
                    failure = (
                        error
                        if isinstance(error, DeliveryFailed)
                        else SessionEnded(f"session {self.session_id} ended while typing: {error}")
                    )
                    item.delivered.set_exception(failure)
                    item.delivered.exception()  # retrieved: its caller may have gone
                continue
            finally:
                self._typing = None
            self._pop(item)
            self.delivered += 1
            now = time.monotonic()
            done = PromptDelivered(item.prompt_id, item.kind, now - item.enqueued_at, attempts, now)
            if not item.delivered.done():
                item.delivered.set_result(done)
            self._notify(done)

    async def _gate_opens(self, item: _Queued) -> bool:
        """Ask `item`'s gate right before typing it: False when it says no (the item fails
        with PromptWithdrawn), was withdrawn meanwhile, or the agent no longer takes it now
        (asked again when it does)."""
        assert item.gate is not None
        try:
            why = await item.gate()
        except Exception as error:  # a gate that cannot tell: the prompt is not typed blindly
            why = f"its gate failed: {error}"
        if item not in self._queue or item.delivered.done():
            return False
        if why is not None:
            self._pop(item)
            item.delivered.set_exception(PromptWithdrawn(why))
            item.delivered.exception()  # retrieved: its caller may have gone
            self._queue_changed.set()
            return False
        return self._next() is item

    def _pop(self, item: _Queued) -> None:
        """Take `item` out of the queue wherever it is (gone already if the queue was failed)."""
        self._queue = [queued for queued in self._queue if queued is not item]

    def _withdraw(self, future: asyncio.Future[PromptDelivered]) -> None:
        """Take a prompt whose caller gave up out of the queue, unless it is being typed."""
        for index, item in enumerate(self._queue):
            if item.delivered is future and item is not self._typing:
                del self._queue[index]
                future.cancel()
                self._queue_changed.set()  # an item behind it may be deliverable now
                return

    async def _deliver(self, item: _Queued) -> int:
        self._submitted.clear()
        if not self.profile.uses_hooks:
            self._turn_messages = []  # a generic turn starts here (hooks say it for Claude)
            self.observer.prompt_delivered()
        self._turn_start_line = self._absolute_cursor_line()
        await self._paste(item.text)
        self.turns.submitted()  # one turn, however many Enters it takes
        for attempt in (1, 2):
            before = self.terminal.bytes_out
            self.terminal.write("\r")
            if not self.profile.uses_hooks:
                self._set_state(AgentState.EXECUTING, "prompt delivered")
            if await self._confirmed(before):
                return attempt
            if self.ended:
                break
            screen = self.terminal.screen
            if self.profile.uses_hooks and not self.observer.reader.input_holds_text(screen):
                await self._paste(item.text)
            log.warning(
                "session %s: prompt %d not confirmed, retrying", self.session_id, item.prompt_id
            )
        raise DeliveryFailed(
            f"session {self.session_id}: the agent did not take prompt {item.prompt_id} "
            f"(no confirmation in 2 x {self.profile.confirm_timeout:.0f} s)"
        )

    async def _paste(self, text: str) -> None:
        """Paste `text`, then wait until the agent has drawn it: its first output, then a
        short quiet (the CLI may redraw in several writes), never more than a second."""
        before = self.terminal.bytes_out
        self.terminal.write(paste(text, bracketed=self.terminal.screen.modes.bracketed_paste))
        await self._output_after(before, PASTE_SETTLE_TIMEOUT)
        await self.terminal.wait_quiet(PASTE_SETTLE_SECONDS, PASTE_SETTLE_TIMEOUT)

    async def _output_after(self, output_before: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.terminal.bytes_out == output_before and time.monotonic() < deadline:
            self._output_seen.clear()
            # asyncio.timeout, not wait_for: 3.11's wait_for can lose a cancellation that meets
            # the event (terminate() then waits forever for this task)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(deadline - time.monotonic()):
                    await self._output_seen.wait()
        return self.terminal.bytes_out != output_before

    async def _confirmed(self, output_before: int) -> bool:
        timeout = self.profile.confirm_timeout
        if self.profile.uses_hooks:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._submitted.wait()
            return self._submitted.is_set()
        return await self._output_after(output_before, timeout)

    def _fail_queue(self, error: SessionError) -> None:
        queue, self._queue = self._queue, []
        for item in queue:
            if not item.delivered.done():
                item.delivered.set_exception(error)
                item.delivered.exception()  # a caller that gave up must not leave it unretrieved
        self._queue_changed.set()
        self._state_changed.set()

    # -- helpers -------------------------------------------------------------------------------

    def _check_running(self) -> None:
        if self.ended or self.terminal.process is None or not self.terminal.process.running:
            raise SessionEnded(f"session {self.session_id} is not running")

    async def _wait_state(
        self, done: Callable[[AgentState], bool], timeout: float, what: str
    ) -> None:
        deadline = time.monotonic() + timeout
        while not done(self.state):
            if self.ended:
                raise SessionEnded(f"session {self.session_id} ended before it was {what}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"session {self.session_id}: not {what} after {timeout:.0f} s")
            self._state_changed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self._state_changed.wait()

    async def _tick_loop(self) -> None:
        while not self.ended:
            await asyncio.sleep(TICK_SECONDS)
            self._dispatch(self.observer.tick(time.monotonic()))

    def _absolute_cursor_line(self) -> int:
        screen = self.terminal.screen
        return screen.scrollback.total_pushed + screen.cursor.y

    def _lines_since(self, start: int) -> list[str]:
        """Lines from absolute line `start` up to (not including) the cursor row."""
        screen = self.terminal.screen
        pushed = screen.scrollback.total_pushed
        first = max(start, pushed - len(screen.scrollback))
        lines = []
        for index in range(first, pushed + screen.cursor.y):
            relative = index - pushed
            line = screen.scrollback[relative] if relative < 0 else screen.row_line(relative)
            lines.append(line.text.rstrip())
        return lines
