"""TerminalPane: a live terminal session (a child in a PTY) shown and typed into in Textual.

The pane draws the session's `TerminalScreen` line by line (`render_line`), the way Toad's
terminal widget does: every screen row becomes a Strip built from the row's compact `Line`
(text + style runs), kept in a bounded LRU cache keyed by the row's content, and only the rows
the screen marked dirty (plus the rows the cursor left and entered) are refreshed, at most once
per frame (~1/60 s). Output from the child does nothing in the UI beyond setting a flag; the
frame callback reads the screen.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.cells import cell_len
from rich.color import Color
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.cache import LRUCache
from textual.content import Content
from textual.geometry import Region
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from semo.console.keys import key_to_bytes, paste_to_bytes
from semo.engine.plain_text import plain
from semo.engine.terminal.cell import Cell
from semo.engine.terminal.pty_process import TerminalClosedError
from semo.engine.terminal.screen import ZWJ, TerminalScreen, char_width
from semo.engine.terminal.scrollback import Line

if TYPE_CHECKING:
    from semo.engine.interface import TerminalHandle

CURSOR_STYLE = Style(reverse=True)
_ANSI_INDEX = {
    "black": 0,
    "red": 1,
    "green": 2,
    "brown": 3,  # pyte's name for SGR 33
    "yellow": 3,
    "blue": 4,
    "magenta": 5,
    "cyan": 6,
    "white": 7,
}


class TerminalPane(Widget, can_focus=True):
    """A terminal session, live: what the child draws, and every key typed goes to it.

    Keys: while the pane has focus, every key is sent to the child, translated to the bytes a
    terminal sends (`semo.console.keys`: arrows in CSI or SS3 form by the child's cursor-key mode,
    xterm modifier forms, ctrl and alt chords), Tab, Shift+Tab, ctrl+c, ctrl+q, ctrl+p and the
    F-keys included. Not sent:

    - the prefix chord (`prefix`, **ctrl+]** by default, `[console] prefix` in semo.toml), as in
      tmux: the next key is a console command, posted as `TerminalPane.Prefixed` (the screen
      runs it); the prefix twice sends the chord itself to the child, Escape forgets it;
    - shift+PageUp / shift+PageDown page through the scrollback (so does the mouse wheel; the
      border title shows `scrollback -N`); any other key returns to the live view and is sent
      as usual. `scroll_mode()` (the prefix, then `[`) holds the view in the scrollback: arrows,
      PageUp/PageDown, Home/End move it, q or Escape return to the live view, nothing is sent.

    Pastes go to the child wrapped in ESC[200~ ... ESC[201~ when it enabled bracketed paste
    (mode 2004), raw otherwise. A BEL from the child rings the app's bell.

    The pane owns `screen.dirty`: it clears the set each frame, after refreshing those rows.
    The source's output listener must run on the app's event loop (sessions started by the
    engine in the same process do).
    """

    #: the session this pane shows, when a screen of several says so
    session_id: str | None = None
    PREFIX_KEY: ClassVar[str] = "ctrl+right_square_bracket"
    """Textual's name for ctrl+] (byte 0x1d): the default prefix chord."""
    PREFIX_HINT: ClassVar[str] = "d detach z zoom n p q : [ o ?"
    SCROLLBACK_UP_KEY: ClassVar[str] = "shift+pageup"
    SCROLLBACK_DOWN_KEY: ClassVar[str] = "shift+pagedown"
    FRAME_SECONDS: ClassVar[float] = 1 / 60
    """At most one refresh per this many seconds."""
    ECHO_HOLD: ClassVar[float] = 0.0 if os.environ.get("SEMO_CONSOLE_ECHO_FIRST") == "0" else 0.05
    """After a key goes to a pane, the other panes wait up to this long before they redraw,
    until that pane has drawn its echo: a neighbour's repaint (a flooding agent on screen
    beside it) never stands between a key and its echo. Typing continuously, neighbours
    still redraw after each echo. 0 (SEMO_CONSOLE_ECHO_FIRST=0, bench A/B only) turns this and
    TYPING_FRAME_SECONDS off."""
    TYPING_FRAME_SECONDS: ClassVar[float] = 0.25
    """While the operator types into a pane (a key in the last TYPING_SECONDS), the other
    panes redraw at most this often (the engine sends them frames at 20/s, a flood included):
    the console's loop stays free for the echo."""
    TYPING_SECONDS: ClassVar[float] = 1.0
    _typed_at: ClassVar[float] = float("-inf")
    _hold_until: ClassVar[float] = 0.0
    _holder: ClassVar[TerminalPane | None] = None
    _held: ClassVar[set[TerminalPane]] = set()
    MOUSE_SCROLL_LINES: ClassVar[int] = 3
    BELL_INTERVAL: ClassVar[float] = 0.2
    """Seconds between two rings of the app's bell for one pane."""
    CACHE_LINES: ClassVar[int] = 256
    HISTORY_STEP: ClassVar[int] = 2000
    """A remote session's history is asked for this many lines beyond the view at a time."""

    DEFAULT_CSS = """
    TerminalPane {
        width: 1fr;
        height: 1fr;
        border: round $panel-lighten-2;
        border-title-color: $text-muted;
        border-subtitle-color: $text-muted;
        background: $background;
        color: $foreground;
    }
    TerminalPane:focus {
        border: round $accent;
        border-title-color: $text;
    }
    """

    @dataclass
    class Prefixed(Message):
        """The operator typed the prefix and then `key` (a Textual key name): a command."""

        pane: TerminalPane
        key: str

        @property
        def control(self) -> TerminalPane:
            return self.pane

    @dataclass
    class Released(Message):
        """The operator left the pane with the escape chord (focus has moved on)."""

        pane: TerminalPane

        @property
        def control(self) -> TerminalPane:
            return self.pane

    def __init__(
        self,
        source: TerminalHandle,
        *,
        title: str = "",
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
        prefix: str | None = None,
        prefix_display: str = "ctrl+]",
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.prefix = prefix or self.PREFIX_KEY
        self.prefix_display = prefix_display
        # shown in the footer while the pane has focus (the key itself is handled in on_key)
        self._bindings.bind(
            self.prefix, "arm_prefix", "then ? keys, o out", key_display=prefix_display
        )
        self.armed = False
        """The prefix was typed: the next key is a console command."""
        self.scrolling = False
        """The view is held in the scrollback (`scroll_mode`)."""
        self._subtitle: str | None = None
        self._source = source
        self._title = title
        self._view_offset = 0  # rows scrolled back into the scrollback; 0 = live
        self._pushed_seen = 0  # scrollback.total_pushed when the view was last anchored
        self._history_asked = 0  # lines of a remote session's history asked for (0: live)
        self._cache: LRUCache[tuple[object, ...], Strip] = LRUCache(self.CACHE_LINES)
        self._frame_pending = False
        self._last_frame = 0.0
        self._attached = False
        self._frame_loop: asyncio.AbstractEventLoop | None = None
        self._frame_context: contextvars.Context | None = None
        self._cursor_row: int | None = None  # the row the cursor was drawn on last frame
        self._cursor_state: tuple[int, int, bool] = (-1, -1, True)
        self._bells = source.screen.bells
        self._last_bell = float("-inf")
        self.frames = 0
        """Frames that refreshed something (for benchmarks and tests)."""
        self._update_border_title()

    # -- public API ------------------------------------------------------------------------------

    @property
    def source(self) -> TerminalHandle:
        """The session shown."""
        return self._source

    @property
    def terminal_screen(self) -> TerminalScreen:
        return self._source.screen

    @property
    def view_offset(self) -> int:
        """How many rows the view is scrolled back into the scrollback (0: live)."""
        return self._view_offset

    def set_title(self, title: str) -> None:
        """The border title (e.g. "BE · busy"); a scrollback indicator is added while scrolled."""
        if title != self._title:
            self._title = title
            self._update_border_title()

    def send(self, text: str) -> None:
        """Write `text` to the child as typed input (ignored if the child has gone)."""
        if not text:
            return
        if self.ECHO_HOLD > 0:
            TerminalPane._holder = self
            TerminalPane._typed_at = time.monotonic()
            TerminalPane._hold_until = TerminalPane._typed_at + self.ECHO_HOLD
        with contextlib.suppress(TerminalClosedError):
            self._source.write(text)

    def scroll_scrollback(self, rows: int) -> None:
        """Move the view `rows` back (positive) or forward (negative) through the scrollback.

        The alternate screen has no scrollback (as in tmux), so there the view stays live."""
        screen = self._source.screen
        limit = 0 if screen.alternate else self._history_limit()
        offset = max(0, min(self._view_offset + rows, limit))
        if offset != self._view_offset:
            self._ask_history(offset)
            self._view_offset = offset
            self._pushed_seen = screen.scrollback.total_pushed
            self._update_border_title()
            self.refresh()

    def live_view(self) -> None:
        """Back to the live screen."""
        self.scroll_scrollback(-self._view_offset)

    def release(self) -> None:
        """Leave the pane: post `Released` and move focus to the next widget (or none)."""
        self.post_message(self.Released(self))
        if not self.is_attached:
            return
        screen = self.screen
        screen.focus_next()
        if screen.focused is self:
            screen.set_focus(None)

    def refresh_from_screen(self) -> None:
        """Refresh what changed on the screen since the last frame (the per-frame callback)."""
        if not self._attached:
            self._frame_pending = False
            return
        now = time.monotonic()
        holder = TerminalPane._holder
        if holder is not None and holder is not self and now < TerminalPane._hold_until:
            assert self._frame_loop is not None  # attached
            TerminalPane._held.add(self)
            self._frame_loop.call_later(  # after the echo (_release_hold), at the latest then
                TerminalPane._hold_until - now,
                self.refresh_from_screen,
                context=self._frame_context,
            )
            return
        self._frame_pending = False
        self._last_frame = now
        screen = self._source.screen
        if screen.bells != self._bells:
            now = self._last_frame
            if screen.bells > self._bells and now - self._last_bell >= self.BELL_INTERVAL:
                self._last_bell = now
                self.app.bell()  # (a full repaint in Textual: a bell storm rings once a while)
            self._bells = screen.bells
        dirty = screen.dirty
        cursor = screen.cursor
        cursor_state = (cursor.x, cursor.y, bool(cursor.hidden))
        if self._view_offset and screen.alternate:
            self.live_view()  # the child went full-screen: there is no scrollback to show
        if self._view_offset:
            self._refresh_scrolled_view(bool(dirty))
            dirty.clear()
            return
        rows = set(dirty)
        dirty.clear()
        if cursor_state != self._cursor_state:
            rows.add(cursor.y)
            if self._cursor_row is not None:
                rows.add(self._cursor_row)
            self._cursor_state = cursor_state
        self._cursor_row = cursor.y
        regions = self._row_regions(rows)
        if regions:
            self.frames += 1
            self.refresh(*regions)
        if holder is self and now < TerminalPane._hold_until:
            self.call_after_refresh(self._release_hold)  # once the echo is on its way out

    @staticmethod
    def _release_hold() -> None:
        TerminalPane._hold_until = 0.0
        held, TerminalPane._held = TerminalPane._held, set()
        for pane in held:
            if pane._frame_pending:
                pane.refresh_from_screen()

    # -- Textual hooks ---------------------------------------------------------------------------

    def on_mount(self) -> None:
        self._frame_loop = asyncio.get_running_loop()
        self._frame_context = contextvars.copy_context()
        self._attached = True
        self._source.want_history(0)  # a remote session's history comes when scrolled back
        self._source.add_listener(self._on_output)
        self._source.screen.dirty.clear()
        self._note_cursor()

    def on_unmount(self) -> None:
        self._attached = False
        self._source.remove_listener(self._on_output)

    def on_resize(self, event: events.Resize) -> None:
        cols, rows = self.size
        if cols < 1 or rows < 1:
            return
        screen = self._source.screen
        if (cols, rows) != (screen.columns, screen.lines):
            self._ask_history(0)
            self._view_offset = 0
            self._update_border_title()
            self._source.resize(cols, rows)
        self._cache.grow(rows * 4)
        screen.dirty.clear()
        self._note_cursor()
        self.refresh()

    def action_arm_prefix(self) -> None:
        self.armed = True
        self._update_subtitle()

    def scroll_mode(self) -> None:
        """Hold the view in the scrollback, one page back (tmux's copy mode, without copying)."""
        self.scrolling = True
        self.scroll_scrollback(max(1, self.size.height - 1))
        self._update_subtitle()

    def _update_subtitle(self) -> None:
        # the screen's focus, not has_focus: in on_focus/on_blur has_focus is not updated yet
        focused = self.is_attached and self.screen.focused is self
        if focused:
            self.screen.refresh_bindings()  # the footer says what the next key does
        if self.armed:
            subtitle = f"{self.prefix_display} then: {self.PREFIX_HINT}"
        elif self.scrolling:
            subtitle = "scrollback: arrows PgUp PgDn Home End, q leaves"
        elif focused:
            subtitle = f"keys go to the agent; {self.prefix_display} ? keys"
        else:
            subtitle = None
        if subtitle != self._subtitle:  # setting it repaints the whole pane
            self._subtitle = subtitle
            self.border_subtitle = subtitle

    def on_focus(self, event: events.Focus) -> None:
        self._update_subtitle()
        self._refresh_cursor_row()

    def on_blur(self, event: events.Blur) -> None:
        self.armed = False
        self._update_subtitle()
        self._refresh_cursor_row()

    def _scroll_key(self, key: str) -> None:
        page = max(1, self.size.height - 1)
        moves = {"up": 1, "down": -1, "pageup": page, "pagedown": -page}
        if key in moves:
            self.scroll_scrollback(moves[key])
        elif key == "home":
            self.scroll_scrollback(self._history_limit())
        elif key == "end":
            self.scroll_scrollback(-self._view_offset)
        elif key in ("q", "escape"):
            self.scrolling = False
            self.live_view()
            self._update_subtitle()

    def on_key(self, event: events.Key) -> None:
        event.stop()
        event.prevent_default()
        key = event.key
        if self.armed:
            self.armed = False
            self._update_subtitle()
            if key == self.prefix:
                self.send(key_to_bytes(key, event.character) or "")
            elif key != "escape":
                self.post_message(self.Prefixed(self, key))
            return
        if key == self.prefix:
            self.armed = True
            self._update_subtitle()
            return
        if self.scrolling:
            self._scroll_key(key)
            return
        page = max(1, self.size.height - 1)
        if key == self.SCROLLBACK_UP_KEY:
            self.scroll_scrollback(page)
            return
        if key == self.SCROLLBACK_DOWN_KEY:
            self.scroll_scrollback(-page)
            return
        if self._view_offset:
            self.live_view()
        screen = self._source.screen
        data = key_to_bytes(
            key, event.character, application_cursor=screen.modes.application_cursor_keys
        )
        if data:
            self.send(data)

    def on_paste(self, event: events.Paste) -> None:
        event.stop()
        event.prevent_default()
        if self._view_offset:
            self.live_view()
        bracketed = self._source.screen.modes.bracketed_paste
        self.send(paste_to_bytes(event.text, bracketed=bracketed))

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        event.stop()
        self.scroll_scrollback(self.MOUSE_SCROLL_LINES)

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        event.stop()
        self.scroll_scrollback(-self.MOUSE_SCROLL_LINES)

    # -- rendering -------------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self.visual_style.rich_style
        line, cursor_x = self._line_at(y)
        key = (line, width, cursor_x, base)
        strip = self._cache.get(key)
        if strip is None:
            strip = build_strip(line, width, cursor_x, base)
            self._cache[key] = strip
        return strip

    def _line_at(self, y: int) -> tuple[Line, int]:
        """The Line shown on content row y, and the cursor column on it (-1: none)."""
        screen = self._source.screen
        offset = self._view_offset
        if offset:
            scrollback = screen.scrollback
            index = len(scrollback) - offset + y
            if index < len(scrollback):
                return (scrollback[index] if index >= 0 else _EMPTY), -1
            y = index - len(scrollback)
        if y >= screen.lines:
            return _EMPTY, -1
        cursor = screen.cursor
        if offset or cursor.y != y or cursor.hidden or not self.has_focus:
            return screen.row_line(y), -1
        return screen.row_line(y), min(cursor.x, screen.columns - 1)

    # -- internals -------------------------------------------------------------------------------

    def _on_output(self, _chunk: str) -> None:
        """Per chunk from the child: schedule one frame, nothing else."""
        if self._frame_pending or not self._attached or self._frame_loop is None:
            return
        self._frame_pending = True
        now = time.monotonic()
        interval = self.FRAME_SECONDS
        if TerminalPane._holder is not self and now - TerminalPane._typed_at < self.TYPING_SECONDS:
            interval = self.TYPING_FRAME_SECONDS
        delay = self._last_frame + interval - now
        if delay <= 0:
            self._frame_loop.call_soon(self.refresh_from_screen, context=self._frame_context)
        else:
            self._frame_loop.call_later(
                delay, self.refresh_from_screen, context=self._frame_context
            )

    def _refresh_scrolled_view(self, changed: bool) -> None:
        """While scrolled back, keep the same history on screen as new lines arrive."""
        screen = self._source.screen
        pushed = screen.scrollback.total_pushed - self._pushed_seen
        if pushed:
            self._pushed_seen = screen.scrollback.total_pushed
            self._view_offset = min(self._view_offset + pushed, self._history_limit())
            self._update_border_title()
        if changed or pushed:
            self.frames += 1
            self.refresh()

    def _history_limit(self) -> int:
        """How far back the view may go: the scrollback's lines (a remote session's: those the
        engine holds, asked for as the view goes back)."""
        scrollback = self._source.screen.scrollback
        return max(len(scrollback), getattr(scrollback, "available", 0))

    def _ask_history(self, offset: int) -> None:
        """A remote session's history is sent while the view is scrolled back (`offset` rows),
        a step beyond what the view shows; live, only the count of lines pushed comes."""
        want_history = self._source.want_history
        if offset <= 0:
            if self._history_asked:
                self._history_asked = 0
                want_history(0)
            return
        needed = offset + self.size.height
        if needed > self._history_asked:
            self._history_asked = needed + self.HISTORY_STEP
            want_history(self._history_asked)

    def _row_regions(self, rows: Iterable[int]) -> list[Region]:
        """Content regions for `rows`, consecutive rows merged."""
        width, height = self.size
        regions: list[Region] = []
        start = previous = None
        for y in sorted(y for y in rows if 0 <= y < height):
            if previous is not None and y == previous + 1:
                previous = y
                continue
            if start is not None and previous is not None:
                regions.append(Region(0, start, width, previous - start + 1))
            start = previous = y
        if start is not None and previous is not None:
            regions.append(Region(0, start, width, previous - start + 1))
        return regions

    def _note_cursor(self) -> None:
        """Remember where the cursor is drawn after a full refresh."""
        cursor = self._source.screen.cursor
        self._cursor_state = (cursor.x, cursor.y, bool(cursor.hidden))
        self._cursor_row = cursor.y

    def _refresh_cursor_row(self) -> None:
        if not self.is_mounted:
            return
        rows = {self._source.screen.cursor.y}
        if self._cursor_row is not None:
            rows.add(self._cursor_row)
        regions = self._row_regions(rows)
        if regions:
            self.refresh(*regions)

    def _update_border_title(self) -> None:
        title = self._title
        if self._view_offset:
            indicator = f"scrollback -{self._view_offset}"
            title = f"{title} · {indicator}" if title else indicator
        self.border_title = Content(plain(title, one_line=True)) if title else None


_EMPTY = Line("")
_BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


# -- strips -------------------------------------------------------------------------------------


def build_strip(line: Line, width: int, cursor_x: int, base: Style) -> Strip:
    """A Strip `width` cells wide for `line`, with the cursor in reverse video at `cursor_x`
    (-1: no cursor); default colours come from `base` (the widget's style)."""
    text = line.text
    segments: list[Segment] = []
    pos = 0
    for start, end, cell in line.runs:
        if start > pos:
            segments.append(Segment(_fit_cells(text[pos:start]), base))
        segments.append(Segment(_fit_cells(text[start:end]), _on_base(base, cell)))
        pos = end
    if pos < len(text):
        segments.append(Segment(_fit_cells(text[pos:]), base))
    cells = len(text) if text.isascii() else sum(cell_len(segment.text) for segment in segments)
    if cells < width:
        segments.append(Segment(" " * (width - cells), base))
        strip = Strip(segments, width)
    else:  # wider than the pane until the resize reaches the screen
        strip = Strip(segments).crop_extend(0, width, base)
    if 0 <= cursor_x < width:
        strip = _with_cursor(strip, cursor_x, width)
    return strip


def _with_cursor(strip: Strip, x: int, width: int) -> Strip:
    left, rest = strip.divide([x, width])
    first = next((segment.text for segment in rest if segment.text), " ")
    cells = max(1, cell_len(first[0]))
    under, right = rest.divide([cells, width - x])
    cursor = Strip(
        [
            Segment(text, (style or Style()) + Style(reverse=not (style and style.reverse)))
            for text, style, _ in under
        ]
    )
    return Strip.join([left, cursor, right])


_ON_BASE: dict[tuple[Style, Cell], Style] = {}


def _on_base(base: Style, cell: Cell) -> Style:
    """The widget's style with the cell's attributes over it."""
    key = (base, cell)
    style = _ON_BASE.get(key)
    if style is None:
        if len(_ON_BASE) > 4096:
            _ON_BASE.clear()
        style = _ON_BASE[key] = base + cell_style(cell)
    return style


_STYLE_CACHE: dict[Cell, Style] = {}


def cell_style(cell: Cell) -> Style:
    """The Rich style for a cell's attributes (its `data` is ignored)."""
    style = _STYLE_CACHE.get(cell)
    if style is None:
        if len(_STYLE_CACHE) > 4096:
            _STYLE_CACHE.clear()
        style = _STYLE_CACHE[cell] = Style(
            color=_color(cell.fg),
            bgcolor=_color(cell.bg),
            bold=cell.bold or None,
            dim=cell.dim or None,
            italic=cell.italics or None,
            underline=cell.underscore or None,
            strike=cell.strikethrough or None,
            reverse=cell.reverse or None,
            blink=cell.blink or None,
        )
    return style


def _color(name: str) -> Color | None:
    """pyte's colour vocabulary: "default", ANSI names ("red", "brightred") or "rrggbb"."""
    if name == "default":
        return None
    index = _ANSI_INDEX.get(name)
    if index is not None:
        return Color.from_ansi(index)
    if name.startswith("bright") and name[6:] in _ANSI_INDEX:
        return Color.from_ansi(8 + _ANSI_INDEX[name[6:]])
    if len(name) == 6:
        try:
            return Color.from_rgb(int(name[0:2], 16), int(name[2:4], 16), int(name[4:6], 16))
        except ValueError:
            return None
    return None


def _fit_cells(text: str) -> str:
    """Text whose Rich cell width matches the screen's cells.

    The screen counts widths as tmux 3.3a does; Rich measures grapheme clusters with its own
    tables. Where they disagree for a cell (VS16 sequences, which tmux 3.3a keeps narrow; flag
    halves), the cell's joined additions are dropped or it is padded, so columns stay aligned.
    Bidi controls (zero width on both sides) are dropped: an agent must not reorder the
    operator's terminal (Trojan Source).
    """
    if text.isascii():
        return text
    out: list[str] = []
    cluster = ""
    previous = ""
    for char in text:
        if char in _BIDI_CONTROLS:
            continue
        if cluster and (previous == ZWJ or char_width(char) <= 0):
            cluster += char
        else:
            if cluster:
                out.append(_fit_cluster(cluster))
            cluster = char
        previous = char
    if cluster:
        out.append(_fit_cluster(cluster))
    return "".join(out)


def _fit_cluster(cluster: str) -> str:
    base = cluster[0]
    cells = max(char_width(base), 1)
    if cell_len(cluster) == cells:
        return cluster
    base_cells = cell_len(base)
    if base_cells == cells:
        return base
    if base_cells < cells:
        return base + " " * (cells - base_cells)
    return "?" * cells
