"""Unit tests for the VT screen and stream: each fix over plain pyte, and bad input."""

from __future__ import annotations

import gc

import pyte
import pytest

from semo.engine.terminal.screen import TerminalScreen
from semo.engine.terminal.stream import MAX_OSC, MAX_PENDING, TerminalStream, make_screen_and_stream


def screen_for(data: str, cols: int = 20, rows: int = 5, **kwargs) -> TerminalScreen:
    screen, stream = make_screen_and_stream(cols, rows, **kwargs)
    stream.feed(data)
    return screen


# -- alternate screen -----------------------------------------------------------------------


def test_1049_restores_primary_screen_and_cursor():
    screen = screen_for("shell $ ls\r\nfile\r\n$ \x1b[?1049h\x1b[HFULLSCREEN\x1b[5;5H")
    assert screen.alternate
    assert screen.text_rows()[0] == "FULLSCREEN"
    TerminalStream(screen).feed("\x1b[?1049l")
    assert not screen.alternate
    assert screen.text_rows()[:3] == ["shell $ ls", "file", "$"]
    assert (screen.cursor.x, screen.cursor.y) == (2, 2)


@pytest.mark.parametrize("mode", [47, 1047])
def test_47_and_1047_restore_text_but_not_cursor(mode):
    screen = screen_for(f"primary\x1b[?{mode}h\x1b[3;4Halt")
    assert screen.text_rows()[0] == ""
    TerminalStream(screen).feed(f"\x1b[?{mode}l")
    assert screen.text_rows()[0] == "primary"
    assert (screen.cursor.x, screen.cursor.y) == (6, 2)


def test_alternate_screen_scrolling_keeps_no_scrollback():
    screen = screen_for("\x1b[?1049h" + "x\r\n" * 50 + "\x1b[?1049l", rows=3)
    assert len(screen.scrollback) == 0


def test_entering_alternate_twice_keeps_first_saved_screen():
    screen = screen_for("one\x1b[?1049hA\x1b[?1049hB\x1b[?1049l")
    assert screen.text_rows()[0] == "one"


# -- queries --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "answer"),
    [
        ("\x1b[6n", "\x1b[2;4R"),
        ("\x1b[5n", "\x1b[0n"),
        ("\x1b[?6n", "\x1b[?2;4R"),
        ("\x1b[c", "\x1b[?1;2c"),
        ("\x1b[0c", "\x1b[?1;2c"),
        ("\x1b[>c", "\x1b[>84;0;0c"),
        ("\x1b[18t", "\x1b[8;5;20t"),
        ("\x1b]11;?\x07", "\x1b]11;rgb:0000/0000/0000\x07"),
        ("\x1b]10;?\x1b\\", "\x1b]10;rgb:ffff/ffff/ffff\x1b\\"),
        ("\x1b[?2004$p", "\x1b[?2004;2$y"),
        ("\x1b[>0q", "\x1bP>|semo\x1b\\"),
    ],
)
def test_queries_are_answered(query, answer):
    answers: list[str] = []
    screen_for("ab\r\nxyz" + query, respond=answers.append)
    assert answers == [answer]


def test_decrqm_reports_a_set_mode():
    answers: list[str] = []
    screen_for("\x1b[?2026h\x1b[?2026$p", respond=answers.append)
    assert answers == ["\x1b[?2026;1$y"]


def test_pyte_alone_never_answers():
    """Why write_process_input matters: pyte's default drops every answer."""
    screen = pyte.Screen(10, 2)
    pyte.Stream(screen).feed("\x1b[6n")  # nothing to observe: no error, no answer channel
    assert TerminalScreen(10, 2).respond is None


# -- scrollback -----------------------------------------------------------------------------


def test_scrollback_is_bounded_to_its_limit():
    screen = screen_for("".join(f"line {i}\r\n" for i in range(25_000)), rows=4)
    assert len(screen.scrollback) == 10_000
    assert screen.scrollback.total_pushed == 25_000 - 3
    assert screen.scrollback[0].text == f"line {25_000 - 3 - 10_000}"
    assert screen.scrollback[-1].text == "line 24996"


