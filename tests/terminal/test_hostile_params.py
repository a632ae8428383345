"""Sequences that used to raise out of `TerminalStream.feed` (so a session's reader died on one
line of an agent's output): each is now applied or ignored, on both paths."""

from __future__ import annotations

import pytest

from semo.engine.terminal.stream import make_screen_and_stream

CASES = {
    "thousands of digits (int() refuses past 4300)": "\x1b[" + "9" * 5000 + "A",
    "thousands of digits in CUP": "\x1b[" + "9" * 5000 + ";" + "9" * 5000 + "H",
    "thousands of digits in SGR": "\x1b[1;" + "9" * 5000 + "m",
    "'?' inside SGR parameters (tmux ignores the sequence)": "\x1b[1?2m",
    "'=' at the end of SGR parameters": "\x1b[1=m",
    "DSR 6 in origin mode without margins (pyte asserted)": "\x1b[?6h\x1b[6n",
    "VPA in origin mode without margins (pyte asserted)": "\x1b[?6h\x1b[5d",
    "ED with an unknown mode (pyte: unbound local)": "\x1b[5J",
}


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("sequence", CASES.values(), ids=CASES.keys())
def test_sequence_is_applied_or_ignored(sequence: str, fast: bool) -> None:
    answers: list[str] = []
    screen, stream = make_screen_and_stream(20, 5, respond=answers.append, fast=fast)
    stream.feed("ab\r\n" + sequence + "cd")
    assert "cd" in "".join(screen.text_rows())
    assert screen.cursor.attrs.fg == "default"
    assert all(answer.startswith("\x1b[") for answer in answers)
