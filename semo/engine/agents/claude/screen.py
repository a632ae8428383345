"""Claude Code's screen as its sessions' observer reads it: dialogs, the input box, turns.

Hooks say most things; the screen adds what no hook says in time: a dialog that waits for a
person (waiting_input until it goes), the input box after start (ready), tool output lines of a
turn (signals that inform but do not decide). Before any hook has come (a CLI started without
semo's hooks, a replay), a turn is read from the screen once its end line (`✻ Baked for 3s`)
is drawn.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Sequence

from semo.engine.agents.claude.dialogs import ScreenDialog, read_dialog
from semo.engine.agents.claude.screen_text import (
    PromptIndex,
    claude_rows,
    claude_turn_text,
    latest_turn,
    latest_turn_lines,
    screen_lines,
)
from semo.engine.protocol.monitor import Signal
from semo.engine.protocol.observer import DIALOG_REASON, AgentObserver, ObserverEvent
from semo.engine.protocol.parser import parse_reply
from semo.engine.protocol.state import AgentState
from semo.engine.terminal.screen import TerminalScreen
from semo.engine.terminal.scrollback import Line

__all__ = ["ClaudeScreen", "input_box_in", "input_box_visible", "turn_interrupted"]

#: Claude Code dialogs that wait for a person: permission prompts, auto mode's "can't check
#: actions in this session" (its safety check does not get through a local endpoint) and its
#: offer to make auto mode the default
_DIALOG = re.compile(
    r"Do you want to (proceed|make this edit|create|allow|run)"
    r"|Enter to stay in auto mode"
    r"|Yes, set auto mode as my default permission mode"
)
_TURN_END = re.compile(r"^[✻✢✳✶✽*·] \S+ for \d")
#: the line Claude Code (2.1.328) ends an interrupted turn with
_INTERRUPTED = re.compile(r"^\s*⎿\s+Interrupted · What should Claude do instead\?\s*$")
_BLANKS = re.compile(r"\s+")


class ClaudeScreen:
    """One Claude Code session's screen reader (semo.engine.protocol.observer.ScreenReader)."""

    def __init__(self) -> None:
        self._prompts = PromptIndex()
        self._last_screen_turn: tuple[str, str] | None = None  # (prompt, text), no blanks
        #: the screen's widths since the last turn read from it, newest last
        self._widths: deque[int] = deque(maxlen=4)
        #: the dialog on screen came up over the idle prompt (an offer at start)
        self._idle_under_dialog = False

    def on_screen(
        self, observer: AgentObserver, out: list[ObserverEvent], screen: TerminalScreen, at: float
    ) -> None:
        starting = observer.session_started and observer.state == AgentState.CREATING
        if starting and input_box_visible(screen):
            observer.set_state(out, AgentState.READY, "screen", "input box after start", at)
        self._watch_dialog(observer, out, screen, at)
        if observer.state == AgentState.EXECUTING and turn_interrupted(screen.text_rows()):
            observer.set_state(out, AgentState.READY, "screen", "turn interrupted", at)
        if not observer.hooks_seen:
            self._read_turn(observer, out, screen, at)

    def resized(self, observer: AgentObserver, screen: TerminalScreen) -> None:
        # Claude Code's turns are known by their text without blanks, which a re-wrap does not
        # change; rows drawn before the resize keep the old width's breaks
        self._width(screen.columns)

    def typed(self, text: str) -> None:
        return None

    def ready_at_start(self, screen: TerminalScreen) -> bool:
        return input_box_visible(screen)

    def input_holds_text(self, screen: TerminalScreen) -> bool:
        """Whether the input box (the `❯` row under a rule) holds typed or pasted text."""
        rows = screen.text_rows()
        return any(
            row.startswith("❯") and rows[index - 1].startswith("─") and row[1:].strip(" \xa0")
            for index, row in enumerate(rows)
            if index
        )

    def tool_output_signals(
        self,
        observer: AgentObserver,
        screen: TerminalScreen,
        at: float,
        lines: list[Line] | None = None,
    ) -> list[Signal]:
        if lines is None:
            lines = latest_turn_lines(screen, self._prompts)[0] or screen_lines(screen)
        rows = latest_turn(claude_rows(lines))
        output = [row.text for row in rows if row.kind == "tool_output"]
        return observer.monitor.scan(output, "tool_output", at)

    def dialog(self, rows: list[str]) -> ScreenDialog | None:
        return read_dialog(rows)

    def _watch_dialog(
        self, observer: AgentObserver, out: list[ObserverEvent], screen: TerminalScreen, at: float
    ) -> None:
        row_line = screen.row_line
        bottom = "\n".join(row_line(y).text for y in range(max(0, screen.lines - 20), screen.lines))
        dialog = _DIALOG.search(bottom) is not None  # rows hold no newline: a match is in one
        if dialog and not observer.dialog_open:
            observer.dialog_open = True
            # a dialog over the idle prompt (an offer at start) closes back to it, not to work
            self._idle_under_dialog = observer.state == AgentState.READY
            observer.set_state(out, AgentState.WAITING_INPUT, "screen", DIALOG_REASON, at)
        elif not dialog and observer.dialog_open:
            observer.dialog_open = False
            if observer.state == AgentState.WAITING_INPUT:
                after = AgentState.READY if self._idle_under_dialog else AgentState.EXECUTING
                observer.set_state(out, after, "screen", "dialog answered", at)

    def _read_turn(
        self, observer: AgentObserver, out: list[ObserverEvent], screen: TerminalScreen, at: float
    ) -> None:
        """Without hooks: when the latest turn shows its end line (`✻ Baked for 3s`), parse the
        turn's text once. A turn is known by its prompt and its text."""
        lines, input_row = latest_turn_lines(screen, self._prompts)
        if lines is None:  # no prompt submitted yet
            if input_row:
                observer.set_state(out, AgentState.READY, "screen", "input box on screen", at)
            return
        rows = claude_rows(lines)
        prompts = [row.text for row in rows if row.kind == "prompt"]
        turn = latest_turn(rows)
        if not any(row.kind == "other" and _TURN_END.match(row.text) for row in turn):
            observer.set_state(out, AgentState.EXECUTING, "screen", "prompt submitted", at)
            return
        self._width(screen.columns)
        text = claude_turn_text(lines, self._widths)
        key = (_squeezed(prompts[-1]), _squeezed(text))
        last = self._last_screen_turn
        if last is not None and key[1] == last[1] and _same_start(key[0], last[0]):
            return  # the same turn, re-wrapped by a resize (or drawn again at another width)
        self._last_screen_turn = key
        self._widths = deque([screen.columns], maxlen=4)  # the next turn is drawn from here
        observer.new_turn()
        asked = observer.report(out, parse_reply(text), "screen", at)
        observer.signals(out, observer.monitor.scan(text.splitlines(), "screen", at))
        observer.signals(out, self.tool_output_signals(observer, screen, at, lines))
        if asked:
            observer.set_state(out, AgentState.WAITING_INPUT, "protocol", "ASK_USER pending", at)
        else:
            observer.set_state(out, AgentState.READY, "screen", "turn ended", at)

    def _width(self, columns: int) -> None:
        if not self._widths or self._widths[-1] != columns:
            if columns in self._widths:
                self._widths.remove(columns)
            self._widths.append(columns)


def _squeezed(text: str) -> str:
    """`text` without blanks: how a turn is recognised whatever width wrapped it."""
    return _BLANKS.sub("", text)


def _same_start(a: str, b: str) -> bool:
    """One prompt row begins the other: a prompt is its first row, longer at a wider screen."""
    return a.startswith(b) or b.startswith(a)


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