def test_scrollback_limit_is_configurable_and_zero_disables_it():
    assert len(screen_for("x\r\n" * 100, rows=2, scrollback=7).scrollback) == 7
    assert len(screen_for("x\r\n" * 100, rows=2, scrollback=0).scrollback) == 0


def test_scrollback_keeps_styles():
    screen = screen_for("\x1b[31mred\x1b[0m plain\r\n" + "\r\n" * 5, rows=2)
    first = screen.scrollback[0]
    assert first.text == "red plain"
    assert first.runs[0].style.fg == "red"
    assert (first.runs[0].start, first.runs[0].end) == (0, 3)


def test_scrollback_gives_back_every_line_as_it_was_pushed():
    styled = "\x1b[1;38;2;1;2;3mbold rgb\x1b[0m \x1b[4:3mcurly\x1b[0m plain"
    screen = screen_for(styled + "\r\n" + "w" * 25 + "\r\nplain\r\n" * 3, cols=10, rows=2)
    lines = list(screen.scrollback)
    assert [line.text for line in lines] == screen.scrollback.text()
    assert lines[0].runs[0].style.bold and lines[0].runs[0].style.fg == "010203"
    assert [line.wrapped for line in lines[:5]] == [True, False, True, True, False]
    assert lines[-1] == screen.scrollback[-1] and lines[-1].runs == ()


def test_scrollback_lines_cost_the_garbage_collector_nothing():
    """A full collection walks every tracked object; 10,000 lines per session must not be."""
    screen = screen_for(
        "".join(f"\x1b[3{i % 8}mline\x1b[0m {i} " + "x" * (i % 30) + "\r\n" for i in range(500)),
        cols=20,
        rows=4,
    )
    for _ in range(3):  # the collector untracks one level of nested tuples per pass
        gc.collect()
    records = list(screen.scrollback._lines)
    assert len(records) > 500
    assert not [record for record in records if gc.is_tracked(record)]


def test_erase_saved_lines_clears_only_scrollback():
    screen = screen_for("a\r\nb\r\nc\r\nd\x1b[3J", rows=2)
    assert len(screen.scrollback) == 0
    assert screen.text_rows() == ["c", "d"]


def test_scroll_region_does_not_feed_scrollback():
    screen = screen_for("\x1b[1;3r\x1b[3;1H" + "x\r\n" * 10, rows=5)
    assert len(screen.scrollback) == 0


def test_negative_scrollback_limit_is_an_error():
    with pytest.raises(ValueError, match="scrollback limit"):
        TerminalScreen(10, 2, scrollback=-1)


# -- wide characters, ZWJ, VS16 (tmux 3.3a semantics) ------------------------------------------


@pytest.mark.parametrize(
    ("text", "cursor_x", "row"),
    [
        ("A👨\u200d👩\u200d👧B", 4, "A👨\u200d👩\u200d👧B"),  # ZWJ sequence: one wide cell
        ("C❤\ufe0fD", 3, "C❤\ufe0fD"),  # VS16 joins, width stays 1 (as tmux 3.3a)
        ("E🏳\ufe0f\u200d🌈F", 3, "E🏳\ufe0f\u200d🌈F"),
        ("L👍🏽M", 6, "L👍🏽M"),  # skin tone modifier is its own wide cell
        ("x\u200dy", 2, "xy"),  # ZWJ before a narrow char is dropped
        ("\u0301z", 1, "z"),  # combining mark at column 0 is dropped
        ("e\u0301\u0302x", 2, "e\u0301\u0302x"),
        ("G中文H", 6, "G中文H"),
    ],
)
def test_joiners_and_wide_characters(text, cursor_x, row):
    screen = screen_for(text, cols=40)
    assert screen.cursor.x == cursor_x
    assert screen.text_rows()[0] == row


def test_text_after_a_zwj_is_not_dropped():
    """pyte 0.8 stops drawing the rest of a run at the first zero-width non-combining char."""
    pyte_screen = pyte.Screen(20, 1)
    pyte.Stream(pyte_screen).feed("a\u200db rest")
    assert "rest" not in pyte_screen.display[0]
    assert screen_for("a\u200db rest").text_rows()[0] == "ab rest"


