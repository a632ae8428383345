"""The VT screen: a pyte `Screen` subclass with what Claude Code and common TUIs need.

Added or fixed over pyte 0.8: alternate screen buffers (47/1047/1049), answers to DSR/DA
queries, a bounded compact scrollback, ZWJ / VS16 / wide-character handling as tmux 3.3 does it,
colon-form SGR and `dim`, DEC special graphics in UTF-8 mode, tracked modes (bracketed paste,
cursor keys, mouse, focus, synchronized output), `CSI S`/`CSI T` scrolling, and a fast path for
plain ASCII text. The byte parser lives in `semo.engine.terminal.stream`.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import chain, repeat
from typing import Any

import pyte
from pyte import charsets, modes
from pyte.screens import Margins, Savepoint, StaticDefaultDict

from semo.engine.terminal.cell import BLANK, Cell
from semo.engine.terminal.reflow import reflow, row_cells
from semo.engine.terminal.scrollback import (
    DEFAULT_SCROLLBACK_LINES,
    Line,
    Scrollback,
    WrappedSegments,
    is_wrapped,
    line_from_row,
    line_from_segments,
)
from semo.engine.terminal.sgr import apply_sgr
from semo.engine.terminal.width import _REGIONAL_INDICATORS, ZWJ, char_width, clusters

__all__ = ["ZWJ", "_REGIONAL_INDICATORS", "char_width"]

_HAS_REGIONAL_INDICATOR = re.compile("[\U0001f1e6-\U0001f1ff]").search
# width -> byte for run splitting: 1 and 2 are runs of their own, everything else (zero-width,
# joiners, controls) takes the per-character path
_WIDTH_BYTE = {1: 1, 2: 2}
_width_byte = _WIDTH_BYTE.get
_RUNS = re.compile(rb"\x01+|\x02+|[^\x01\x02]+")


# Private (DEC) mode numbers, as the stream passes them (unshifted).
CURSOR_KEYS = 1
MOUSE_X10, MOUSE_NORMAL, MOUSE_BUTTON, MOUSE_ANY = 9, 1000, 1002, 1003
MOUSE_UTF8, MOUSE_SGR, MOUSE_URXVT = 1005, 1006, 1015
FOCUS_EVENTS = 1004
ALT_SCREEN_47, ALT_SCREEN_1047, ALT_SCREEN_1049 = 47, 1047, 1049
SAVE_CURSOR_1048 = 1048
BRACKETED_PASTE = 2004
SYNCHRONIZED_OUTPUT = 2026
_MOUSE_TRACKING = (MOUSE_X10, MOUSE_NORMAL, MOUSE_BUTTON, MOUSE_ANY)
_MOUSE_ENCODING = (MOUSE_UTF8, MOUSE_SGR, MOUSE_URXVT)
_DECTCEM_PRIVATE = modes.DECTCEM >> 5
# private modes that take more than a flag (screen switches, cursor saves, pyte's DECCOLM,
# DECSCNM, DECOM): `set_flag_modes` must not be given these
NOT_FLAG_MODES = frozenset(
    {3, 5, 6, ALT_SCREEN_47, ALT_SCREEN_1047, SAVE_CURSOR_1048, ALT_SCREEN_1049}
)
_IGNORED_PRIVATE = {3}  # DECCOLM: never resize to 132 columns behind the operator's back
_DEC_GRAPHICS = {"0": charsets.VT100_MAP}
_DECAWM = modes.DECAWM
_IRM = modes.IRM

# Bounds on state that output drives (an agent is untrusted: it must not grow us without end).
MAX_NOTIFICATIONS = 64  # newest kept
MAX_KITTY_FLAGS = 16  # kitty's own stack limit; pushing onto a full stack drops the oldest
MAX_SAVEPOINTS = 16  # ESC 7 / CSI s: older saved cursors are forgotten
MAX_CELL_CHARS = 32  # combining characters on one cell past this are dropped
MAX_KEPT_WRITES = 64  # draws kept back for one row; one more applies them


class CellCursor(pyte.screens.Cursor):
    """pyte's cursor carrying semo's `Cell` as its attributes (pyte's `Char` has no `dim`)."""

    __slots__ = ()
    # pyte's Screen is not generic over its cell type: a Cell stands in for its Char
    attrs: Cell  # type: ignore[assignment]

    def __init__(self, x: int, y: int, attrs: Cell = BLANK) -> None:
        self.x = x
        self.y = y
        self.attrs = attrs
        self.hidden = False


@dataclass
class _SavedScreen:
    buffer: dict[int, StaticDefaultDict[int, Cell]]
    cursor: CellCursor
    attrs: Cell
    with_cursor: bool
    size: tuple[int, int] = (0, 0)  # (lines, columns) of the primary screen when saved


@dataclass
class TerminalModes:
    """Modes a child program switched on; the console and key encoder read these."""

    private: set[int] = field(default_factory=set)

    def __contains__(self, mode: int) -> bool:
        return mode in self.private

    @property
    def bracketed_paste(self) -> bool:
        return BRACKETED_PASTE in self.private

    @property
    def application_cursor_keys(self) -> bool:
        return CURSOR_KEYS in self.private

    @property
    def focus_events(self) -> bool:
        return FOCUS_EVENTS in self.private

    @property
    def synchronized_output(self) -> bool:
        return SYNCHRONIZED_OUTPUT in self.private

    @property
    def mouse_tracking(self) -> int | None:
        """The highest mouse tracking mode on (9, 1000, 1002 or 1003), or None."""
        on = [m for m in _MOUSE_TRACKING if m in self.private]
        return max(on) if on else None

    @property
    def mouse_encoding(self) -> int | None:
        on = [m for m in _MOUSE_ENCODING if m in self.private]
        return max(on) if on else None


class _CellsCache(dict[str, tuple[Cell | None, ...]]):
    """char -> the cells it takes with one attribute set: (glyph,) when narrow, (glyph, pad)
    when wide, (None,) when it needs the per-character path (zero width, joiners)."""

    def __init__(self, attrs: Cell) -> None:
        super().__init__()
        self.attrs = attrs
        self.pad = attrs._replace(data="")

    def __missing__(self, char: str) -> tuple[Cell | None, ...]:
        if len(self) >= 4096:
            self.clear()
        width = char_width(char[0])  # a cluster keeps its base's width
        cells: tuple[Cell | None, ...] = (None,)
        if width == 1:
            cells = (self.attrs._replace(data=char),)
        elif width == 2:
            cells = (self.attrs._replace(data=char), self.pad)
        self[char] = cells
        return cells


_JOINING = 1 << 20


class _CellWidths(dict[str, int]):
    """char -> cells (1 or 2); characters for the per-character path (zero width, joiners)
    count as far more than any row, so a sum over a text says at once whether it can fit."""

    def __missing__(self, char: str) -> int:
        if len(self) >= 8192:
            self.clear()
        width = char_width(char)
        self[char] = width = width if width in (1, 2) else _JOINING
        return width


_cell_widths = _CellWidths()


class _GlyphCache(dict[str, Cell]):
    """char -> Cell for one attribute set, so drawing ASCII reuses immutable cells; `steps`:
    SGR (parameters and `m`) -> the attributes it leads to from these, and their cache."""

    def __init__(self, attrs: Cell) -> None:
        super().__init__()
        self.attrs = attrs
        self.cells = _CellsCache(attrs)
        self.steps: dict[str, tuple[Cell, _GlyphCache]] = {}

    def __missing__(self, char: str) -> Cell:
        if len(self) >= 4096:
            self.clear()
        cell = self[char] = self.attrs._replace(data=char)
        return cell


# A text part of the stream (text with SGRs, CR, CR LF and the cursor motions CHA, CUF, CUD in
# it: what Ink and Claude Code send between their rows' text) cut for `draw_styled`: text,
# separator, text, ..., text; the separators whole (in a text part nothing else follows ESC [
# or CR: the looser pattern cuts the same, faster)
STYLED_SPLIT = re.compile(r"(\x1b\[[0-9;:]*+[mGCB]|\r\n?+)")
MAX_STEPS = 64  # SGRs remembered from one attribute set


def _offset(parts: list[str], index: int) -> int:
    """Where parts[index] starts in the text `STYLED_SPLIT` cut into `parts`."""
    return sum(map(len, parts[:index]))


# A draw kept back: (x, stop, glyph cache, ASCII text) or (x, stop, cells cache, text); an erase
# kept back with them: (start, stop, _ERASE, attributes)
_Write = tuple[int, int, Any, Any]
# A row after a wrapped one that holds only default blanks, read for a reflow: tmux counts the
# cells written there (cellused), so its line goes on through that row (a prompt's trailing
# blank that wrapped); an empty row would end it (see reflow). One blank stands for them.
_WRITTEN_BLANK = Line(" ")
_ERASE = object()


class TerminalScreen(pyte.Screen):
    """A pyte Screen that renders what tmux renders for the programs semo runs."""

    cursor: CellCursor

    def __init__(
        self,
        columns: int,
        lines: int,
        *,
        scrollback: int = DEFAULT_SCROLLBACK_LINES,
        respond: Callable[[str], None] | None = None,
    ) -> None:
        self._default = BLANK
        self.scrollback = Scrollback(scrollback)
        self.respond = respond
        self.modes = TerminalModes()
        self.bells = 0
        self.cursor_style = 0
        self.keypad_application = False
        self.modify_other_keys = 0
        self.kitty_keyboard_flags: list[int] = []
        self.cwd: str | None = None
        self.notifications: deque[str] = deque(maxlen=MAX_NOTIFICATIONS)
        self._saved_screen: _SavedScreen | None = None
        self.deferred_rows: dict[int, list[tuple[Cell, str]]] = {}
        #: the absolute row (total_pushed + y) the cursor was on right after the latest reflow,
        #: None before one: readers of final lines (semo.engine.protocol.screen_text.FinalLines)
        #: count what is above it as read
        self.reflow_mark: int | None = None
        self._glyphs = _GlyphCache(BLANK)
        self._glyph_caches: dict[Cell, _GlyphCache] = {}
        self._pads: dict[Cell, Cell] = {}  # attrs -> the right half of a wide char with them
        self._interned: dict[Cell, Cell] = {BLANK: BLANK}
        self._sgr_cache: dict[tuple[int, str], tuple[Cell, Cell]] = {}
        self._writes: dict[int, list[_Write]] = {}
        super().__init__(columns, lines)

    # -- basics -----------------------------------------------------------------------------

    @property  # type: ignore[override]  # rows of Cell, not pyte's Char (see CellCursor)
    def buffer(self) -> dict[int, StaticDefaultDict[int, Cell]]:
        """Rows of cells. Rows the plain-output batch left as segments become cells on access,
        and draws kept back (`_writes`) are applied."""
        if self.deferred_rows:
            self._materialize_deferred()
        if self._writes:
            self._apply_writes()
        return self._buffer

    @buffer.setter
    def buffer(self, value: dict[int, StaticDefaultDict[int, Cell]]) -> None:
        self._buffer = value

    def _materialize_deferred(self) -> None:
        default = self._default
        for y, segments in self.deferred_rows.items():
            row: StaticDefaultDict[int, Cell] = StaticDefaultDict(default)
            x = 0
            for attrs, text in segments:
                glyph = self.glyphs_for(attrs).__getitem__
                row.update(zip(range(x, x + len(text)), map(glyph, text), strict=True))
                x += len(text)
            if is_wrapped(segments):
                row.wrapped = True  # type: ignore[attr-defined]  # a mark pyte's row type lacks
            self._buffer[y] = row
        self.deferred_rows = {}

    def _apply_writes(self) -> None:
        for y, writes in self._writes.items():
            self._apply_row_writes(self._buffer[y], writes)
        self._writes = {}

    def _apply_row_writes(self, line: StaticDefaultDict[int, Cell], writes: list[_Write]) -> None:
        """Replay a row's kept-back draws in order, as `draw` would have made them at once."""
        for x, stop, glyphs, payload in writes:
            if glyphs is _ERASE:
                blank: Cell = payload
                line.update(dict.fromkeys(range(x, stop), blank))
                continue
            self._split_wide_ends(line, x, stop)
            if type(glyphs) is _CellsCache:
                # draw keeps back only text of width 1 and 2 cells: no None (per-character)
                wide = chain.from_iterable(map(glyphs.__getitem__, payload))
                line.update(zip(range(x, stop), wide, strict=True))  # type: ignore[arg-type]
            else:
                line.update(zip(range(x, stop), map(glyphs.__getitem__, payload), strict=True))

    def _keep(self, y: int, write: _Write) -> None:
        """Keep a draw (or erase) of row y back. Writes that cover the row from column 0 to the
        margin one after the other make the row's earlier writes irrelevant (each write's own
        wide-character splitting lands inside the cover), so those are dropped unapplied."""
        writes = self._writes.get(y)
        if writes is None:
            if self.deferred_rows:
                self._materialize_deferred()
            self._writes[y] = [write]
            return
        if len(writes) >= MAX_KEPT_WRITES:  # nobody read the row for long: apply it
            self._row(y)
            self._writes[y] = [write]
            return
        writes.append(write)
        if write[1] == self.columns:
            start, index = write[0], len(writes) - 1
            while start and index:
                index -= 1
                if writes[index][1] != start:
                    return
                start = writes[index][0]
            if not start and index:
                del writes[:index]

    def _keep_many(self, y: int, new: list[_Write]) -> None:
        """`_keep` each of `new` (draws that follow one another on row y) in one call."""
        writes = self._writes.get(y)
        if writes is None:
            if self.deferred_rows:
                self._materialize_deferred()
            self._writes[y] = new
        elif len(writes) + len(new) > MAX_KEPT_WRITES:  # nobody read the row for long
            self._row(y)
            self._writes[y] = new
        else:
            writes += new
            new = writes
        if new[-1][1] == self.columns:  # covered from column 0: the earlier writes go
            start, index = new[-1][0], len(new) - 1
            while start and index:
                index -= 1
                if new[index][1] != start:
                    return
                start = new[index][0]
            if not start and index:
                del new[:index]

    def _row(self, y: int) -> StaticDefaultDict[int, Cell]:
        """Row y of the buffer, with its kept-back draws applied (cheaper than `buffer[y]`)."""
        if self.deferred_rows:
            return self.buffer[y]
        writes = self._writes.pop(y, None) if self._writes else None
        line = self._buffer[y]
        if writes is not None:
            self._apply_row_writes(line, writes)
        return line

    @property
    def default_char(self) -> Cell:  # type: ignore[override]  # Cell for Char (see CellCursor)
        return self._default

    def reset(self) -> None:
        self.deferred_rows = {}
        self._writes = {}
        self._default = BLANK
        super().reset()
        self.cursor = CellCursor(0, 0, BLANK)
        self._pending_zwj = False
        self.last_graphic = ""
        # translation tables as pyte has them: 256 characters, one per code point
        self._charset_map: str | None = None
        self._designated: dict[int, str | None] = {0: None, 1: None}
        if hasattr(self, "modes"):
            self.modes.private.clear()
            self._saved_screen = None

    @property
    def alternate(self) -> bool:
        """True while the alternate screen (47/1047/1049) is active."""
        return self._saved_screen is not None

    def keeps_scrollback(self) -> bool:
        """Rows scrolled off the top are kept (primary screen, limit > 0)."""
        return self._saved_screen is None and self.scrollback.limit > 0

    def plain_text_ok(self) -> bool:
        """ASCII text draws as itself: no DEC graphics charset, no pending joiner."""
        return self._charset_map is None and not self._pending_zwj

    def soft_reset(self) -> None:
        """DECSTR: modes, margins, attributes and charsets back to defaults; text stays."""
        self.modes.private.difference_update({CURSOR_KEYS, BRACKETED_PASTE, SYNCHRONIZED_OUTPUT})
        self.mode.discard(modes.IRM)
        self.mode.discard(modes.DECOM)
        self.mode.add(modes.DECAWM)
        self.cursor.hidden = False
        self.margins = None
        self.cursor.attrs = self._default
        self._designated = {0: None, 1: None}
        self.charset = 0
        self._select_charset()

    def write_process_input(self, data: str) -> None:
        if self.respond is not None:
            self.respond(data)

    def bell(self, *args: Any) -> None:
        self.bells += 1

    def push_kitty_flags(self, flags: int) -> None:
        """CSI > flags u: push onto the kitty keyboard stack (bounded, oldest dropped)."""
        stack = self.kitty_keyboard_flags
        stack.append(flags)
        if len(stack) > MAX_KITTY_FLAGS:
            del stack[:-MAX_KITTY_FLAGS]

    def pop_kitty_flags(self, count: int) -> None:
        del self.kitty_keyboard_flags[-count:]

    def save_cursor(self) -> None:
        """pyte's, with the cursor copied field by field (not `copy.copy`)."""
        cursor = self.cursor
        saved = CellCursor(cursor.x, cursor.y, cursor.attrs)
        saved.hidden = cursor.hidden
        mode = self.mode
        self.savepoints.append(
            Savepoint(
                saved,
                self.g0_charset,
                self.g1_charset,
                self.charset,
                modes.DECOM in mode,
                _DECAWM in mode,
            )
        )
        if len(self.savepoints) > MAX_SAVEPOINTS:
            del self.savepoints[:-MAX_SAVEPOINTS]

    # -- modes ------------------------------------------------------------------------------

    def set_mode(self, *modes_: int, **kwargs: Any) -> None:
        if not kwargs.get("private"):
            super().set_mode(*modes_)
            return
        wanted = [m for m in modes_ if m not in _IGNORED_PRIVATE]
        for mode in wanted:
            if mode in (ALT_SCREEN_47, ALT_SCREEN_1047, ALT_SCREEN_1049):
                self._enter_alternate(with_cursor=mode == ALT_SCREEN_1049)
            elif mode == SAVE_CURSOR_1048:
                self.save_cursor()
            else:
                self.modes.private.add(mode)
        super().set_mode(*wanted, private=True)

    def set_flag_modes(self, modes_: tuple[int, ...]) -> None:
        """`CSI ? Pm h` for private modes that are flags only (not in `NOT_FLAG_MODES`): what
        `set_mode(*modes_, private=True)` does for them, without its lists."""
        self.modes.private.update(modes_)
        self.mode.update([mode << 5 for mode in modes_])
        if _DECTCEM_PRIVATE in modes_:
            self.cursor.hidden = False

    def reset_flag_modes(self, modes_: tuple[int, ...]) -> None:
        """`CSI ? Pm l` for flag-only private modes, as `set_flag_modes`."""
        self.modes.private.difference_update(modes_)
        self.mode.difference_update([mode << 5 for mode in modes_])
        if _DECTCEM_PRIVATE in modes_:
            self.cursor.hidden = True

    def reset_mode(self, *modes_: int, **kwargs: Any) -> None:
        if not kwargs.get("private"):
            super().reset_mode(*modes_)
            return
        wanted = [m for m in modes_ if m not in _IGNORED_PRIVATE]
        for mode in wanted:
            if mode in (ALT_SCREEN_47, ALT_SCREEN_1047, ALT_SCREEN_1049):
                self._leave_alternate(with_cursor=mode == ALT_SCREEN_1049)
            elif mode == SAVE_CURSOR_1048:
                self.restore_cursor()
            else:
                self.modes.private.discard(mode)
        super().reset_mode(*wanted, private=True)

    def _enter_alternate(self, *, with_cursor: bool) -> None:
        """Save the primary screen and show a clear one (tmux's screen_alternate_on)."""
        if self._saved_screen is not None:
            return
        cursor = CellCursor(self.cursor.x, self.cursor.y, self.cursor.attrs)
        cursor.hidden = self.cursor.hidden
        self._saved_screen = _SavedScreen(
            dict(self.buffer), cursor, self.cursor.attrs, with_cursor, (self.lines, self.columns)
        )
        self.buffer.clear()
        self.scrollback.unwrap_last(self._default)  # tmux clears the screen's rows whole
        self.dirty.update(range(self.lines))

    def _leave_alternate(self, *, with_cursor: bool) -> None:
        saved = self._saved_screen
        if saved is None:
            return
        self._saved_screen = None
        self._writes = {}  # the alternate screen's kept-back draws: discarded unseen with it
        self.deferred_rows = {}
        self._buffer.clear()
        size = (self.lines, self.columns)
        if saved.size != (0, 0) and saved.size != size:
            # resized meanwhile: back to the primary's size, then reflowed to the current
            # one with its scrollback (tmux's screen_alternate_off)
            self.lines, self.columns = saved.size
            self.cursor.x = min(self.cursor.x, self.columns)
            self.cursor.y = min(self.cursor.y, self.lines - 1)
        for y, row in saved.buffer.items():
            if y < self.lines:
                self.buffer[y] = row
        if with_cursor:
            self.cursor.x = min(saved.cursor.x, self.columns)
            self.cursor.y = min(saved.cursor.y, self.lines - 1)
            self.cursor.attrs = saved.attrs
        if (self.lines, self.columns) != size:
            self.resize(*size)
        self.cursor.x = min(self.cursor.x, self.columns - 1)
        self.dirty.update(range(self.lines))

    # -- character sets ----------------------------------------------------------------------

    def define_charset(self, code: str, mode: str) -> None:
        slot = 0 if mode == "(" else 1
        self._designated[slot] = _DEC_GRAPHICS.get(code)
        self._select_charset()

    def shift_in(self) -> None:
        self.charset = 0
        self._select_charset()

    def shift_out(self) -> None:
        self.charset = 1
        self._select_charset()

    def _select_charset(self) -> None:
        self._charset_map = self._designated[self.charset]

    # -- drawing ----------------------------------------------------------------------------

    def draw(self, data: str) -> None:
        if self._charset_map is not None:
            data = data.translate(self._charset_map)
        if not data:
            return
        self.last_graphic = data[-1]
        cursor = self.cursor
        mode = self.mode
        if self._pending_zwj or _IRM in mode:
            self._draw_unicode(data)
        elif _DECAWM not in mode:
            self._draw_ascii(data) if data.isascii() else self._draw_unicode(data)
        else:
            # the common case inline: text that fits on the cursor's row, autowrap on
            x = cursor.x
            attrs = cursor.attrs
            glyphs = self._glyphs
            if glyphs.attrs is not attrs:
                glyphs = self.glyphs_for(attrs)
            cache: _GlyphCache | _CellsCache = glyphs
            chars: str | list[str] = data  # one string per cell (clusters) after a cut
            if data.isascii():
                stop = x + len(data)
                if stop > self.columns:
                    self._draw_ascii(data)
                    self.dirty.add(cursor.y)
                    return
            else:
                if len(data) > self.columns - x:  # at least a cell each: it cannot fit
                    self._draw_split(data)
                    self.dirty.add(cursor.y)
                    return
                stop = x + sum(map(_cell_widths.__getitem__, data))
                if stop > self.columns:  # too wide, or zero-width characters and joiners
                    cut = clusters(data) if stop >= _JOINING else None
                    if cut is None or x + cut[1] > self.columns:
                        self._draw_split(data)
                        self.dirty.add(cursor.y)
                        return
                    # joined emoji, VS16, combining marks: one string per cell, kept back too
                    chars, stop = cut[0], x + cut[1]
                cache = glyphs.cells
            # Kept back until the row is read or touched otherwise: a TUI redrawing the same
            # rows (Ink erases and rewrites its whole frame) pays for cells only once per read.
            self._keep(cursor.y, (x, stop, cache, chars))
            cursor.x = stop
        self.dirty.add(cursor.y)

    def draw_styled(self, parts: list[str], bottom: int = -1) -> int:
        """A text part as `STYLED_SPLIT` cuts it (text, separator, text, ..., text), applied as
        `draw`, `sgr`, `carriage_return`, `crlf`, `cursor_to_column`, `cursor_forward` and
        `cursor_down` one by one would; stops at a CR or CR LF met with the cursor on row
        `bottom` (where the plain-output batch may take over) and returns its offset in the
        text, else 0. While the pieces fit on the cursor's row they are kept back together
        (one `_keep` per row, SGRs from a table of steps); from the first piece that does not
        fit, or when the row needs the general drawing (no autowrap, insert mode, a joiner
        pending, DEC graphics), the rest goes call by call."""
        mode = self.mode
        if self._charset_map is not None or self._pending_zwj or _IRM in mode:
            return self._draw_styled_calls(parts, 0, bottom)
        if _DECAWM not in mode:
            return self._draw_styled_calls(parts, 0, bottom)
        cursor = self.cursor
        x = cursor.x
        columns = self.columns
        attrs = cursor.attrs
        glyphs = self._glyphs
        if glyphs.attrs is not attrs:
            glyphs = self.glyphs_for(attrs)
        widths = _cell_widths.__getitem__
        last_row = self.lines - 1 if self.margins is None else -1  # a CR LF above it: y + 1
        writes: list[_Write] = []
        last = ""
        count = len(parts)
        index = 0
        while True:
            text = parts[index]
            if text:
                if text.isascii():
                    stop = x + len(text)
                    if stop > columns:
                        break
                    writes.append((x, stop, glyphs, text))
                else:
                    if len(text) > columns - x:
                        break
                    stop = x + sum(map(widths, text))
                    if stop > columns:
                        cut = clusters(text) if stop >= _JOINING else None
                        if cut is None or x + cut[1] > columns:
                            break
                        stop = x + cut[1]
                        writes.append((x, stop, glyphs.cells, cut[0]))
                    else:
                        writes.append((x, stop, glyphs.cells, text))
                x = stop
                last = text
            index += 1
            if index == count:
                break
            key = parts[index]
            if key[-1] == "m":
                step = glyphs.steps.get(key)
                if step is None:
                    step = self._step(glyphs, attrs, key)
                attrs, glyphs = step
            elif key[0] == "\r" or key[-1] == "B":  # the cursor leaves the row: its writes go
                y = cursor.y
                if writes:
                    kept = self._writes  # (not kept in a local: applying them replaces it)
                    if y in kept or writes[-1][1] == columns or self.deferred_rows:
                        self._keep_many(y, writes)
                    else:  # (what _keep_many does then)
                        kept[y] = writes
                    self.last_graphic = last[-1]
                    self.dirty.add(y)
                    writes = []
                if key == "\r\n":
                    if y < last_row and y != bottom:  # (crlf without margins or scrolling)
                        cursor.y = y + 1
                        x = 0
                        index += 1
                        continue
                    if y == bottom:
                        cursor.x = x
                        cursor.attrs = attrs
                        return _offset(parts, index)
                    self.crlf()
                elif key == "\r":
                    if y == bottom:
                        cursor.x = x
                        cursor.attrs = attrs
                        return _offset(parts, index)
                    cursor.x = 0
                else:  # CUD
                    cursor.x = x
                    self.cursor_down(int(key[2:-1] or 1))
                x = cursor.x
            elif key[-1] == "G":  # CHA, on the same row (0 counts as 1)
                x = min(max(0, (int(key[2:-1] or 0) or 1) - 1), columns - 1)
            else:  # CUF, on the same row
                x = min(max(0, x + (int(key[2:-1] or 0) or 1)), columns - 1)
            index += 1
        cursor.attrs = attrs
        cursor.x = x
        if writes:
            self._keep_many(cursor.y, writes)
            self.last_graphic = last[-1]
            self.dirty.add(cursor.y)
        if index < count:
            return self._draw_styled_calls(parts, index, bottom)
        return 0

    def _step(self, glyphs: _GlyphCache, attrs: Cell, key: str) -> tuple[Cell, _GlyphCache]:
        """`draw_styled`'s table of steps, kept in the glyph cache of the attributes they
        start from: SGR `key` -> the attributes after, their glyph cache."""
        cursor = self.cursor
        saved = cursor.attrs
        cursor.attrs = attrs
        self.sgr(key[2:-1])
        after = cursor.attrs
        cursor.attrs = saved
        steps = glyphs.steps
        if len(steps) >= MAX_STEPS:
            steps.clear()
        step = steps[key] = (after, self.glyphs_for(after))
        return step

    def _draw_styled_calls(self, parts: list[str], index: int, bottom: int) -> int:
        """`draw_styled` from parts[index] (a text) on, call by call."""
        for position in range(index, len(parts)):
            part = parts[position]
            if not position % 2:
                if part:
                    self.draw(part)
                continue
            final = part[-1]
            if final == "m":
                self.sgr(part[2:-1])
            elif final == "G":
                self.cursor_to_column(int(part[2:-1] or 0))
            elif final == "C":
                self.cursor_forward(int(part[2:-1] or 0))
            elif final == "B":
                self.cursor_down(int(part[2:-1] or 0))
            elif self.cursor.y == bottom:
                return _offset(parts, position)
            elif final == "\n":
                self.crlf()
            else:
                self.carriage_return()
        return 0

    def _draw_split(self, data: str) -> None:
        """Non-ASCII text that does not fit on the row or needs the per-character path, run by
        run: runs of narrow characters take the ASCII path, runs of wide ones `_draw_wide`,
        and only zero-width characters and joiners go character by character."""
        if _HAS_REGIONAL_INDICATOR(data):
            self._draw_unicode(data)
            return
        kinds = bytes(map(_width_byte, map(char_width, data), repeat(0)))
        if kinds.count(1) == len(kinds):
            self._draw_ascii(data)
            return
        for run in _RUNS.finditer(kinds):
            text = data[run.start() : run.end()]
            if self._pending_zwj:
                self._draw_unicode(text)
            elif kinds[run.start()] == 1:
                self._draw_ascii(text)
            elif kinds[run.start()] == 2:
                self._draw_wide(text)
            else:
                self._draw_unicode(text)

    def _draw_wide(self, data: str) -> None:
        """A run of double-width characters with autowrap on: as `_put` one by one, a row at a
        time (cells alternate glyph and padding)."""
        cursor, columns = self.cursor, self.columns
        attrs = cursor.attrs
        glyph = self.glyphs_for(attrs).__getitem__
        pad = self._pads.get(attrs)
        if pad is None:
            if len(self._pads) > 256:
                self._pads.clear()
            pad = self._pads[attrs] = attrs._replace(data="")
        pos, end = 0, len(data)
        while pos < end:
            x = cursor.x
            fit = (columns - x) // 2
            if fit <= 0:
                self._put(data[pos], 2)  # wraps first (tmux's rules for the last column)
                pos += 1
                continue
            chunk = data[pos : pos + fit]
            count = len(chunk)
            stop = x + 2 * count
            cells: list[Cell] = [pad] * (2 * count)
            cells[0::2] = map(glyph, chunk)
            line = self._row(cursor.y)
            self._split_wide_at(line, x)
            self._split_wide_at(line, stop)
            line.update(zip(range(x, stop), cells, strict=True))
            cursor.x = stop
            pos += count

    def glyphs_for(self, attrs: Cell) -> _GlyphCache:
        """A char -> Cell cache for `attrs`; equal attrs share one cache."""
        if self._glyphs.attrs is attrs:
            return self._glyphs
        glyphs = self._glyph_caches.get(attrs)
        if glyphs is None:
            if len(self._glyph_caches) > 256:
                self._forget_glyphs()
            glyphs = self._glyph_caches[attrs] = _GlyphCache(attrs)
        self._glyphs = glyphs
        return glyphs

    def _forget_glyphs(self) -> None:
        """Empty the glyph caches' table, and their steps (which point at other caches: what
        the table drops is then unreachable but for kept-back writes, so memory stays bounded
        however many attribute sets a program goes through)."""
        for glyphs in self._glyph_caches.values():
            glyphs.steps.clear()
        self._glyphs.steps.clear()
        self._glyph_caches.clear()

    def _draw_ascii(self, data: str) -> None:
        cursor = self.cursor
        columns = self.columns
        glyph = self.glyphs_for(cursor.attrs).__getitem__
        if _DECAWM not in self.mode:
            self._draw_ascii_no_wrap(data, glyph)
            return
        x = cursor.x
        stop = x + len(data)
        if stop <= columns:  # the common case: it fits on the row
            line = self._row(cursor.y)
            self._split_wide_ends(line, x, stop)
            line.update(zip(range(x, stop), map(glyph, data), strict=True))
            cursor.x = stop
            return
        pos, end = 0, len(data)
        while pos < end:
            if cursor.x >= columns:
                self._wrap_line()
            x = cursor.x
            chunk = data[pos : pos + columns - x]
            stop = x + len(chunk)
            line = self._row(cursor.y)
            self._split_wide_at(line, x)
            self._split_wide_at(line, stop)
            line.update(zip(range(x, stop), map(glyph, chunk), strict=True))
            cursor.x = stop
            pos += len(chunk)

    def _draw_ascii_no_wrap(self, data: str, glyph: Callable[[str], Cell]) -> None:
        """Autowrap off (tmux): text past the margin overwrites the last column; from a pending
        wrap position (x == columns) nothing is drawn."""
        cursor, columns = self.cursor, self.columns
        x = cursor.x
        if x >= columns:
            return
        room = columns - x
        if len(data) >= room:
            data = data[: room - 1] + data[-1]
        line = self._row(cursor.y)
        stop = x + len(data)
        self._split_wide_at(line, x)
        self._split_wide_at(line, stop)
        line.update(zip(range(x, stop), map(glyph, data), strict=True))
        cursor.x = min(stop, columns - 1)

    def _wrap_line(self) -> None:
        """Auto-wrap: mark the row as continued, then CR + LF."""
        row = self._row(self.cursor.y)
        row.wrapped = True  # type: ignore[attr-defined]  # a mark pyte's row type lacks
        self.dirty.add(self.cursor.y)
        self.cursor.x = 0
        self.linefeed()

    def _split_wide_ends(self, line: StaticDefaultDict[int, Cell], x: int, stop: int) -> None:
        """Writing cells [x, stop) cuts the wide characters straddling either end: blank their
        other halves (`_split_wide_at`, called only where a right half lies)."""
        cell = line.get(x)
        if cell is not None and not cell.data:
            self._split_wide_at(line, x)
        cell = line.get(stop)
        if cell is not None and not cell.data:
            self._split_wide_at(line, stop)

    def _split_wide_at(self, line: StaticDefaultDict[int, Cell], x: int) -> None:
        """Writing at column x cuts a wide character straddling x-1|x: blank its other half."""
        cell = line.get(x)
        if cell is not None and cell.data == "" and x > 0:
            line[x - 1] = line[x - 1]._replace(data=" ")
            line[x] = cell._replace(data=" ")

    def _draw_unicode(self, data: str) -> None:
        for char in data:
            if char == ZWJ:
                self._pending_zwj = True
                continue
            width = char_width(char)
            if self._pending_zwj:
                self._pending_zwj = False
                if width != 1:  # joined onto the previous cell, or dropped at column 0 (tmux)
                    self._combine(ZWJ + char)
                    continue
            if width <= 0:
                if width == 0:
                    self._combine(char)
                continue
            self._put(char, width)

    def _combine(self, addition: str) -> bool:
        """Append zero-width text to the cell left of the cursor (tmux's screen_write_combine)."""
        x, line = self.cursor.x, self._row(self.cursor.y)
        while x > 0:
            x -= 1
            cell = line[x]
            if cell.data != "":
                if len(cell.data) + len(addition) <= MAX_CELL_CHARS:
                    line[x] = cell._replace(data=cell.data + addition)
                return True
        return False

    def _put(self, char: str, width: int) -> None:
        cursor, columns = self.cursor, self.columns
        autowrap = modes.DECAWM in self.mode
        if cursor.x > columns - width:
            if not autowrap:
                return  # tmux drops what does not fit when not wrapping
            if cursor.x < columns:  # a wide char that does not fit leaves the last cell as is
                self._split_wide_at(self._row(cursor.y), cursor.x)
            self._wrap_line()
        if modes.IRM in self.mode:
            self.insert_characters(width)
        line = self._row(cursor.y)
        x = cursor.x
        self._split_wide_at(line, x)
        self._split_wide_at(line, x + width)
        attrs = cursor.attrs
        line[x] = attrs._replace(data=char)
        if width == 2:
            line[x + 1] = attrs._replace(data="")
        last = 0 if autowrap else 1  # without autowrap the cursor sticks on the last column
        cursor.x = x + width if x <= columns - last - width else columns - last

    # -- scrolling and scrollback -------------------------------------------------------------

    def index(self) -> None:
        top, bottom = self.margins or Margins(0, self.lines - 1)
        if self.cursor.y != bottom:
            self.cursor_down()
            return
        self._scroll_up(top, bottom, 1)

    def _scroll_up(self, top: int, bottom: int, count: int) -> None:
        buffer = self.buffer
        count = min(count, bottom - top + 1)
        keeps = self.keeps_scrollback()
        if keeps and top == 0 and bottom == self.lines - 1:
            default = self._default
            self.scrollback.extend(
                [line_from_row(buffer.get(y, {}), self.columns, default) for y in range(count)]
            )
        for y in range(top, bottom + 1 - count):
            row = buffer.pop(y + count, None)
            if row is None:
                buffer.pop(y, None)
            else:
                buffer[y] = row
        for y in range(bottom + 1 - count, bottom + 1):
            buffer.pop(y, None)
        self.dirty.update(range(top, bottom + 1))
        if not keeps:
            # tmux without a history (the alternate screen) moves the lines (grid_move_lines):
            # the row above the region loses its wrap flag (it also takes it off the row that
            # moved to the top of a region of two rows; not here, nor in the plain-output batch)
            self._unwrap_above(top)

    def scroll_up(self, count: int | None = None) -> None:
        """CSI Ps S: scroll the region up; lines leaving the top of the screen enter scrollback."""
        top, bottom = self.margins or Margins(0, self.lines - 1)
        self._scroll_up(top, bottom, max(count or 1, 1))

    def scroll_down(self, count: int | None = None) -> None:
        """CSI Ps T: scroll the region down, blank lines at the top."""
        top, bottom = self.margins or Margins(0, self.lines - 1)
        count = min(max(count or 1, 1), bottom - top + 1)
        buffer = self.buffer
        for y in range(bottom, top - 1 + count, -1):
            row = buffer.pop(y - count, None)
            if row is None:
                buffer.pop(y, None)
            else:
                buffer[y] = row
        for y in range(top, top + count):
            buffer.pop(y, None)
        self.dirty.update(range(top, bottom + 1))
        # tmux's grid_move_lines: the region's top row loses its wrap flag before it moves
        # down, and the row above the region loses its own
        if top + count <= bottom:
            self._unwrap(top + count)
        self._unwrap_above(top)

    def reverse_index(self) -> None:
        """RI: at the top margin, the region scrolls down as `CSI T` does."""
        margins = self.margins
        if self.cursor.y == (margins.top if margins is not None else 0):
            self.scroll_down(1)
        else:
            self.cursor_up()

    def insert_lines(self, count: int | None = None) -> None:
        """pyte's, with tmux's wrap flags (grid_view_insert_lines_region): the row above the
        cursor loses its flag, and so does the row `count - 1` below the cursor, which tmux
        clears before moving it down by `count`, and (see below) the row `count` above the
        region's bottom."""
        margins = self.margins
        top, bottom = margins if margins is not None else (0, self.lines - 1)
        y = self.cursor.y
        super().insert_lines(count)
        if top <= y <= bottom:
            count = min(max(count or 1, 1), bottom - y + 1)
            if y + 2 * count - 1 <= bottom:
                self._unwrap(y + 2 * count - 1)
            if count < bottom + 1 - y - count:
                # more rows moved than were inserted: the count of tmux's grid_clear after the
                # move underflows; it clears no row but takes the flag off the row above the
                # one it would have started at
                self._unwrap(bottom - count)
            self._unwrap_above(y)

    def delete_lines(self, count: int | None = None) -> None:
        """CSI Ps M: delete lines at the cursor; the rows below move up, blank rows come in at
        the bottom of the region. pyte leaves a row in place when the row that should replace
        it is blank (missing from the buffer)."""
        top, bottom = self.margins or Margins(0, self.lines - 1)
        y0 = self.cursor.y
        if not top <= y0 <= bottom:
            return
        count = min(max(count or 1, 1), bottom - y0 + 1)
        buffer = self.buffer
        for y in range(y0, bottom + 1):
            row = buffer.pop(y + count, None) if y + count <= bottom else None
            if row is None:
                buffer.pop(y, None)
            else:
                buffer[y] = row
        self.dirty.update(range(y0, self.lines))
        self.carriage_return()
        # tmux's wrap flags (grid_view_delete_lines_region): the row above the cursor loses
        # its flag, and so does the last row moved up (by grid_move_lines when as many rows
        # moved as were deleted, else by the grid_clear after it, whose count underflows when
        # more moved: it clears no row but still the flag above)
        moved = bottom + 1 - y0 - count
        if moved:
            self._unwrap(y0 + moved - 1)
        self._unwrap_above(y0)

    def erase_in_line(self, how: int = 0, private: bool = False) -> None:
        cursor = self.cursor
        columns = self.columns
        y = cursor.y
        self.dirty.add(y)
        if how == 0:
            start, stop = cursor.x, columns
        elif how == 1:
            start, stop = 0, min(cursor.x + 1, columns)
        elif how == 2:
            start, stop = 0, columns
        else:
            return  # tmux ignores other modes
        attrs = cursor.attrs
        if start == 0 and stop == columns:  # the whole row: tmux's screen_write_clearline
            kept = self._writes.pop(y, None) if self._writes else None  # erased unseen
            buffer = self.buffer if self.deferred_rows else self._buffer
            if attrs is self._default:
                if buffer.pop(y, None) or kept:  # a missing row reads as default blanks
                    self._unwrap_above(y)
                # else never written (tmux's cellsize 0): tmux leaves it and the row above
                return
            row = buffer[y]
            row.__dict__.pop("wrapped", None)
            self._unwrap_above(y)
        elif start >= stop:
            return
        elif y in self._writes:
            self._keep(y, (start, stop, _ERASE, attrs))  # kept back with the row's draws
            return
        else:
            row = self._row(y)
            if not row and attrs is self._default:
                return  # never written: tmux leaves it as it is (its cellsize stays 0)
        row.update(dict.fromkeys(range(start, stop), attrs))

    def _unwrap_above(self, y: int) -> None:
        """tmux's grid_clear_lines and grid_move_lines take the wrap flag off the row above the
        rows they clear or move: here row y - 1, or above row 0 the newest scrollback line
        (tmux counts rows from the top of its history, on the alternate screen too)."""
        if y:
            self._unwrap(y - 1)
        else:
            self.scrollback.unwrap_last(self._default)

    def _unwrap(self, y: int) -> None:
        """Row y no longer continues on the next row."""
        deferred = self.deferred_rows
        if deferred and y in deferred:
            if isinstance(deferred[y], WrappedSegments):
                deferred[y] = list(deferred[y])
            return
        row = self._buffer.get(y)
        if row is not None:
            row.__dict__.pop("wrapped", None)

    def erase_characters(self, count: int | None = None) -> None:
        """ECH. From column 0 over the whole row it is tmux's whole-row clear (grid_clear_lines):
        the row and the row above lose their wrap flags."""
        cursor = self.cursor
        if cursor.x == 0 and (count or 1) >= self.columns:
            self._unwrap(cursor.y)
            self._unwrap_above(cursor.y)
        super().erase_characters(count)

    def erase_rows_up(self, count: int) -> None:
        """`CSI 2K CSI 1A` repeated `count` times (Ink erases its previous frame so) in one call."""
        cursor = self.cursor
        if self.margins is not None or cursor.attrs is not self._default or self.deferred_rows:
            for _ in range(count):
                self.erase_in_line(2)
                self.cursor_up(1)
            return
        y = cursor.y
        rows = range(y, max(y - count, -1), -1)
        writes, buffer = self._writes, self._buffer
        for row_y in rows:
            kept = writes.pop(row_y, None)  # draws kept back for the row: erased unseen
            if buffer.pop(row_y, None) or kept:  # a missing row reads as default blanks
                self._unwrap_above(row_y)  # as erase_in_line (a row never written: nothing)
        self.dirty.update(rows)
        cursor.y = max(y - count, 0)

    def erase_in_display(self, how: int = 0, *args: Any, **kwargs: Any) -> None:
        """pyte's, with erased rows' wrap flags cleared, rows dropped when the attributes are
        the default (cheaper than a row of blanks, read the same), and unknown modes ignored
        as tmux does (pyte raised on them)."""
        if how == 3:  # xterm: erase saved lines only
            self.scrollback.clear()
            return
        if how not in (0, 1, 2):
            return
        y, x = self.cursor.y, self.cursor.x
        columns = self.columns
        # the cursor's row too when it is cleared whole: ED 0 from column 0, ED 1 from the
        # last column (or past it)
        whole = x == 0 if how == 0 else x >= columns - 1
        if how == 0:
            rows = range(y if whole else y + 1, self.lines)
        elif how == 1:
            rows = range(y + 1 if whole else y)
        else:
            rows = range(self.lines)
        self.dirty.update(rows)
        if rows:
            # tmux clears them with grid_clear_lines (a row never written too, where EL skips
            # it), which takes the wrap flag off the row above the first: for ED 1 and ED 2
            # the newest scrollback line (before ED 2 tmux scrolls the screen into its
            # history, scroll-on-clear; semo does not)
            if rows.start:
                self._unwrap(rows.start - 1)
            else:
                self.scrollback.unwrap_last(self._default)
        attrs = self.cursor.attrs
        if attrs is self._default and self._writes:
            for row_y in rows:  # erased unseen (with other attributes, pyte colours the
                self._writes.pop(row_y, None)  # cells a row has: the draws must be applied)
        buffer = self.buffer
        if attrs is self._default:
            for row_y in rows:
                buffer.pop(row_y, None)
        else:
            for row_y in rows:
                row = buffer[row_y]
                row.update(dict.fromkeys(row, attrs))  # pyte colours only the cells a row has
                row.__dict__.pop("wrapped", None)
            if how != 2 and whole:
                buffer[y].update(dict.fromkeys(range(columns), attrs))  # as EL colours it
        if how != 2 and not whole:
            self.erase_in_line(how)

    # -- cursor motion: pyte's rules, without its Margins tuples and bounds calls ------------

    def carriage_return(self) -> None:
        self.cursor.x = 0

    def cursor_up(self, count: int | None = None) -> None:
        margins = self.margins
        cursor = self.cursor
        cursor.y = max(cursor.y - (count or 1), margins.top if margins is not None else 0)

    def cursor_down(self, count: int | None = None) -> None:
        margins = self.margins
        cursor = self.cursor
        bottom = margins.bottom if margins is not None else self.lines - 1
        cursor.y = min(cursor.y + (count or 1), bottom)

    def cursor_back(self, count: int | None = None) -> None:
        cursor = self.cursor
        x = cursor.x
        if x == self.columns:  # from the pending-wrap position
            x -= 1
        cursor.x = min(max(0, x - (count or 1)), self.columns - 1)

    def cursor_forward(self, count: int | None = None) -> None:
        cursor = self.cursor
        cursor.x = min(max(0, cursor.x + (count or 1)), self.columns - 1)

    def cursor_to_column(self, column: int | None = None) -> None:
        self.cursor.x = min(max(0, (column or 1) - 1), self.columns - 1)

    def cursor_to_line(self, line: int | None = None) -> None:
        """VPA; under DECOM the line counts from the top margin (pyte asserted margins there:
        with none set, the region is the whole screen)."""
        y = (line or 1) - 1
        margins = self.margins
        if margins is not None and modes.DECOM in self.mode:
            y += margins.top
            top, bottom = margins
        else:
            top, bottom = 0, self.lines - 1
        self.cursor.y = min(max(top, y), bottom)

    def cursor_position(self, line: int | None = None, column: int | None = None) -> None:
        column = (column or 1) - 1
        line = (line or 1) - 1
        margins = self.margins
        cursor = self.cursor
        if margins is not None and modes.DECOM in self.mode:
            line += margins.top
            if not margins.top <= line <= margins.bottom:
                return  # outside the region in origin mode: the cursor stays
            top, bottom = margins
        else:
            top, bottom = 0, self.lines - 1
        cursor.x = min(max(0, column), self.columns - 1)
        cursor.y = min(max(top, line), bottom)

    def linefeed(self) -> None:
        self.index()
        if modes.LNM in self.mode:
            self.cursor.x = 0

    def crlf(self) -> None:
        """CR then LF, in one call."""
        cursor = self.cursor
        cursor.x = 0
        margins = self.margins
        if margins is None:
            bottom = self.lines - 1
            if cursor.y != bottom:
                cursor.y = min(cursor.y + 1, bottom)
            else:
                self._scroll_up(0, bottom, 1)
        elif cursor.y != margins.bottom:
            cursor.y = min(cursor.y + 1, margins.bottom)
        else:
            self._scroll_up(margins.top, margins.bottom, 1)

    # -- attributes and queries ---------------------------------------------------------------

    def select_graphic_rendition(self, *attrs: int, params: str | None = None) -> None:
        self.sgr(";".join(str(a) for a in attrs) if params is None else params)

    def sgr(self, params: str) -> None:
        """CSI params m, from its raw parameter string; cached by (attributes, parameters)."""
        cursor = self.cursor
        attrs = cursor.attrs
        key = (id(attrs), params)
        cached = self._sgr_cache.get(key)
        if cached is not None and cached[0] is attrs:
            cursor.attrs = cached[1]
            return
        if len(self._sgr_cache) > 4096:
            self._sgr_cache.clear()
            self._interned = {BLANK: BLANK}
            self._forget_glyphs()  # the steps give attributes interned before
        result = apply_sgr(attrs, params, self._default)
        result = self._interned.setdefault(result, result)  # equal attrs -> one object
        self._sgr_cache[key] = (attrs, result)
        self.cursor.attrs = result

    def report_device_attributes(self, mode: int = 0, **kwargs: Any) -> None:
        if mode != 0:
            return
        if kwargs.get("secondary"):
            self.write_process_input("\x1b[>84;0;0c")
        elif not kwargs.get("private"):
            self.write_process_input("\x1b[?1;2c")

    def report_device_status(self, mode: int, **kwargs: Any) -> None:
        if mode == 6 and kwargs.get("private"):
            self.write_process_input(f"\x1b[?{self.cursor.y + 1};{self.cursor.x + 1}R")
        elif mode == 6:  # pyte asserts margins under DECOM; without any, the region is the screen
            y = self.cursor.y + 1
            if modes.DECOM in self.mode and self.margins is not None:
                y -= self.margins.top
            self.write_process_input(f"\x1b[{y};{self.cursor.x + 1}R")
        elif not kwargs.get("private"):
            super().report_device_status(mode)

    def report_mode(self, mode: int, *, private: bool) -> None:
        """DECRQM: 1 = set, 2 = reset, 0 = not recognised."""
        if private:
            known = mode in self.modes.private or (mode << 5) in self.mode
            state = 1 if known else 2
            if mode in (ALT_SCREEN_47, ALT_SCREEN_1047, ALT_SCREEN_1049):
                state = 1 if self.alternate else 2
            self.write_process_input(f"\x1b[?{mode};{state}$y")
        else:
            self.write_process_input(f"\x1b[{mode};{1 if mode in self.mode else 2}$y")

    # -- resize -------------------------------------------------------------------------------

    def resize(self, lines: int | None = None, columns: int | None = None) -> None:
        """Resize. The primary screen is reflowed with its scrollback as tmux does it
        (`semo.engine.terminal.reflow`); the alternate screen is cut or padded (its program redraws
        on SIGWINCH) and the saved primary is reflowed when the program leaves it."""
        lines = lines or self.lines
        columns = columns or self.columns
        if (lines, columns) == (self.lines, self.columns):
            return
        if self._saved_screen is None:
            self._reflow_to(lines, columns)
        else:
            self._cut_to(lines, columns)
        old_columns = self.columns
        self.lines, self.columns = lines, columns
        kept = {stop for stop in self.tabstops if stop < columns}
        self.tabstops = kept | set(range((old_columns // 8 + 1) * 8, columns, 8))
        self.margins = None
        self.dirty.update(range(lines))

    def _reflow_to(self, lines: int, columns: int) -> None:
        self.buffer  # noqa: B018  (applies what the drawing paths hold back: rows are read whole)
        scrollback, cursor = self.scrollback, self.cursor
        rows = [self.row_line(y) for y in range(self.lines)]
        above = bool(len(scrollback)) and scrollback.text_at(-1)[1]
        for y in range(self.lines):
            if not rows[y].text and above and self._buffer.get(y):
                rows[y] = _WRITTEN_BLANK
            above = rows[y].wrapped
        result = reflow(
            scrollback.records(),
            rows,
            cursor=(cursor.x, cursor.y),
            old_size=(self.columns, self.lines),
            new_size=(columns, lines),
            keep_history=self.keeps_scrollback(),
            scrolled=scrollback.scrolled,
            cursor_cells=self._cells_in_use(cursor.y),
            blank=self._default,
        )
        # the cursor row keeps its absolute position (total_pushed + row): readers of new output
        scrollback.replace(
            result.history,
            total_pushed=scrollback.total_pushed + cursor.y - result.cursor_y,
            scrolled=result.scrolled,
        )
        self.deferred_rows = {}
        buffer = self._buffer
        buffer.clear()
        for y, line in enumerate(result.rows):
            if line.text or line.wrapped:
                row = buffer[y]
                row.update(row_cells(line, self._default))
                if line.wrapped:
                    row.wrapped = True  # type: ignore[attr-defined]  # a mark pyte's row type lacks
        cursor.x, cursor.y = result.cursor_x, result.cursor_y
        self.reflow_mark = scrollback.total_pushed + cursor.y
        row = buffer[cursor.y]
        for x in range(max(row) + 1 if row else 0, min(cursor.x, columns)):
            row[x] = self._default  # the blanks before the cursor stay written (a prompt's)

    def _cells_in_use(self, y: int) -> int:
        """Row y's last cell that holds something written (or erased), plus one."""
        segments = self.deferred_rows.get(y)
        if segments is not None:
            return sum(len(text) for _style, text in segments)
        row = self._buffer.get(y)
        return max(row) + 1 if row else 0

    def _cut_to(self, lines: int, columns: int) -> None:
        """The alternate screen: rows below the cursor go first, then rows at the top (no
        scrollback on this screen); cells past a narrower margin are kept but not shown, as in
        tmux (a wide character cut by the margin becomes blanks)."""
        if lines < self.lines:
            drop_top = max(0, self.cursor.y - (lines - 1))
            if drop_top:
                self._scroll_up(0, self.lines - 1, drop_top)
                self.cursor.y -= drop_top
            for y in range(lines, self.lines):
                self.buffer.pop(y, None)
        if columns < self.columns:  # cells past the margin stay (tmux shows them again)
            for row in self.buffer.values():
                stub = row.get(columns - 1)
                if stub is not None and stub.data != "" and char_width(stub.data[0]) == 2:
                    row[columns - 1] = stub._replace(data=" ")
                    pad = row.get(columns)
                    if pad is not None and pad.data == "":
                        row[columns] = pad._replace(data=" ")
        self.cursor.x = min(self.cursor.x, columns)
        self.cursor.y = min(self.cursor.y, lines - 1)

    # -- reading ------------------------------------------------------------------------------

    def row_line(self, y: int) -> Line:
        """Row y as a compact Line (text without wide-char padding, style runs).

        A row the plain-output batch left as segments is read from them, without making cells:
        watching a flooding session's screen stays as cheap as the flood itself."""
        segments = self.deferred_rows.get(y)
        if segments is not None:
            return line_from_segments(segments, self._default)
        if y in self._writes:
            self._row(y)
        return line_from_row(self._buffer.get(y, {}), self.columns, self._default)

    def row_first_char(self, y: int) -> str:
        """The character in row y's first cell (" " when blank), without reading the row."""
        segments = self.deferred_rows.get(y)
        if segments is not None:
            for _style, text in segments:
                if text:
                    return text[0]
            return " "
        if y in self._writes:
            self._row(y)
        row = self._buffer.get(y)
        cell = None if row is None else row.get(0)
        return cell.data[:1] or " " if cell is not None else " "

    def text_rows(self) -> list[str]:
        """Screen rows as text, trailing blanks trimmed (what `tmux capture-pane -p` prints)."""
        return [self.row_line(y).text.rstrip(" ") for y in range(self.lines)]
