"""One agent session's protocol pipeline: hooks and screen in, messages/signals/states out.

The screen is read by the session's `ScreenReader`, from its adapter (semo/engine/agents);
`PromptScreen` here reads a program by its prompt pattern. How it works: docs/SESSIONS.md,
"The observer".
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from semo.engine.protocol.messages import AskUser, ProtocolError, ProtocolMessage
from semo.engine.protocol.monitor import (
    DEFAULT_PROMPT_PATTERN,
    DEFAULT_STALE_AFTER,
    OutputMonitor,
    Signal,
    Source,
)
from semo.engine.protocol.parser import MarkerParser, parse_reply
from semo.engine.protocol.screen_text import FinalLines
from semo.engine.protocol.state import AgentState, StateChange, StateSource, StateTracker
from semo.engine.terminal.screen import TerminalScreen

if TYPE_CHECKING:
    from semo.engine.approval_policy import Answer, PermissionRequest

EVENT_HISTORY = 2000
MAX_MESSAGES_PER_TURN = 100
"""Protocol messages (and errors) taken from one turn; past it, one `too_many` error and the
rest of the turn's markers are dropped (a marker flood must not flood the office)."""
MAX_SIGNALS_PER_TURN = 100
"""Completion/error signals reported per turn; later ones only inform and are dropped."""
#: the reason of the state change when a dialog comes up (semo/engine/routing/approvals.py)
DIALOG_REASON = "a dialog waits for you"
_GUTTERS = ("● ", "  ")


@dataclass(frozen=True)
class MessageFound:
    message: ProtocolMessage
    source: Source
    at: float


@dataclass(frozen=True)
class MalformedMessage:
    error: ProtocolError
    source: Source
    at: float


ObserverEvent = MessageFound | MalformedMessage | Signal | StateChange


class PaneDialog(Protocol):
    """A dialog read off an agent's screen that no hook asked about: what it asks, and the keys
    that answer it (semo/engine/routing/approvals.py brings it to the inbox)."""

    @property
    def summary(self) -> str:
        """What the dialog asks, for the inbox."""
        ...

    def keys(self, answer: Answer) -> str:
        """The key spec (semo.engine.terminal.keys) that gives `answer`."""
        ...

    @property
    def request(self) -> PermissionRequest | None:
        """The tool and input it is about, when read off the screen whole (rules and "allow
        for this session" match it); None: a person decides."""
        ...

    @property
    def leads_on(self) -> bool:
        """Only a step before the request's own dialog (Claude Code's auto mode notice): its
        allow keys go on to that dialog, which gets the decision made here."""
        ...


class ScreenReader(Protocol):
    """How an observer reads its agent's screen: one per session, from its adapter.

    It reports through the observer (`set_state`, `report`, `signals`, `new_turn`); the
    observer keeps the state, the turn's budgets and what the hooks said."""

    def on_screen(
        self, observer: AgentObserver, out: list[ObserverEvent], screen: TerminalScreen, at: float
    ) -> None:
        """The screen changed (or time passed)."""
        ...

    def resized(self, observer: AgentObserver, screen: TerminalScreen) -> None:
        """The screen was just resized, nothing drawn since (what was final was read first)."""
        ...

    def typed(self, text: str) -> None:
        """The operator typed `text` into the agent."""
        ...

    def ready_at_start(self, screen: TerminalScreen) -> bool:
        """The CLI's session started (its hook said): whether its prompt is on screen yet."""
        ...

    def input_holds_text(self, screen: TerminalScreen) -> bool:
        """Whether the CLI's input still holds typed or pasted text (not submitted)."""
        ...

    def tool_output_signals(
        self, observer: AgentObserver, screen: TerminalScreen, at: float
    ) -> list[Signal]:
        """Signals in the tool output of the latest turn on screen (informational only)."""
        ...

    def dialog(self, rows: list[str]) -> PaneDialog | None:
        """The dialog on the screen's `rows` that waits for a person, if one does."""
        ...


