"""One agent session's protocol pipeline: hooks and screen in, messages/signals/states out.

How it works: docs/SESSIONS.md, "The observer".
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from semo.engine.protocol.messages import AskUser, ProtocolError, ProtocolMessage
from semo.engine.protocol.monitor import (
    DEFAULT_PROMPT_PATTERN,
    DEFAULT_STALE_AFTER,
    OutputMonitor,
    Signal,
    Source,
)
from semo.engine.protocol.parser import MarkerParser, parse_reply
from semo.engine.protocol.screen_text import (
    FinalLines,
    PromptIndex,
    claude_rows,
    claude_turn_text,
    latest_turn,
    latest_turn_lines,
    screen_lines,
)
from semo.engine.protocol.state import AgentState, StateChange, StateSource, StateTracker
from semo.engine.terminal.screen import TerminalScreen
from semo.engine.terminal.scrollback import Line

Profile = Literal["claude", "generic"]
EVENT_HISTORY = 2000
MAX_MESSAGES_PER_TURN = 100
"""Protocol messages (and errors) taken from one turn; past it, one `too_many` error and the
rest of the turn's markers are dropped (a marker flood must not flood the office)."""
MAX_SIGNALS_PER_TURN = 100
"""Completion/error signals reported per turn; later ones only inform and are dropped."""
#: Claude Code dialogs that wait for a person: permission prompts, auto mode's "can't check
#: actions in this session" (its safety check does not get through a local endpoint) and its
#: offer to make auto mode the default
_DIALOG = re.compile(
    r"Do you want to (proceed|make this edit|create|allow|run)"
    r"|Enter to stay in auto mode"
    r"|Yes, set auto mode as my default permission mode"
)
#: the line Claude Code (2.1.328) ends an interrupted turn with
_INTERRUPTED = re.compile(r"^\s*⎿\s+Interrupted · What should Claude do instead\?\s*$")
#: the reason of the state change when a dialog comes up (semo/engine/routing/approvals.py)
DIALOG_REASON = "a dialog waits for you"
_GUTTERS = ("● ", "  ")
_TURN_END = re.compile(r"^[✻✢✳✶✽*·] \S+ for \d")


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


