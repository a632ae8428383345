"""Claude Code's screen read back: its turns, tool output and input box, without hooks.

Claude Code draws each reply as `● ` + text with a two-space gutter on following lines, tool
calls as `● Tool(args)` with their output under `  ⎿  `, code blocks in a colour (the ``` fences
are not drawn), a submitted prompt as `❯ text` on a shaded background, and wraps long lines
itself at the terminal width. `claude_turn_text` undoes that for the latest turn: gutters and
bullets removed, tool calls and their output left out, code lines put back inside fences (so a
quoted marker is not a message), and lines the renderer wrapped joined again.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Literal

from semo.engine.protocol.screen_text import text_width
from semo.engine.terminal.screen import TerminalScreen
from semo.engine.terminal.scrollback import Line, Scrollback

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


class PromptIndex:
    """Where the scrollback's last submitted prompt and last `❯` input row are, kept up to date
    by checking only the lines pushed since the previous call: scrollback lines never change, so
    a frame costs a text check per new line, not one per line of a 10,000-line scrollback.
    Positions are absolute (`Scrollback.total_pushed` counts every line ever pushed): a line
    evicted or cleared is below the first one still held and so no longer counts."""

    def __init__(self) -> None:
        self._scrollback: Scrollback | None = None
        self._rewrites = 0  # the scrollback's reflows when last checked
        self._checked = 0  # absolute position of the first line not checked yet
        self._prompt: int | None = None  # absolute position of the newest submitted prompt
        self._input: int | None = None  # absolute position of the newest other `❯` row

    def find(self, scrollback: Scrollback) -> tuple[int | None, bool]:
        """(index in `scrollback` of its last submitted prompt or None, whether a `❯` row that
        is not a submitted prompt is held after it: only meaningful when there is no prompt)."""
        end = scrollback.total_pushed
        first = end - len(scrollback)
        if (
            scrollback is not self._scrollback
            or self._checked > end
            or scrollback.rewrites != self._rewrites  # a reflow moved and re-wrapped every line
        ):
            self._scrollback, self._checked, self._prompt, self._input = (
                scrollback,
                first,
                None,
                None,
            )
            self._rewrites = scrollback.rewrites
        new = end - max(self._checked, first)
        if new > 0:
            self._check_newest(scrollback, new, end)
        self._checked = end
        prompt = self._prompt if self._prompt is not None and self._prompt >= first else None
        if prompt is not None:
            return prompt - first, False
        return None, self._input is not None and self._input >= first

    def _check_newest(self, scrollback: Scrollback, count: int, end: int) -> None:
        """Look at the newest `count` lines (a flood pushes thousands per frame): one C-level
        search for a row that starts with `❯`, and a look at each line only if one does."""
        texts = [
            record if isinstance(record, str) else record[0]
            for record in islice(reversed(scrollback.records()), count)
        ]  # newest first
        if "\n❯" not in "\n" + "\n".join(texts):
            return
        prompt = inputs = None
        for back, text in enumerate(texts):
            if not text.startswith("❯"):
                continue
            if classify(scrollback[len(scrollback) - 1 - back], False).kind == "prompt":
                prompt = end - 1 - back if prompt is None else prompt
            elif inputs is None:
                inputs = end - 1 - back
            if prompt is not None and inputs is not None:
                break
        if prompt is not None:
            self._prompt = prompt
        if inputs is not None:
            self._input = inputs


def latest_turn_lines(
    screen: TerminalScreen, index: PromptIndex | None = None
) -> tuple[list[Line] | None, bool]:
    """The lines from the last submitted prompt row on (scrollback included), or None when no
    row is a submitted prompt; and, in that case, whether some row starts with `❯` (an input
    box that was never submitted). Rows after a prompt classify the same whatever came before
    it, so the latest turn read from these lines is the one read from `screen_lines`; finding it
    costs a text check per row back to the prompt, not the whole scrollback's style runs."""
    row_line = screen.row_line
    input_row = False
    for y in range(screen.lines - 1, -1, -1):
        if screen.row_first_char(y) == "❯":
            line = row_line(y)
            if classify(line, False).kind == "prompt":
                return [line, *(row_line(i) for i in range(y + 1, screen.lines))], False
            input_row = True
    scrollback = screen.scrollback
    at, held_input = (index or PromptIndex()).find(scrollback)
    if at is not None:
        rows = [row_line(y) for y in range(screen.lines)]
        return [*(scrollback[i] for i in range(at, len(scrollback))), *rows], False
    return None, input_row or held_input


def claude_rows(lines: list[Line]) -> list[Row]:
    rows: list[Row] = []
    in_tool_output = False
    for line in unwrapped(lines):
        row = classify(line, in_tool_output)
        in_tool_output = row.kind == "tool_output" or (in_tool_output and row.kind == "blank")
        rows.append(row)
    return rows


def unwrapped(lines: list[Line]) -> list[Line]:
    """Rows the terminal wrapped joined back into the line they came from. Claude Code breaks
    its own lines, so a terminal wrap comes from a resize narrower than the width it drew at
    (the reflow re-wraps its rows): joined, the rows read as they were drawn, whatever the
    width now. A row that starts with `❯` (a prompt, the input box) is never a continuation."""
    if not any(line.wrapped for line in lines):
        return lines
    out: list[Line] = []
    for line in lines:
        previous = out[-1] if out else None
        if previous is not None and previous.wrapped and not line.text.startswith("❯"):
            shift = len(previous.text)
            runs = [run._replace(start=run.start + shift, end=run.end + shift) for run in line.runs]
            out[-1] = Line(previous.text + line.text, (*previous.runs, *runs), line.wrapped)
        else:
            out.append(line)
    return out


def latest_turn(rows: list[Row]) -> list[Row]:
    """Rows after the last submitted prompt (the whole screen if none is visible)."""
    for index in range(len(rows) - 1, -1, -1):
        if rows[index].kind == "prompt":
            return rows[index + 1 :]
    return rows


def claude_turn_text(lines: list[Line], columns: int | Sequence[int]) -> str:
    """The model's text in the latest turn, ready for the marker parser. `columns`: the width
    the renderer drew at, or every width the screen had while it drew (after a resize, rows
    drawn before it keep the old width's breaks)."""
    widths = (columns,) if isinstance(columns, int) else tuple(columns)
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
        if previous is not None and _soft_wrapped(previous, row, widths):
            out[-1] += " " + row.text
        else:
            out.append(row.text)
        previous = row if row.kind != "blank" else None
    if fenced:
        out.append("```")
    return "\n".join(out)


def _soft_wrapped(previous: Row, row: Row, widths: Sequence[int]) -> bool:
    """The renderer wraps at word boundaries: a break counts as soft when the next word could
    not have fitted on the previous row (2-column bullet/gutter + text, in cells) at one of
    the widths it may have drawn at (a row wider than a width was not drawn at it). A row
    that starts with a protocol tag is never a continuation: tags start lines."""
    if row.kind != previous.kind or row.kind == "blank" or not row.text:
        return False
    if _TAG_START.match(row.text):
        return False
    used = 2 + text_width(previous.text)
    needed = used + 1 + text_width(row.text.split(" ", 1)[0])
    return any(used <= width < needed for width in widths)
