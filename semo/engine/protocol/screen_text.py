"""What the model said, read back from the screen, for agents whose hooks cannot tell us.

How it works: docs/SESSIONS.md, "Reading the screen".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import islice
from typing import Literal

from semo.engine.protocol.messages import MAX_PAYLOAD_BYTES
from semo.engine.terminal.screen import TerminalScreen, char_width
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


_WIDE_OR_ZERO = re.compile(r"[^\x20-\x7e]+")


def text_width(text: str) -> int:
    """Terminal cells `text` takes (wide characters count two). Printable ASCII costs nothing
    per character: only the runs of other characters are measured."""
    if text.isascii() and text.isprintable():
        return len(text)
    width = len(text)
    for run in _WIDE_OR_ZERO.findall(text):
        width += sum(map(_cells, run)) - len(run)
    return width


@lru_cache(maxsize=4096)
def _cells(char: str) -> int:
    return max(char_width(char), 0)


LINE_CAP = MAX_PAYLOAD_BYTES + 1024
"""Characters kept of one logical line. A longer line is cut: any protocol payload in it is over
the 64 KiB limit whatever followed (a character is at least one byte), so the head is enough to
report it, and a flood of endless lines costs bounded memory."""


class FinalLines:
    """Reads each logical line once it is final (the cursor moved below it); rows the
    terminal auto-wrapped are joined back into the line they came from.

    What was read is remembered per screen row (its text), following the rows as they scroll
    (into scrollback, or inside a scroll region). A row above the cursor is read when its text
    differs from what was read there: new lines, a screen redrawn after `clear` or a cursor-home
    redraw with new content. A redraw of the same text is not new output and is not read again,
    nor is a row whose text was read on another row above the cursor that now shows other text
    (a redraw that moved rows, e.g. a line inserted above them; a row erased by `clear` moves
    nothing, so the same text printed again after a clear is read).
    A resize reflows the rows and the scrollback (re-wrapped, moved, pulled back from history
    or pushed into it): what was read stays read, the cursor's line stays one line (`resized`,
    told right after it; a reflow nobody told of is found by `Scrollback.rewrites`, and is
    exact only if the screen marks where it left the cursor).
    The work per call is the rows that scrolled plus the visible rows above the cursor.
    """

    def __init__(self) -> None:
        self._pushed: int | None = None  # scrollback.total_pushed when last read
        self._seen: list[str | None] = []  # per visible row: its text when it was read
        self._columns = 0
        self._rewrites = 0  # the scrollback's reflows this memory is aligned with
        self._cursor_y = 0  # the cursor row when last read
        self._parts: list[str] = []  # wrapped rows waiting for the rest of their line
        self._size = 0
        self._cut = False
        self._expect: int | None = None  # visible row that continues the waiting rows
        #: indexes (in the list the last `take` returned) of lines cut at LINE_CAP: only
        #: their head is there (the line was longer, or rows of it scrolled away unread)
        self.cut: set[int] = set()

    def take(self, screen: TerminalScreen) -> list[str]:
        """The lines that became final since the last call, in order."""
        out: list[str] = []
        self.cut = set()
        if screen.alternate:
            return out
        scrollback = screen.scrollback
        pushed, rows = scrollback.total_pushed, screen.lines
        if self._pushed is None:
            self._pushed, self._columns = pushed - len(scrollback), screen.columns
            self._rewrites = scrollback.rewrites
        elif scrollback.rewrites != self._rewrites or screen.columns != self._columns:
            self._unannounced_reflow(screen, pushed)
        seen = self._seen
        if len(seen) != rows:
            del seen[rows:]
            seen.extend([None] * (rows - len(seen)))
        self._cursor_y = screen.cursor.y
        count, self._pushed = pushed - self._pushed, pushed
        if count > 0:
            self._read_pushed(screen, count, out)
        cache: dict[int, Line] = {}
        margins = screen.margins
        if margins is not None and (margins.top > 0 or margins.bottom < rows - 1):
            self._realign(screen, margins.top, min(margins.bottom, rows - 1), cache)
        row_line = screen.row_line
        lines = [cache.get(y) or row_line(y) for y in range(min(screen.cursor.y, rows))]
        moved: set[str | None] | None = None
        for y, line in enumerate(lines):
            text = line.text
            if seen[y] == text:
                continue
            if moved is None:  # texts read on a row that now shows other text (not erased)
                moved = {seen[z] for z, row in enumerate(lines) if row.text and seen[z] != row.text}
                moved.discard("")
            seen[y] = text
            if text not in moved:  # else a row already read, moved by a redraw (lines inserted)
                self._row(screen, line, y, out)
        return out

    # -- reading rows ---------------------------------------------------------------------

    def _read_pushed(self, screen: TerminalScreen, count: int, out: list[str]) -> None:
        """Rows that scrolled into scrollback since the last call: those not read yet."""
        scrollback, seen, rows = screen.scrollback, self._seen, screen.lines
        first = max(0, count - len(scrollback))
        if self._expect is not None:
            self._expect -= count
        if first and self._parts:  # more scrolled than scrollback keeps: rows gone unread
            self._cut, self._expect = True, first - count
        # the records themselves, newest first off the deque's end: a flood pushes thousands
        # of rows per frame, and these are the observer's per-row loop
        batch = list(islice(reversed(scrollback.records()), count - first))
        batch.reverse()
        append, parts, columns = out.append, self._parts, screen.columns
        check = rows - first  # rows of `batch` that were visible at the last call
        for offset, record in enumerate(batch):
            if isinstance(record, str):
                if offset < check and seen[first + offset] == record:
                    continue
                if not parts:  # the common case: a whole line in one row
                    append(record)
                    continue
                text, wrapped = record, False
            else:
                text, wrapped = record[0], record[2]
                if offset < check and seen[first + offset] == text:
                    continue
                if not wrapped and not parts:  # a styled line in one row: as a str record
                    append(text)
                    continue
            position = first + offset - count
            if (
                wrapped
                and len(text) == columns
                and (not parts or self._expect == position)
                and self._size + columns <= LINE_CAP
                and text.isascii()
                and text.isprintable()
            ):  # `_row` for a full row of ASCII text: nothing to pad, nothing to cut
                parts.append(text)
                self._size += columns
                self._expect = position + 1
                continue
            self._row(screen, Line(text, (), wrapped), position, out)
            parts = self._parts  # `_row` may have started a new list
        del seen[: min(count, rows)]
        seen.extend([None] * (rows - len(seen)))

    def _row(self, screen: TerminalScreen, line: Line, position: int, out: list[str]) -> None:
        """Row `position` (negative: in scrollback, counted from the screen's top row)."""
        if self._parts and self._expect != position:
            self._drop_partial()  # the rest of that line was never drawn (the screen moved on)
        if line.wrapped:
            self._add(_full_row_text(screen, line.text, position + 1))
            self._expect = position + 1
            return
        if not self._parts:
            out.append(line.text)
            return
        self._add(line.text)
        if self._cut:
            self.cut.add(len(out))
        out.append("".join(self._parts))
        self._drop_partial()

    def _add(self, text: str) -> None:
        room = LINE_CAP - self._size
        if len(text) > room:
            text, self._cut = text[: max(room, 0)], True
        if text:
            self._parts.append(text)
            self._size += len(text)

    def _drop_partial(self) -> None:
        self._parts, self._size, self._cut, self._expect = [], 0, False, None

    # -- keeping the row memory aligned ---------------------------------------------------

    def _unannounced_reflow(self, screen: TerminalScreen, pushed: int) -> None:
        """A reflow nobody announced (`resized`), e.g. the primary screen re-wrapped when a
        program left the alternate screen; what was drawn since is on the screen too. With
        the screen's mark of where the cursor was right after it, exact. Without it, a guess:
        a row above the cursor still counts as read if it only lost its end to a narrower
        width; the rest is read (as before `resized` existed: a re-wrapped line may be read
        again)."""
        mark = screen.reflow_mark
        if mark is not None:
            self._rebase(screen, mark)
            return
        self._rewrites = screen.scrollback.rewrites
        if screen.columns == self._columns:
            return  # rows moved, none cut: the row memory tells moved rows from new ones
        self._pushed, self._columns = pushed, screen.columns
        self._drop_partial()
        seen = self._seen
        for y in range(min(screen.cursor.y, len(seen))):
            old, text = seen[y], screen.row_line(y).text
            if old is not None and old.startswith(text.rstrip()):
                seen[y] = text

    def resized(self, screen: TerminalScreen) -> None:
        """The screen was just resized and nothing was drawn since (every line final before
        it was read first: the session reads the screen before a resize)."""
        if self._pushed is not None and not screen.alternate:
            cursor_y = min(screen.cursor.y, screen.lines)
            self._rebase(screen, screen.scrollback.total_pushed + cursor_y, just_resized=True)

    def _rebase(self, screen: TerminalScreen, mark: int, *, just_resized: bool = False) -> None:
        """A reflow re-wrapped the rows and the scrollback and moved them: positions and row
        texts no longer say what was read. `mark` is the absolute position (total_pushed +
        row) of the row the cursor was on right after the reflow: every row above it had
        been read; that row and what follows were drawn after (the cursor row is never read
        before it is final). The rows of the cursor's line above it (re-wrapped, with what
        was its unread cursor row) wait for the rest of the line. Just after a resize, a row
        under the cursor that was read (the cursor had moved up) stays read."""
        scrollback, rows = screen.scrollback, screen.lines
        total = scrollback.total_pushed
        mark_y = min(mark - total, rows)  # negative: in scrollback, counted from the top row
        below = {text for text in self._seen[self._cursor_y + 1 :] if text}
        seen: list[str | None] = [None] * rows
        for y in range(max(mark_y, 0)):
            seen[y] = screen.row_line(y).text
        if just_resized:
            for y in range(max(mark_y, 0) + 1, rows):
                text = screen.row_line(y).text
                if text and text in below:
                    seen[y] = text
        self._seen, self._cursor_y = seen, min(screen.cursor.y, rows)
        self._pushed, self._columns = min(total, mark), screen.columns
        self._rewrites = scrollback.rewrites
        cut = self._cut and bool(self._parts)
        self._drop_partial()
        chain: list[tuple[int, str]] = []  # the mark row's line above it, (position, text)
        held = len(scrollback)
        position = mark_y - 1
        while position >= -held:
            if position >= 0:
                line = screen.row_line(position)
                text, wrapped = line.text, line.wrapped
            else:
                text, wrapped = scrollback.text_at(position)
            if not wrapped:
                break
            chain.append((position, text))
            position -= 1
        else:  # the line's start may have been evicted
            cut = cut or (bool(chain) and total > held)
        if not chain:
            return
        for position, text in reversed(chain):
            self._add(_full_row_text(screen, text, position + 1))
        self._cut = self._cut or cut
        self._expect = mark - self._pushed  # the mark row, where the line goes on

    def _realign(
        self, screen: TerminalScreen, top: int, bottom: int, cache: dict[int, Line]
    ) -> None:
        """Inside a scroll region rows move up without entering scrollback: find how far the
        region scrolled by matching what was read against what is there now."""
        seen = self._seen
        limit = min(bottom + 1, screen.cursor.y)
        if limit <= top:
            return
        for y in range(top, limit):
            cache[y] = screen.row_line(y)
        if all(seen[y] is None or seen[y] == cache[y].text for y in range(top, limit)):
            return
        for shift in range(1, bottom - top + 1):
            matched = False
            for y in range(top, min(limit, bottom + 1 - shift)):
                old = seen[y + shift]
                if old is None:
                    continue
                if old != cache[y].text:
                    break
                matched = matched or bool(old)
            else:
                if matched:
                    seen[top : bottom + 1] = [*seen[top + shift : bottom + 1], *[None] * shift]
                    if self._expect is not None and top <= self._expect <= bottom:
                        self._expect -= shift
                    return


def _full_row_text(screen: TerminalScreen, text: str, following: int) -> str:
    """A wrapped row's text with the blanks its last columns really held (they were trimmed),
    except the one cell a wide character left empty when it wrapped (`following`: the next
    row's position, negative in scrollback)."""
    missing = screen.columns - text_width(text)
    if missing == 1:
        if following < 0:
            after = screen.scrollback.text_at(following)[0]
        else:
            after = screen.row_line(following).text if following < screen.lines else ""
        if after and _cells(after[0]) == 2:
            missing = 0
    return text + " " * max(missing, 0)
