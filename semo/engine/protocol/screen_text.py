"""What an agent printed, read back from the screen line by line, once each line is final.

`FinalLines` reads agents read from the screen alone; Claude Code's own rendering is read in
semo/engine/agents/claude/screen_text.py. How it works: docs/SESSIONS.md, "Reading the screen".
"""

from __future__ import annotations

import re
from functools import lru_cache
from itertools import islice

from semo.engine.protocol.messages import MAX_PAYLOAD_BYTES
from semo.engine.terminal.screen import TerminalScreen, char_width
from semo.engine.terminal.scrollback import Line

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