class AgentObserver:
    def __init__(
        self,
        reader: ScreenReader | None = None,
        *,
        stale_after: float = DEFAULT_STALE_AFTER,
        prompt_pattern: str = DEFAULT_PROMPT_PATTERN,
        read_transcript: Callable[[str], str | None] | None = None,
        screen: TerminalScreen | None = None,
    ) -> None:
        #: reads the screen (default: a program's prompt, `PromptScreen`)
        self.reader: ScreenReader = reader or PromptScreen(prompt_pattern)
        self.screen = screen
        self.tracker = StateTracker()
        self.monitor = OutputMonitor(stale_after)
        #: the turn's whole text where a Stop names it (a session's: what its hooks read)
        self._read_transcript = read_transcript or _no_transcript
        #: a dialog that waits for a person is on screen (its reader says)
        self.dialog_open = False
        #: a hook report came (its reader need not read turns from the screen)
        self.hooks_seen = False
        #: the CLI's SessionStart hook came
        self.session_started = False
        self.turn_messages = 0
        self.turn_signals = 0
        #: the most recent events (bounded: a session can live for days)
        self.events: deque[ObserverEvent] = deque(maxlen=EVENT_HISTORY)

    @property
    def state(self) -> AgentState:
        return self.tracker.state

    # -- inputs ------------------------------------------------------------------------------

    def on_hook(self, event: str, payload: dict[str, Any], at: float) -> list[ObserverEvent]:
        out: list[ObserverEvent] = []
        self.hooks_seen = True
        self.monitor.activity(at)
        if event == "SessionStart":
            self.session_started = True
            if self.screen is None or self.reader.ready_at_start(self.screen):
                self.set_state(out, AgentState.READY, "hook", "session started", at)
        elif event == "UserPromptSubmit":
            self.set_state(out, AgentState.EXECUTING, "hook", "prompt submitted", at)
        elif event == "Stop":
            self._on_stop(out, payload, at)
        elif event == "PermissionRequest":
            tool = payload.get("tool_name")
            what = tool if isinstance(tool, str) and tool.isidentifier() else "a tool"
            self.set_state(out, AgentState.WAITING_INPUT, "hook", f"asks to use {what}", at)
        elif event == "Notification" and payload.get("notification_type") == "permission_prompt":
            reason = str(payload.get("message") or "permission prompt")
            self.set_state(out, AgentState.WAITING_INPUT, "hook", reason, at)
        elif event == "SessionEnd":
            reason = f"session ended ({payload.get('reason', 'unknown')})"
            self.set_state(out, AgentState.TERMINATED, "hook", reason, at)
        return self._emit(out)

    def on_screen(self, screen: TerminalScreen, at: float) -> list[ObserverEvent]:
        out: list[ObserverEvent] = []
        self.monitor.activity(at)
        self.reader.on_screen(self, out, screen, at)
        return self._emit(out)

    def on_exit(self, code: int | None, signal: int | None, at: float) -> list[ObserverEvent]:
        out: list[ObserverEvent] = []
        if code == 0:
            self.set_state(out, AgentState.TERMINATED, "process", "exited with code 0", at)
        else:
            what = f"code {code}" if code is not None else f"signal {signal}"
            self.set_state(out, AgentState.ERROR, "process", f"crashed ({what})", at)
            self.set_state(out, AgentState.TERMINATED, "process", f"process ended ({what})", at)
        return self._emit(out)

    def tick(self, now: float) -> list[ObserverEvent]:
        stale = self.monitor.check_stale(now, busy=self.tracker.busy)
        return self._emit([stale] if stale else [])

    def prompt_delivered(self) -> None:
        """semo typed a prompt: a new turn, with a new message and signal budget. Only this
        starts one for a screen-read agent (a prompt it merely prints, e.g. `$ ` after every
        line of a flood, must not reset the budget)."""
        self.new_turn()

    def typed(self, text: str) -> None:
        """The operator typed `text` into the agent. At a generic agent's prompt, what appears
        after the prompt on its row (up to this many cells) is a draft, not output."""
        self.reader.typed(text)

    def resized(self, screen: TerminalScreen) -> None:
        """The session's screen was just resized, nothing drawn since (what was final before
        was read first). The reflow re-wrapped and moved every row: what was read stays read,
        whatever row it is on now, and a line being written stays one line."""
        self.reader.resized(self, screen)

    def permission_decided(self, at: float) -> list[ObserverEvent]:
        """A permission request was decided (by a person or a rule): the turn goes on."""
        out: list[ObserverEvent] = []
        if self.state == AgentState.WAITING_INPUT and not self.dialog_open:
            self.set_state(out, AgentState.EXECUTING, "hook", "permission decided", at)
        return self._emit(out)

    def answered(self, at: float) -> list[ObserverEvent]:
        """The operator answered the pending question; the answer goes in as the next prompt."""
        out: list[ObserverEvent] = []
        self.set_state(out, AgentState.EXECUTING, "protocol", "question answered", at)
        return self._emit(out)

    def tool_output_signals(self, screen: TerminalScreen, at: float) -> list[Signal]:
        """Signals in the tool output of the latest turn on screen (informational only)."""
        return self.reader.tool_output_signals(self, screen, at)

    # -- hooks -------------------------------------------------------------------------------

    def _on_stop(self, out: list[ObserverEvent], payload: dict[str, Any], at: float) -> None:
        last = str(payload.get("last_assistant_message") or "")
        transcript = payload.get("transcript_path")
        text = self._read_transcript(transcript) if isinstance(transcript, str) else None
        if text is None or not text.endswith(last.strip()):
            text = last  # no transcript, or not yet written up to this turn's final text
        self.new_turn()
        asked = self.report(out, parse_reply(text), "model_text", at)
        self.signals(out, self.monitor.scan(text.splitlines(), "model_text", at))
        if self.screen is not None:
            self.signals(out, self.tool_output_signals(self.screen, at))
        self.dialog_open = False
        if asked:
            self.set_state(out, AgentState.WAITING_INPUT, "protocol", "ASK_USER pending", at)
        else:
            self.set_state(out, AgentState.READY, "hook", "turn ended", at)

    # -- for readers -------------------------------------------------------------------------

    def report(
        self,
        out: list[ObserverEvent],
        items: list[ProtocolMessage | ProtocolError],
        source: Source,
        at: float,
    ) -> bool:
        """Protocol messages found, within the turn's budget; whether one asked the operator."""
        asked = False
        for item in items:
            self.turn_messages += 1
            if self.turn_messages > MAX_MESSAGES_PER_TURN:
                if self.turn_messages == MAX_MESSAGES_PER_TURN + 1:
                    out.append(MalformedMessage(_too_many(), source, at))
                continue
            if isinstance(item, ProtocolError):
                out.append(MalformedMessage(item, source, at))
            else:
                out.append(MessageFound(item, source, at))
                asked = asked or isinstance(item, AskUser)
        return asked

    def signals(self, out: list[ObserverEvent], signals: list[Signal]) -> None:
        """Signals found, within the turn's budget."""
        room = MAX_SIGNALS_PER_TURN - self.turn_signals
        if room > 0 and signals:
            out.extend(signals[:room])
            self.turn_signals += min(len(signals), room)

    def new_turn(self) -> None:
        """A new turn: new message and signal budgets."""
        self.turn_messages = self.turn_signals = 0

    def set_state(
        self,
        out: list[ObserverEvent],
        state: AgentState,
        source: StateSource,
        reason: str,
        at: float,
    ) -> None:
        change = self.tracker.set(state, source, reason, at)
        if change is not None:
            out.append(change)

    def _emit(self, out: list[ObserverEvent]) -> list[ObserverEvent]:
        self.events.extend(out)
        return out


