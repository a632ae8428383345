"""CSI M (delete lines): rows below move up and blank rows come in, also when the row that
moves up is blank (pyte left the deleted row in place then)."""

from __future__ import annotations

import pytest

from semo.engine.terminal.screen import TerminalScreen
from semo.engine.terminal.stream import TerminalStream


def _rows(data: str, columns: int, rows: int) -> list[str]:
    screen = TerminalScreen(columns, rows)
    TerminalStream(screen).feed(data)
    return screen.text_rows()


@pytest.mark.parametrize(
    ("data", "columns", "rows", "expected"),
    [
        ("a\x1b[M", 3, 2, ["", ""]),  # the blank row below moves up over "a"
        ("\x1b[2K\x1b[La\x1b[M", 3, 2, ["", ""]),  # found by test_fast_parts' random draws
        ("a\r\nb\r\nc\x1b[1;1H\x1b[M", 3, 3, ["b", "c", ""]),
        ("a\r\nb\r\nc\x1b[1;1H\x1b[2M", 3, 3, ["c", "", ""]),
        ("a\r\nb\r\nc\x1b[1;1H\x1b[9M", 3, 3, ["", "", ""]),  # more than the region holds
        ("a\r\nb\r\nc\r\nd\x1b[2;3r\x1b[2;1H\x1b[M", 3, 4, ["a", "c", "", "d"]),  # margins
        ("a\r\nb\r\nc\r\nd\x1b[2;3r\x1b[4;1H\x1b[M", 3, 4, ["a", "b", "c", "d"]),  # outside
        ("a\r\n\r\nc\x1b[1;1H\x1b[M", 3, 3, ["", "c", ""]),  # a blank row in the middle
    ],
)
def test_delete_lines(data: str, columns: int, rows: int, expected: list[str]) -> None:
    assert _rows(data, columns, rows) == expected


def test_delete_lines_moves_the_cursor_to_the_first_column() -> None:
    screen = TerminalScreen(5, 3)
    TerminalStream(screen).feed("abc\r\ndef\x1b[1;3H\x1b[M")
    assert (screen.cursor.x, screen.cursor.y) == (0, 0)
    assert screen.text_rows() == ["def", "", ""]
