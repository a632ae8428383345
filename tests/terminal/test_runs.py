"""The run-based paths for non-ASCII text must give exactly what drawing character by character
gives (`_draw_unicode`, the reference that the tmux fidelity tests pin down)."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st
from pyte import modes

from semo.engine.terminal.screen import TerminalScreen
from semo.engine.terminal.stream import make_screen_and_stream

_chars = st.sampled_from([*"ab ⏺│●中文字ｱ한✅🚀👨⚠", "\u200d", "\ufe0f", "\u0301", "🇩🇪", "e\u0301"])
_text = st.lists(_chars, min_size=1, max_size=30).map("".join)
_control = st.sampled_from(
    ["\r\n", "\r", "\x1b[31m", "\x1b[0m", "\x1b[3G", "\x1b[2;5H", "\x1b[K", "\x1b[1K",
     "\x1b[2K", "\x1b[?7l", "\x1b[?7h", "\x1b[4h", "\x1b[4l", "\x1b[1P", "\x1b[2@",
     "\x1b(0", "\x1b(B"]
)  # fmt: skip
_pieces = st.lists(st.one_of(_text, _control), max_size=40)


class CharByChar(TerminalScreen):
    """Every non-ASCII draw character by character, as before the run paths (and ASCII through
    `_draw_ascii`, not the inline path of `draw`)."""

    def draw(self, data: str) -> None:
        if self._charset_map is not None:
            data = data.translate(self._charset_map)
        if not data:
            return
        self.last_graphic = data[-1]
        if data.isascii() and not self._pending_zwj and modes.IRM not in self.mode:
            self._draw_ascii(data)
        else:
            self._draw_unicode(data)
        self.dirty.add(self.cursor.y)


def _state(screen: TerminalScreen) -> tuple[object, ...]:
    cells = tuple(
        tuple(screen.buffer[y][x] for x in range(screen.columns)) for y in range(screen.lines)
    )
    wrapped = tuple(getattr(screen.buffer[y], "wrapped", False) for y in range(screen.lines))
    cursor = (screen.cursor.x, screen.cursor.y, screen.cursor.attrs, screen._pending_zwj)
    return cells, wrapped, cursor, tuple(screen.scrollback), screen.last_graphic


@settings(max_examples=600, deadline=None)
@example(pieces=["中中", "\r", "a中"], cols=10)  # cuts the wide char under the run's end
@example(pieces=["ab中", "\r", "中"], cols=10)  # ... and under its start
@example(pieces=["abc中文字", "\x1b[2;1H", "x🚀中"], cols=5)  # wraps in the last column
@given(pieces=_pieces, cols=st.integers(min_value=3, max_value=12))
def test_run_paths_draw_what_character_by_character_draws(pieces: list[str], cols: int) -> None:
    ours, stream = make_screen_and_stream(cols, 4, batch=False)
    reference = CharByChar(cols, 4)
    ref_stream = type(stream)(reference, batch=False)
    for piece in pieces:
        stream.feed(piece)
        ref_stream.feed(piece)
    assert _state(ours) == _state(reference)
