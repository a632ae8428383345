"""What the model said, read back from the screen, for agents whose hooks cannot tell us.

Claude Code draws each reply as `● ` + text with a two-space gutter on following lines, tool
calls as `● Tool(args)` with their output under `  ⎿  `, code blocks in a colour (the ``` fences
are not drawn), a submitted prompt as `❯ text` on a shaded background, and wraps long lines
itself at the terminal width. `claude_turn_text` undoes that for the latest turn: gutters and
bullets removed, tool calls and their output left out, code lines put back inside fences (so a
quoted marker is not a message), and lines the renderer wrapped joined again.

`FinalLines` serves plain (non-Claude) agents: it yields each line once, when the cursor has
moved below it or it scrolled into scrollback, so redraws of the current line are never re-read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from engine.terminal.screen import TerminalScreen, char_width
from engine.terminal.scrollback import Line

RowKind = Literal["blank", "prompt", "bullet", "tool", "tool_output", "prose", "styled", "other"]
_TOOL_CALL = re.compile(r"^[A-Z][A-Za-z0-9_.:-]*\(.*\)?$")
_TAG_START = re.compile(r"\s*\[/?(ASK_USER|INVOKE|DELIVER_RESULT|STEP_COMPLETE|SEMO:DONE)\b")


@dataclass(frozen=True)
class Row:
    kind: RowKind
    text: str  # without bullet or gutter


def _all_coloured(line: Line, start: int) -> bool:
    """Every visible cell from `start` has a non-default colour: code (Claude Code draws code
    blocks, highlighted or not, in colour) or UI chrome, never the model's prose."""
    visible = [run for run in line.runs if line.text[max(run.start, start) : run.end].strip()]
    return bool(visible) and all(run.style.fg != "default" for run in visible)


def classify(line: Line, in_tool_output: bool) -> Row:
    text = line.text.rstrip()
    if not text.strip():
        return Row("blank", "")
    if text.startswith("❯") and any(r.style.bg != "default" for r in line.runs):
        return Row("prompt", text[1:].strip())
    if text.startswith("●"):
        body = text[1:].strip()
        return Row("tool" if _TOOL_CALL.match(body) else "bullet", body)
    if text.startswith("  ⎿"):
        return Row("tool_output", text[3:].strip())
    if in_tool_output and text.startswith("     "):
        return Row("tool_output", text.strip())
    if text.startswith("  "):
        return Row("styled" if _all_coloured(line, 2) else "prose", text[2:])
    return Row("other", text)


def screen_lines(screen: TerminalScreen) -> list[Line]:
    """Scrollback then visible rows, as compact lines."""
    return [*screen.scrollback, *(screen.row_line(y) for y in range(screen.lines))]


def claude_rows(lines: list[Line]) -> list[Row]:
    rows: list[Row] = []
    in_tool_output = False
    for line in lines:
        row = classify(line, in_tool_output)
        in_tool_output = row.kind == "tool_output" or (in_tool_output and row.kind == "blank")
        rows.append(row)
    return rows


def latest_turn(rows: list[Row]) -> list[Row]:
    """Rows after the last submitted prompt (the whole screen if none is visible)."""
    for index in range(len(rows) - 1, -1, -1):
        if rows[index].kind == "prompt":
            return rows[index + 1 :]
    return rows


def claude_turn_text(lines: list[Line], columns: int) -> str:
    """The model's text in the latest turn, ready for the marker parser."""
    out: list[str] = []
    in_reply = False
    fenced = False
    previous: Row | None = None
    for row in latest_turn(claude_rows(lines)):
        if row.kind == "bullet":
            in_reply = True
        elif row.kind in ("tool", "tool_output", "other"):
            in_reply = False
        if not in_reply or row.kind not in ("bullet", "prose", "styled", "blank"):
            previous = None
            continue
        code = row.kind == "styled"
        if code != fenced:
            out.append("```")
            fenced = code
        if previous is not None and _soft_wrapped(previous, row, columns):
            out[-1] += " " + row.text
        else:
            out.append(row.text)
        previous = row if row.kind != "blank" else None
    if fenced:
        out.append("```")
    return "\n".join(out)


def _soft_wrapped(previous: Row, row: Row, columns: int) -> bool:
    """The renderer wraps at word boundaries: a break counts as soft when the next word could
    not have fitted on the previous row (2-column bullet/gutter + text, in cells). A row that
    starts with a protocol tag is never a continuation: tags start lines."""
    if row.kind != previous.kind or row.kind == "blank" or not row.text:
        return False
    if _TAG_START.match(row.text):
        return False
    next_word = row.text.split(" ", 1)[0]
    return 2 + text_width(previous.text) + 1 + text_width(next_word) > columns


def text_width(text: str) -> int:
    """Terminal cells `text` takes (wide characters count two)."""
    return sum(max(char_width(char), 0) for char in text)


class FinalLines:
    """Yields each logical line once it is final (the cursor moved below it); rows the
    terminal auto-wrapped are joined back into the line they came from."""

    def __init__(self) -> None:
        self._next = 0  # absolute index (scrollback lines ever pushed + row) of the next row
        self._partial = ""  # text of wrapped rows waiting for the rest of their line

    def take(self, screen: TerminalScreen) -> Iterator[str]:
        if screen.alternate:
            return
        pushed = screen.scrollback.total_pushed
        self._next = max(self._next, pushed - len(screen.scrollback))
        while self._next < pushed + screen.cursor.y:
            line = self._line(screen, self._next - pushed)
            self._next += 1
            if line.wrapped:
                self._partial += self._full_row_text(screen, line, self._next - pushed)
                continue
            text, self._partial = self._partial + line.text, ""
            yield text

    @staticmethod
    def _line(screen: TerminalScreen, index: int) -> Line:
        return screen.scrollback[index] if index < 0 else screen.row_line(index)

    def _full_row_text(self, screen: TerminalScreen, line: Line, next_index: int) -> str:
        """A wrapped row's text with the blanks its last columns really held (they were
        trimmed), except the one cell a wide character left empty when it wrapped."""
        missing = screen.columns - text_width(line.text)
        if missing == 1 and next_index < screen.lines:
            following = self._line(screen, next_index).text
            if following and char_width(following[0]) == 2:
                missing = 0
        return line.text + " " * max(missing, 0)
