"""Erasing: wrap flags (tmux clears a row's flag when the whole row is erased; reflow joins rows by
it), unknown EL/ED modes ignored as tmux does, and rows erased with default attributes read as
blanks."""

from __future__ import annotations

import pytest

from semo.engine.terminal.stream import make_screen_and_stream


def _wrapped_rows(text: str, columns: int = 5) -> tuple[list[str], list[bool]]:
    screen, stream = make_screen_and_stream(columns, 4)
    stream.feed(text)
    flags = [getattr(screen.buffer[y], "wrapped", False) for y in range(screen.lines)]
    return screen.text_rows(), flags


LONG = "abcdefgh\x1b[1;1H"  # row 0 wraps into row 1; the cursor back at row 0, column 0


@pytest.mark.parametrize(
    "erase, wrapped",
    [
        ("\x1b[2K", False),  # the whole row
        ("\x1b[K", False),  # from column 0 to the end: the whole row
        ("\x1b[5G\x1b[1K", False),  # from the start to the last column: the whole row
        ("\x1b[3G\x1b[K", True),  # part of the row: the flag stays
        ("\x1b[3G\x1b[1K", True),
        ("\x1b[J", False),  # the cursor row from column 0, and everything below
        ("\x1b[2J", False),
        ("\x1b[31m\x1b[2K", False),  # with colours too
    ],
)
def test_a_whole_row_erase_clears_its_wrap_flag(erase: str, wrapped: bool) -> None:
    _rows, flags = _wrapped_rows(LONG + erase)
    assert flags[0] is wrapped


@pytest.mark.parametrize("sequence", ["\x1b[5K", "\x1b[3;5K", "\x1b[5J", "\x1b[4J"])
def test_unknown_erase_modes_are_ignored(sequence: str) -> None:
    rows, _ = _wrapped_rows("abcd\r\nefgh\x1b[1;2H" + sequence)
    assert rows == ["abcd", "efgh", "", ""]


def test_erasing_with_default_attributes_leaves_blanks_and_colours_stay_where_set() -> None:
    screen, stream = make_screen_and_stream(6, 3)
    stream.feed("\x1b[41mabcdef\x1b[0m\r\n\x1b[44mghijkl\x1b[1;3H\x1b[0m\x1b[K\x1b[2;3H\x1b[1K")
    assert screen.text_rows() == ["ab", "   jkl", ""]
    assert [screen.buffer[0][x].bg for x in range(6)] == ["red", "red", *["default"] * 4]
    assert [screen.buffer[1][x].bg for x in range(6)] == ["default"] * 3 + ["blue"] * 3
    stream.feed("\x1b[42m\x1b[2;1H\x1b[2K")
    assert [screen.buffer[1][x].bg for x in range(6)] == ["green"] * 6