class AgentObserver:
    def __init__(
        self,
        profile: Profile = "claude",
        *,
        stale_after: float = DEFAULT_STALE_AFTER,
        prompt_pattern: str = DEFAULT_PROMPT_PATTERN,
        read_transcript: Callable[[str], str | None] | None = None,
        screen: TerminalScreen | None = None,
    ) -> None:
        self.profile = profile
        self.screen = screen
        self.tracker = StateTracker()
        self.monitor = OutputMonitor(stale_after)
        self._prompt = re.compile(prompt_pattern)
        #: the turn's whole text where a Stop names it (a session's: what its hooks read)
        self._read_transcript = read_transcript or _no_transcript
        self._final_lines = FinalLines()
        self._prompts = PromptIndex()
        self._parser = MarkerParser()
        self._dialog_open = False
        self._idle_under_dialog = False
        self._hooks_seen = False
        self._session_started = False
        self._last_screen_turn: tuple[str, str] | None = None  # (prompt, text), no blanks
        #: the screen's widths since the last turn read from it, newest last
        self._widths: deque[int] = deque(maxlen=4)
        self._turn_messages = 0
        self._turn_signals = 0
        #: where the prompt ended when the agent became ready (row, column, the row up to it)
        self._prompt_end: tuple[int, int, str] | None = None
        self._typed = 0  # characters the operator typed since then
        #: the most recent events (bounded: a session can live for days)
        self.events: deque[ObserverEvent] = deque(maxlen=EVENT_HISTORY)

    @property
    def state(self) -> AgentState:
        return self.tracker.state

    # -- inputs ------------------------------------------------------------------------------

    def on_hook(self, event: str, payload: dict[str, Any], at: float) -> list[ObserverEvent]:
        out: list[ObserverEvent] = []
        self._hooks_seen = True
        self.monitor.activity(at)
        if event == "SessionStart":
            self._session_started = True
            if self.screen is None or input_box_visible(self.screen):
                self._state(out, AgentState.READY, "hook", "session started", at)
        elif event == "UserPromptSubmit":
            self._state(out, AgentState.EXECUTING, "hook", "prompt submitted", at)
        elif event == "Stop":
            self._on_stop(out, payload, at)
        elif event == "PermissionRequest":
            tool = payload.get("tool_name")
            what = tool if isinstance(tool, str) and tool.isidentifier() else "a tool"
            self._state(out, AgentState.WAITING_INPUT, "hook", f"asks to use {what}", at)
        elif event == "Notification" and payload.get("notification_type") == "permission_prompt":
            reason = str(payload.get("message") or "permission prompt")
            self._state(out, AgentState.WAITING_INPUT, "hook", reason, at)
        elif event == "SessionEnd":
            reason = f"session ended ({payload.get('reason', 'unknown')})"
            self._state(out, AgentState.TERMINATED, "hook", reason, at)
        return self._emit(out)

    def on_screen(self, screen: TerminalScreen, at: float) -> list[ObserverEvent]:
        out: list[ObserverEvent] = []
        self.monitor.activity(at)
        if self.profile == "claude":
            starting = self._session_started and self.state == AgentState.CREATING
            if starting and input_box_visible(screen):
                self._state(out, AgentState.READY, "screen", "input box after start", at)
            self._watch_dialog(out, screen, at)
            if self.state == AgentState.EXECUTING and turn_interrupted(screen.text_rows()):
                self._state(out, AgentState.READY, "screen", "turn interrupted", at)
            if not self._hooks_seen:
                self._read_claude_screen(out, screen, at)
        else:
            self._read_generic(out, screen, at)
        return self._emit(out)

    def on_exit(self, code: int | None, signal: int | None, at: float) -> list[ObserverEvent]:
        out: list[ObserverEvent] = []
        if code == 0:
            self._state(out, AgentState.TERMINATED, "process", "exited with code 0", at)
        else:
            what = f"code {code}" if code is not None else f"signal {signal}"
            self._state(out, AgentState.ERROR, "process", f"crashed ({what})", at)
            self._state(out, AgentState.TERMINATED, "process", f"process ended ({what})", at)
        return self._emit(out)

    def tick(self, now: float) -> list[ObserverEvent]:
        stale = self.monitor.check_stale(now, busy=self.tracker.busy)
        return self._emit([stale] if stale else [])

    def prompt_delivered(self) -> None:
        """semo typed a prompt: a new turn, with a new message and signal budget. Only this
        starts one for a screen-read agent (a prompt it merely prints, e.g. `$ ` after every
        line of a flood, must not reset the budget)."""
        self._new_turn()

    def typed(self, text: str) -> None:
        """The operator typed `text` into the agent. At a generic agent's prompt, what appears
        after the prompt on its row (up to this many cells) is a draft, not output."""
        self._typed = min(self._typed + len(text), 1 << 20)

    def resized(self, screen: TerminalScreen) -> None:
        """The session's screen was just resized, nothing drawn since (what was final before
        was read first). The reflow re-wrapped and moved every row: what was read stays read,
        whatever row it is on now, and a line being written stays one line."""
        if self.profile != "generic":
            # Claude Code's turns are known by their text without blanks, which a re-wrap
            # does not change; rows drawn before the resize keep the old width's breaks
            self._width(screen.columns)
            return
        self._final_lines.resized(screen)
        if self._prompt_end is not None:
            _y, x, before = self._prompt_end
            row = screen.row_line(screen.cursor.y).text
            same = screen.cursor.x >= x and row[:x].ljust(x) == before
            self._prompt_end = (screen.cursor.y, x, before) if same else None

    def permission_decided(self, at: float) -> list[ObserverEvent]:
        """A permission request was decided (by a person or a rule): the turn goes on."""
        out: list[ObserverEvent] = []
        if self.state == AgentState.WAITING_INPUT and not self._dialog_open:
            self._state(out, AgentState.EXECUTING, "hook", "permission decided", at)
        return self._emit(out)

    def answered(self, at: float) -> list[ObserverEvent]:
        """The operator answered the pending question; the answer goes in as the next prompt."""
        out: list[ObserverEvent] = []
        self._state(out, AgentState.EXECUTING, "protocol", "question answered", at)
        return self._emit(out)

    # -- claude ------------------------------------------------------------------------------

    def _on_stop(self, out: list[ObserverEvent], payload: dict[str, Any], at: float) -> None:
        last = str(payload.get("last_assistant_message") or "")
        transcript = payload.get("transcript_path")
        text = self._read_transcript(transcript) if isinstance(transcript, str) else None
        if text is None or not text.endswith(last.strip()):
            text = last  # no transcript, or not yet written up to this turn's final text
        self._new_turn()
        asked = self._report(out, parse_reply(text), "model_text", at)
        self._signals(out, self.monitor.scan(text.splitlines(), "model_text", at))
        if self.screen is not None:
            self._signals(out, self.tool_output_signals(self.screen, at))
        self._dialog_open = False
        if asked:
            self._state(out, AgentState.WAITING_INPUT, "protocol", "ASK_USER pending", at)
        else:
            self._state(out, AgentState.READY, "hook", "turn ended", at)

    def _watch_dialog(self, out: list[ObserverEvent], screen: TerminalScreen, at: float) -> None:
        row_line = screen.row_line
        bottom = "\n".join(row_line(y).text for y in range(max(0, screen.lines - 20), screen.lines))
        dialog = _DIALOG.search(bottom) is not None  # rows hold no newline: a match is in one
        if dialog and not self._dialog_open:
            self._dialog_open = True
            # a dialog over the idle prompt (an offer at start) closes back to it, not to work
            self._idle_under_dialog = self.state == AgentState.READY
            self._state(out, AgentState.WAITING_INPUT, "screen", DIALOG_REASON, at)
        elif not dialog and self._dialog_open:
            self._dialog_open = False
            if self.state == AgentState.WAITING_INPUT:
                after = AgentState.READY if self._idle_under_dialog else AgentState.EXECUTING
                self._state(out, after, "screen", "dialog answered", at)

    def _read_claude_screen(
        self, out: list[ObserverEvent], screen: TerminalScreen, at: float
    ) -> None:
        """Without hooks: when the latest turn shows its end line (`✻ Baked for 3s`), parse the
        turn's text once. A turn is known by its prompt and its text."""
        lines, input_row = latest_turn_lines(screen, self._prompts)
        if lines is None:  # no prompt submitted yet
            if input_row:
                self._state(out, AgentState.READY, "screen", "input box on screen", at)
            return
        rows = claude_rows(lines)
        prompts = [row.text for row in rows if row.kind == "prompt"]
        turn = latest_turn(rows)
        if not any(row.kind == "other" and _TURN_END.match(row.text) for row in turn):
            self._state(out, AgentState.EXECUTING, "screen", "prompt submitted", at)
            return
        self._width(screen.columns)
        text = claude_turn_text(lines, self._widths)
        key = (_squeezed(prompts[-1]), _squeezed(text))
        last = self._last_screen_turn
        if last is not None and key[1] == last[1] and _same_start(key[0], last[0]):
            return  # the same turn, re-wrapped by a resize (or drawn again at another width)
        self._last_screen_turn = key
        self._widths = deque([screen.columns], maxlen=4)  # the next turn is drawn from here
        self._new_turn()
        asked = self._report(out, parse_reply(text), "screen", at)
        self._signals(out, self.monitor.scan(text.splitlines(), "screen", at))
        self._signals(out, self.tool_output_signals(screen, at, lines))
        if asked:
            self._state(out, AgentState.WAITING_INPUT, "protocol", "ASK_USER pending", at)
        else:
            self._state(out, AgentState.READY, "screen", "turn ended", at)

    def tool_output_signals(
        self, screen: TerminalScreen, at: float, lines: list[Line] | None = None
    ) -> list[Signal]:
        """Signals in the tool output of the latest turn on screen (informational only)."""
        if lines is None:
            lines = latest_turn_lines(screen, self._prompts)[0] or screen_lines(screen)
        rows = latest_turn(claude_rows(lines))
        output = [row.text for row in rows if row.kind == "tool_output"]
        return self.monitor.scan(output, "tool_output", at)

    # -- generic -----------------------------------------------------------------------------

    def _read_generic(self, out: list[ObserverEvent], screen: TerminalScreen, at: float) -> None:
        reader = self._final_lines
        lines = reader.take(screen)
        if lines:
            texts = [line[2:] if line.startswith(_GUTTERS) else line for line in lines]
            # past the turn's budget, what the parser would find is dropped: do not parse it
            if self._turn_messages <= MAX_MESSAGES_PER_TURN:
                items = self._parser.feed_lines(texts, reader.cut)
                if self._report(out, items, "screen", at):
                    self._state(out, AgentState.WAITING_INPUT, "protocol", "ASK_USER pending", at)
            if self._turn_signals < MAX_SIGNALS_PER_TURN:
                self._signals(out, self.monitor.scan_each(texts, "screen", at))
        row = screen.row_line(screen.cursor.y).text
        at_prompt = self.state == AgentState.READY and self._draft(screen, row)
        if not at_prompt and self._prompt.search(row.rstrip()):
            at_prompt = True
            x = screen.cursor.x
            self._prompt_end = (screen.cursor.y, x, row[:x].ljust(x))  # rows come right-trimmed
            self._typed = 0
        if at_prompt and self.state != AgentState.READY:
            # the turn is over: a block still open was never closed (an error, not pending)
            self._report(out, self._parser.flush(), "screen", at)
        if at_prompt and self.state in (AgentState.CREATING, AgentState.EXECUTING):
            self._state(out, AgentState.READY, "screen", "prompt on screen", at)
        elif not at_prompt and self.state == AgentState.READY:
            self._state(out, AgentState.EXECUTING, "screen", "output after prompt", at)

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

    # -- helpers -----------------------------------------------------------------------------

    def _report(
        self,
        out: list[ObserverEvent],
        items: list[ProtocolMessage | ProtocolError],
        source: Source,
        at: float,
    ) -> bool:
        asked = False
        for item in items:
            self._turn_messages += 1
            if self._turn_messages > MAX_MESSAGES_PER_TURN:
                if self._turn_messages == MAX_MESSAGES_PER_TURN + 1:
                    out.append(MalformedMessage(_too_many(), source, at))
                continue
            if isinstance(item, ProtocolError):
                out.append(MalformedMessage(item, source, at))
            else:
                out.append(MessageFound(item, source, at))
                asked = asked or isinstance(item, AskUser)
        return asked

    def _signals(self, out: list[ObserverEvent], signals: list[Signal]) -> None:
        room = MAX_SIGNALS_PER_TURN - self._turn_signals
        if room > 0 and signals:
            out.extend(signals[:room])
            self._turn_signals += min(len(signals), room)

    def _width(self, columns: int) -> None:
        if not self._widths or self._widths[-1] != columns:
            if columns in self._widths:
                self._widths.remove(columns)
            self._widths.append(columns)

    def _new_turn(self) -> None:
        self._turn_messages = self._turn_signals = 0

    def _state(
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


_BLANKS = re.compile(r"\s+")


def _squeezed(text: str) -> str:
    """`text` without blanks: how a turn is recognised whatever width wrapped it."""
    return _BLANKS.sub("", text)


def _same_start(a: str, b: str) -> bool:
    """One prompt row begins the other: a prompt is its first row, longer at a wider screen."""
    return a.startswith(b) or b.startswith(a)


def _too_many() -> ProtocolError:
    detail = (
        f"more than {MAX_MESSAGES_PER_TURN} protocol messages in one turn; the rest of the "
        "turn's messages were ignored. Send fewer messages per turn."
    )
    return ProtocolError(kind="too_many", tag="[protocol]", detail=detail)


def input_box_visible(screen: TerminalScreen) -> bool:
    return input_box_in(screen.text_rows())


def turn_interrupted(rows: Sequence[str]) -> bool:
    """Claude Code ended its turn on an interrupt (Escape: a dialog cancelled, the operator's
    cancel), which no hook reports: the last line above its input box is "⎿  Interrupted ·
    What should Claude do instead?" (a next turn's prompt would come below it)."""
    for index, row in enumerate(rows):
        if index > 1 and row.startswith("❯") and rows[index - 1].startswith("─"):
            above = [r for r in rows[: index - 1] if r.strip()]
            return bool(above) and _INTERRUPTED.match(above[-1]) is not None
    return False


def input_box_in(rows: Sequence[str]) -> bool:
    """Claude Code's input box: a `❯` row right under a horizontal rule."""
    return any(
        row.startswith("❯") and rows[index - 1].startswith("─")
        for index, row in enumerate(rows)
        if index
    )


def _no_transcript(_path: str) -> None:
    return None
