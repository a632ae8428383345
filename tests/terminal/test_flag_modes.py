"""`CSI ? Pm h/l` for modes that are flags only are applied by a ready call (`set_flag_modes`)
instead of `set_mode`: the screen must end up as the general path leaves it, for any mix with
the modes that do more (alternate screens, cursor saves, DECOM, DECSCNM, DECCOLM)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from semo.engine.terminal.screen import TerminalScreen
from semo.engine.terminal.stream import TerminalStream

_modes = st.lists(
    st.sampled_from([1, 3, 5, 6, 7, 25, 47, 1000, 1004, 1006, 1047, 1048, 1049, 2004, 2026, 0]),
    min_size=1,
    max_size=3,
).map(lambda modes: ";".join(map(str, modes)))
_pieces = st.lists(
    st.one_of(
        st.builds(lambda m, f: f"\x1b[?{m}{f}", _modes, st.sampled_from("hl")),
        st.sampled_from(["ab", "中", "\x1b[2;3H", "\x1b[31m", "\r\n", "\x1b[2K", "\x1b[?h"]),
    ),
    max_size=40,
)


def _state(screen: TerminalScreen) -> tuple:
    cells = tuple(
        tuple(screen.buffer[y][x] for x in range(screen.columns)) for y in range(screen.lines)
    )
    cursor = screen.cursor
    return (
        cells,
        (cursor.x, cursor.y, cursor.attrs, cursor.hidden),
        frozenset(screen.mode),
        frozenset(screen.modes.private),
        screen.alternate,
        len(screen.savepoints),
        tuple(screen.scrollback),
    )


@settings(max_examples=500, deadline=None)
@given(pieces=_pieces)
def test_flag_modes_leave_the_screen_as_set_mode_does(pieces):
    states = []
    for fast in (True, False):
        screen = TerminalScreen(8, 4, scrollback=10)
        stream = TerminalStream(screen, fast=fast)
        for piece in pieces:
            stream.feed(piece)
        states.append(_state(screen))
    assert states[0] == states[1]


def test_a_flag_mode_sequence_is_one_ready_call() -> None:
    screen = TerminalScreen(8, 4)
    stream = TerminalStream(screen)
    stream.feed("\x1b[?25;2026l")
    assert screen.cursor.hidden and not screen.modes.synchronized_output
    assert stream._calls["\x1b[?25;2026l"].func == screen.reset_flag_modes
    stream.feed("\x1b[?2026;25h")
    assert not screen.cursor.hidden and screen.modes.synchronized_output
    assert stream._calls["\x1b[?2026;25h"].func == screen.set_flag_modes


def test_leaving_the_alternate_screen_drops_its_kept_back_draws_unseen() -> None:
    screen = TerminalScreen(10, 3)
    stream = TerminalStream(screen)
    stream.feed("prim\x1b[2;1Hary")
    stream.feed("\x1b[?1049h\x1b[1;1Halt 中👨‍💻\x1b[3;2Hxyz")
    assert screen._writes  # the alternate screen's draws, not turned into cells yet
    stream.feed("\x1b[?1049l")
    assert not screen._writes
    assert screen.text_rows() == ["prim", "ary", ""]
    assert (screen.cursor.x, screen.cursor.y) == (3, 1)