class PromptScreen:
    """A program read from its screen alone: each final line is parsed for markers and scanned
    for signals, and it is ready when its prompt pattern is on the cursor row."""

    def __init__(self, prompt_pattern: str = DEFAULT_PROMPT_PATTERN) -> None:
        self._prompt = re.compile(prompt_pattern)
        self._final_lines = FinalLines()
        self._parser = MarkerParser()
        #: where the prompt ended when the agent became ready (row, column, the row up to it)
        self._prompt_end: tuple[int, int, str] | None = None
        self._typed = 0  # characters the operator typed since then

    def on_screen(
        self, observer: AgentObserver, out: list[ObserverEvent], screen: TerminalScreen, at: float
    ) -> None:
        reader = self._final_lines
        lines = reader.take(screen)
        if lines:
            texts = [line[2:] if line.startswith(_GUTTERS) else line for line in lines]
            # past the turn's budget, what the parser would find is dropped: do not parse it
            if observer.turn_messages <= MAX_MESSAGES_PER_TURN:
                items = self._parser.feed_lines(texts, reader.cut)
                if observer.report(out, items, "screen", at):
                    observer.set_state(
                        out, AgentState.WAITING_INPUT, "protocol", "ASK_USER pending", at
                    )
            if observer.turn_signals < MAX_SIGNALS_PER_TURN:
                observer.signals(out, observer.monitor.scan_each(texts, "screen", at))
        row = screen.row_line(screen.cursor.y).text
        state = observer.state
        at_prompt = state == AgentState.READY and self._draft(screen, row)
        if not at_prompt and self._prompt.search(row.rstrip()):
            at_prompt = True
            x = screen.cursor.x
            self._prompt_end = (screen.cursor.y, x, row[:x].ljust(x))  # rows come right-trimmed
            self._typed = 0
        if at_prompt and observer.state != AgentState.READY:
            # the turn is over: a block still open was never closed (an error, not pending)
            observer.report(out, self._parser.flush(), "screen", at)
        if at_prompt and observer.state in (AgentState.CREATING, AgentState.EXECUTING):
            observer.set_state(out, AgentState.READY, "screen", "prompt on screen", at)
        elif not at_prompt and observer.state == AgentState.READY:
            observer.set_state(out, AgentState.EXECUTING, "screen", "output after prompt", at)

    def _draft(self, screen: TerminalScreen, row: str) -> bool:
        """The cursor row is the ready prompt's row with what the operator typed after it. The
        prompt must be unchanged and the text after it no wider than the keys typed (a wide
        character takes two cells), so output the agent prints after its prompt is not a
        draft: an agent cannot stay ready while it writes."""
        if self._prompt_end is None:
            return False
        y, x, before = self._prompt_end
        if screen.cursor.y != y or row[:x].ljust(x) != before:
            return False
        written = max(screen.cursor.x, len(row.rstrip())) - x
        return 0 <= written <= 2 * self._typed

    def resized(self, observer: AgentObserver, screen: TerminalScreen) -> None:
        self._final_lines.resized(screen)
        if self._prompt_end is not None:
            _y, x, before = self._prompt_end
            row = screen.row_line(screen.cursor.y).text
            same = screen.cursor.x >= x and row[:x].ljust(x) == before
            self._prompt_end = (screen.cursor.y, x, before) if same else None

    def typed(self, text: str) -> None:
        self._typed = min(self._typed + len(text), 1 << 20)

    def ready_at_start(self, screen: TerminalScreen) -> bool:
        return True

    def input_holds_text(self, screen: TerminalScreen) -> bool:
        return False

    def tool_output_signals(
        self, observer: AgentObserver, screen: TerminalScreen, at: float
    ) -> list[Signal]:
        return []

    def dialog(self, rows: list[str]) -> PaneDialog | None:
        return None


def _too_many() -> ProtocolError:
    detail = (
        f"more than {MAX_MESSAGES_PER_TURN} protocol messages in one turn; the rest of the "
        "turn's messages were ignored. Send fewer messages per turn."
    )
    return ProtocolError(kind="too_many", tag="[protocol]", detail=detail)


def _no_transcript(_path: str) -> None:
    return None