def test_wide_char_that_does_not_fit_wraps():
    screen = screen_for("a" * 9 + "中z", cols=10)
    assert screen.text_rows()[:2] == ["a" * 9, "中z"]


def test_overwriting_half_a_wide_char_blanks_the_other_half():
    screen = screen_for("中文\x1b[1Gx", cols=10)
    assert screen.text_rows()[0] == "x 文"
    screen = screen_for("中文\x1b[2Gy", cols=10)
    assert screen.text_rows()[0] == " y文"


# -- SGR ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sgr", "field", "value"),
    [
        ("38:2::255:0:0", "fg", "ff0000"),
        ("38:2:1:2:3", "fg", "010203"),
        ("48;2;1;2;3", "bg", "010203"),
        ("38;5;196", "fg", "ff0000"),
        ("38:5:196", "fg", "ff0000"),
        ("38;5;1", "fg", "red"),
        ("4:3", "underscore", True),
        ("2", "dim", True),
        ("1;2;22", "dim", False),
        ("93", "fg", "brightbrown"),
    ],
)
def test_sgr_forms(sgr, field, value):
    screen = screen_for(f"\x1b[{sgr}mX")
    assert getattr(screen.buffer[0][0], field) == value
    assert screen.text_rows()[0] == "X"


def test_underline_colour_and_4_0_are_parsed_not_printed():
    screen = screen_for("\x1b[4m\x1b[58:2::1:2:3mA\x1b[4:0mB")
    assert screen.text_rows()[0] == "AB"
    assert screen.buffer[0][0].underscore
    assert not screen.buffer[0][1].underscore


def test_pyte_prints_colon_sgr_as_text():
    pyte_screen = pyte.Screen(30, 1)
    pyte.Stream(pyte_screen).feed("\x1b[38:2::255:0:0mRED")
    assert pyte_screen.display[0].strip() != "RED"


# -- private-prefix and string sequences are never text -------------------------------------


def test_private_sequences_are_ignored_or_tracked():
    screen = screen_for("a\x1b[>4;2mb\x1b[>1uc\x1b[?1ud\x1b[<ue\x1b[=1;1uf\x1b[>qg\x1b[2 qh")
    assert screen.text_rows()[0] == "abcdefgh"
    cell = screen.buffer[0][1]
    assert not cell.underscore and not cell.dim  # pyte would apply SGR 4;2 here
    assert screen.modify_other_keys == 2
    assert screen.kitty_keyboard_flags == []
    assert screen.cursor_style == 2


def test_string_sequences_are_swallowed():
    screen = screen_for("a\x1bP+q544e\x1b\\b\x1b_apc\x1b\\c\x1b^pm\x1b\\d\x1bXsos\x1b\\e")
    assert screen.text_rows()[0] == "abcde"


# -- split reads, malformed and oversize input ----------------------------------------------


def test_sequences_split_across_every_byte_boundary():
    data = "x\x1b[38:2::1:2:3mcolour\x1b]2;title\x07\x1bP+q\x1b\\中\x1b[?1049hA\x1b[?1049lz"
    whole = screen_for(data)
    screen, stream = make_screen_and_stream(20, 5)
    for char in data:
        stream.feed(char)
    assert screen.text_rows() == whole.text_rows()
    assert screen.title == whole.title == "title"
    assert screen.buffer[0][1] == whole.buffer[0][1]


def test_malformed_escape_is_dropped_and_counted():
    screen, stream = make_screen_and_stream(20, 2)
    stream.feed("a\x1b\x07b")
    assert screen.text_rows()[0] == "ab"
    assert stream.unknown_sequences == 1


def test_csi_with_parameters_after_intermediates_is_swallowed():
    screen, stream = make_screen_and_stream(20, 2)
    stream.feed("a\x1b[ 2qb")
    assert screen.text_rows()[0] == "ab"
    assert stream.unknown_sequences == 1


def test_unknown_csi_is_ignored_and_counted():
    screen, stream = make_screen_and_stream(20, 2)
    stream.feed("a\x1b[5yb")
    assert screen.text_rows()[0] == "ab"
    assert stream.unknown_sequences == 1


