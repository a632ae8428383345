"""Wide, joined and combining text drawn run by run (whole cells per cluster, kept back with the
row's other draws) must leave the screen exactly as the per-character path (`_draw_unicode`, the
path the tmux fidelity tests pinned down: ZWJ, VS16, combining marks, wide characters)."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from semo.engine.terminal.screen import TerminalScreen, char_width
from semo.engine.terminal.stream import TerminalStream
from semo.engine.terminal.width import MAX_CLUSTER_CHARS, ZWJ, clusters


class PerCharacter(TerminalScreen):
    """Every draw through the per-character path."""

    def draw(self, data: str) -> None:
        if self._charset_map is not None:
            data = data.translate(self._charset_map)
        if data:
            self.last_graphic = data[-1]
            self._draw_unicode(data)
            self.dirty.add(self.cursor.y)


_text = st.lists(
    st.sampled_from(
        [*"ab é│⏺中文ｱ한✅🚀⚠", ZWJ, "\ufe0f", "\u0301", "\U0001f3fb", "🇩🇪", "👨‍💻", "⚠️", "\x07"]
    ),
    min_size=1,
    max_size=14,
).map("".join)
_moves = st.sampled_from(
    ["\x1b[H", "\x1b[1;4H", "\x1b[2;2H", "\x1b[31m", "\x1b[0m", "\x1b[2K", "\r"]
)


def _cells(screen: TerminalScreen) -> tuple:
    rows = tuple(
        tuple(screen.buffer[y][x] for x in range(screen.columns)) for y in range(screen.lines)
    )
    cursor = screen.cursor
    return rows, (cursor.x, cursor.y), screen._pending_zwj, tuple(screen.scrollback)


@settings(max_examples=1500, deadline=None)
@given(
    pieces=st.lists(st.one_of(_text, _moves), max_size=30),
    columns=st.integers(min_value=2, max_value=16),
)
@example(pieces=["a👨‍💻b", "⚠️x", "e\u0301\u0301"], columns=16)
@example(pieces=["ab", "\x1b[1;2H", "中\ufe0f"], columns=6)
@example(pieces=["a" + ZWJ + "b" + ZWJ + "🚀" + ZWJ + ZWJ + "中"], columns=16)
@example(pieces=["x" + "\u0301" * (MAX_CLUSTER_CHARS + 3) + "y"], columns=8)
def test_runs_of_clusters_give_what_the_per_character_path_gives(pieces, columns):
    states = []
    for screen_class in (TerminalScreen, PerCharacter):
        screen = screen_class(columns, 3, scrollback=10)
        stream = TerminalStream(screen)
        for piece in pieces:
            stream.feed(piece)
        states.append(_cells(screen))
    assert states[0] == states[1]


def test_clusters_cut_text_into_cells_as_tmux_joins_it() -> None:
    assert clusters("a👨‍💻⚠️e\u0301中") == (["a", "👨‍💻", "⚠️", "e\u0301", "中"], 1 + 2 + 1 + 1 + 2)
    assert clusters("a" + ZWJ + "b") == (["a", "b"], 2)  # a joiner before a narrow one is dropped
    assert clusters("a" + ZWJ + "中") == (["a" + ZWJ + "中"], 1)  # joined: keeps the base's width
    assert clusters("\u0301a") is None  # joins a cell drawn before: per-character path
    assert clusters("a" + ZWJ) is None  # the joiner waits for the next draw
    assert clusters("a\x07") is None
    assert char_width("🇩") == 1  # regional indicators: one cell each, as glibc and tmux


def test_a_joined_emoji_row_is_kept_back_until_read() -> None:
    screen = TerminalScreen(20, 3)
    stream = TerminalStream(screen)
    stream.feed("\x1b[2;1H⏺ 👨‍💻 done ⚠️ 中文")
    assert 1 in screen._writes  # not turned into cells yet
    assert screen.text_rows()[1] == "⏺ 👨‍💻 done ⚠️ 中文"
    assert screen.cursor.x == 2 + 3 + 5 + 2 + 4