def test_unterminated_osc_over_the_limit_is_skipped_to_its_end():
    screen, stream = make_screen_and_stream(20, 2)
    stream.feed("a\x1b]2;" + "x" * (MAX_PENDING + 10))
    stream.feed("still the title")
    assert stream._pending == ""  # nothing of it is kept
    stream.feed("\x07b")
    assert screen.text_rows()[0] == "ab"
    assert screen.title == ""


# -- modes, title, misc ---------------------------------------------------------------------


def test_tracked_modes():
    screen = screen_for("\x1b[?2004h\x1b[?1h\x1b[?1000h\x1b[?1006h\x1b[?1004h\x1b[?2026h")
    modes = screen.modes
    assert modes.bracketed_paste and modes.application_cursor_keys and modes.focus_events
    assert modes.synchronized_output
    assert (modes.mouse_tracking, modes.mouse_encoding) == (1000, 1006)
    TerminalStream(screen).feed("\x1b[?2004l\x1b[?1000l\x1b[?25l")
    assert not screen.modes.bracketed_paste
    assert screen.modes.mouse_tracking is None
    assert screen.cursor.hidden


def test_titles_cwd_and_notifications():
    screen = screen_for(
        "\x1b]0;both\x07\x1b]2;title\x1b\\\x1b]7;file://host/tmp/x\x07\x1b]9;done\x07"
        "\x1b]777;notify;Claude;waiting\x07"
    )
    assert (screen.title, screen.icon_name) == ("title", "both")
    assert screen.cwd == "/tmp/x"
    assert list(screen.notifications) == ["done", "Claude;waiting"]


def test_dec_special_graphics_in_utf8():
    screen = screen_for("\x1b(0lqqk\x1b(B ok")
    assert screen.text_rows()[0] == "┌──┐ ok"


def test_repeat_scroll_and_bell():
    screen = screen_for("a\x1b[3b\r\n2\r\n3\x1b[1S\x07", rows=3)
    assert screen.text_rows() == ["2", "3", ""]
    assert screen.scrollback.text() == ["aaaa"]
    assert screen.bells == 1
    TerminalStream(screen).feed("\x1b[1T")
    assert screen.text_rows() == ["", "2", "3"]


def test_deccolm_does_not_resize():
    assert screen_for("\x1b[?3h").columns == 20


# -- resize -----------------------------------------------------------------------------------


def test_resize_shrinking_rows_moves_top_rows_to_scrollback():
    screen = screen_for("1\r\n2\r\n3\r\n4\r\n5", rows=5)
    screen.resize(3, 10)
    assert (screen.lines, screen.columns) == (3, 10)
    assert screen.text_rows() == ["3", "4", "5"]
    assert screen.scrollback.text() == ["1", "2"]
    assert screen.cursor.y == 2


def test_resize_growing_keeps_content_and_clamps_cursor():
    screen = screen_for("abc", cols=5, rows=2)
    screen.resize(4, 3)
    assert screen.text_rows() == ["abc", "", "", ""]
    screen.resize(4, 2)
    # reflowed as tmux does (tests/terminal/test_reflow_tmux.py): "abc" at 2 columns wraps,
    # and the row above the cursor's goes into the history
    assert [line.text for line in screen.scrollback] == ["ab"] and screen.text_rows()[0] == "c"
    assert screen.cursor.x <= 2
    TerminalStream(screen).feed("\r\n" + "x" * 5)
    assert screen.text_rows()[1:3] == ["xx", "xx"]


def test_an_oversize_osc_in_one_read_is_cut():
    screen, stream = make_screen_and_stream(20, 2)
    stream.feed("\x1b]2;" + "t" * (MAX_OSC * 3) + "\x07\x1b]9;" + "n" * (MAX_OSC * 3) + "\x07ok")
    assert screen.title == "t" * (MAX_OSC - 2)  # "2;" counts
    assert screen.notifications[-1] == "n" * (MAX_OSC - 2)
    assert screen.text_rows()[0] == "ok"


def test_repeat_stops_at_the_right_margin_as_tmux_does():
    screen = screen_for("ab\x1b[100bX", cols=20)
    assert screen.text_rows()[:2] == ["a" + "b" * 19, "X"]
