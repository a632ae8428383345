"""Hostile output against the terminal screen: every piece of state output drives stays bounded.

A scripted hostile agent (tests.support.hostile_agent) writes the floods through a real PTY
into a real `TerminalSession`. After every chunk the screen and stream are probed, so a bound
that holds only at the end would still fail. What happens in each case:

- OSC 9 / OSC 777 notifications: the newest MAX_NOTIFICATIONS are kept, older ones dropped.
- `CSI > n u` kitty keyboard pushes: a stack of at most MAX_KITTY_FLAGS (oldest dropped), pops
  still work.
- Titles and other OSC strings are cut to MAX_OSC characters; an OSC, DCS, APC or CSI that never
  ends is skipped up to its terminator without being kept, and none of its payload is drawn.
- ESC 7 keeps at most MAX_SAVEPOINTS saved cursors; combining marks stop at MAX_CELL_CHARS per
  cell; `CSI n b` repeats at most to the right margin (as tmux); tab stops stay within columns.
- A 10 MB line without a newline only fills the bounded scrollback.
Memory is measured with tracemalloc: it stays flat however much is written.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from semo.engine.terminal.screen import (
    MAX_CELL_CHARS,
    MAX_KITTY_FLAGS,
    MAX_NOTIFICATIONS,
    MAX_SAVEPOINTS,
)
from semo.engine.terminal.session import TerminalSession
from semo.engine.terminal.stream import MAX_OSC, MAX_PENDING

ROOT = Path(__file__).resolve().parents[2]
DONE = "hostile output done"
SCROLLBACK = 200
MB = 1_000_000
Probe = Callable[[TerminalSession], None]


@pytest.fixture
def traced() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


async def run_hostile(
    tmp_path: Path, acts: list[dict[str, object]], probe: Probe, *, cols: int = 80
) -> tuple[TerminalSession, int]:
    """Run the hostile agent with `acts`, probing after every chunk; return the session and
    how many bytes of traced memory it grew by from its first output to its end."""
    script = tmp_path / "acts.json"
    acts = [*acts, {"raw": f"\r\n\x1b[2K{DONE}\r\n", "exit": 0}]
    script.write_text(json.dumps({"start": acts}))
    argv = [sys.executable, "-m", "tests.support.hostile_agent", "--script", str(script)]
    argv += ["--log", str(tmp_path / "log.jsonl")]
    session = TerminalSession(argv, cols=cols, rows=24, cwd=ROOT, scrollback=SCROLLBACK)
    baseline: list[int] = []

    def on_output(_: str) -> None:
        if not baseline and tracemalloc.is_tracing():
            gc.collect()
            baseline.append(tracemalloc.get_traced_memory()[0])
        probe(session)

    session.add_listener(on_output)
    session.start()
    try:
        status = await asyncio.wait_for(session.wait(), 300)
    finally:
        await session.close()
    assert status.code == 0, status
    assert DONE in session.screen.text_rows(), session.screen.text_rows()
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - baseline[0] if baseline else 0
    return session, grown


def no_probe(_: TerminalSession) -> None:
    pass


def all_text(session: TerminalSession) -> str:
    return "\n".join([*session.screen.scrollback.text(), *session.screen.text_rows()])


async def test_notification_and_keyboard_mode_floods_keep_bounded_state(
    tmp_path: Path, traced: None
) -> None:
    seen = {"notifications": 0, "kitty": 0}

    def probe(session: TerminalSession) -> None:
        screen = session.screen
        seen["notifications"] = max(seen["notifications"], len(screen.notifications))
        seen["kitty"] = max(seen["kitty"], len(screen.kitty_keyboard_flags))

    acts: list[dict[str, object]] = [
        {"raw": "\x1b]9;build finished, tests green\x07", "repeat": 60_000},
        {"raw": "\x1b]777;notify;Claude;needs your permission\x07", "repeat": 30_000},
        {"raw": "\x1b[>1u", "repeat": 300_000},
        {"raw": "\x1b]9;the last one\x07\x1b[>7u"},
    ]
    session, grown = await run_hostile(tmp_path, acts, probe)
    screen = session.screen
    assert seen == {"notifications": MAX_NOTIFICATIONS, "kitty": MAX_KITTY_FLAGS}
    assert screen.notifications[-1] == "the last one"  # the newest are the ones kept
    assert screen.kitty_keyboard_flags[-1] == 7
    session.stream.feed("\x1b[<99u")  # popping more than was kept empties the stack
    assert screen.kitty_keyboard_flags == []
    assert grown < 2 * MB, f"memory grew by {grown} bytes"


async def test_oversize_and_endless_strings_are_skipped_and_never_drawn(
    tmp_path: Path, traced: None
) -> None:
    longest_pending = [0]

    def probe(session: TerminalSession) -> None:
        longest_pending[0] = max(longest_pending[0], len(session.stream._pending))

    acts: list[dict[str, object]] = [
        {"raw": "\x1b]2;" + "T" * 1_000_000 + "\x07"},  # terminated, but 1 MB long
        {"raw": "\x1b]0;" + "I" * 100_000 + "\x1b\\"},
        {"raw": "a:"},
        {"raw": "\x1b]2;"},  # never terminated while 5 MB go by
        {"flood": 5 * MB, "chunk": "y"},
        {"raw": "\x07b:\x1bP1$r"},
        {"flood": 3 * MB, "chunk": "z\x1b"},  # ESC not followed by '\' stays inside a DCS
        {"raw": "\x1b\\c:\x1b_"},
        {"flood": 3 * MB, "chunk": "q"},
        {"raw": "\x9cd:\x1b["},  # C1 ST ends the APC; then a CSI with endless parameters
        {"flood": 3 * MB, "chunk": "1;"},
        {"raw": "me\r\n"},
    ]
    session, grown = await run_hostile(tmp_path, acts, probe)
    screen = session.screen
    assert longest_pending[0] <= MAX_PENDING
    # a title spanning reads past MAX_PENDING is skipped; one in a single read is cut
    assert len(screen.title) <= MAX_OSC and len(screen.icon_name) <= MAX_OSC
    text = all_text(session)
    assert "a:b:c:d:e" in text
    drawn = text.replace(DONE, "").replace("hostile agent ready", "")
    assert not {"y", "z", "q", "1", ";", "T", "I"} & set(drawn)
    assert grown < 2 * MB, f"memory grew by {grown} bytes"


async def test_saved_cursors_combining_marks_repeats_and_tab_stops_are_bounded(
    tmp_path: Path, traced: None
) -> None:
    acts: list[dict[str, object]] = [
        {"raw": "\x1b7", "repeat": 20_000},
        {"raw": "x\x1b[65535b", "repeat": 2_000},  # 9 bytes each; at most a row each
        {"raw": "\x1b[5;10r\x1b[3;20r\x1b[r", "repeat": 20_000},
        {"raw": "\x1b[" + "9" * 30 + "G\x1bH\x1b[1GH\x1bH", "repeat": 20_000},
        {"raw": "\r\ne" + "\u0301" * 100_000 + "\r\n"},
    ]
    session, grown = await run_hostile(tmp_path, acts, no_probe)
    screen = session.screen
    assert len(screen.savepoints) == MAX_SAVEPOINTS
    accented = next(row for row in screen.buffer.values() if row[0].data.startswith("e"))
    assert accented[0].data == "e" + "\u0301" * (MAX_CELL_CHARS - 1)
    assert screen.scrollback.total_pushed <= 2_000 + screen.lines + 10
    assert screen.margins is None
    assert screen.tabstops <= set(range(screen.columns))
    assert grown < 2 * MB, f"memory grew by {grown} bytes"


@pytest.mark.parametrize("chunk", ["abcdefgh", "中文字符", "\x1b[31mred\x1b[0m plain "])
async def test_a_ten_megabyte_line_only_fills_the_bounded_scrollback(
    tmp_path: Path, traced: None, chunk: str
) -> None:
    size = 10 * MB if chunk.isalpha() and chunk.isascii() else 2 * MB

    most = {"scrollback": 0, "deferred": 0}

    def probe(session: TerminalSession) -> None:
        screen = session.screen
        most["scrollback"] = max(most["scrollback"], len(screen.scrollback))
        most["deferred"] = max(most["deferred"], len(screen.deferred_rows))

    acts: list[dict[str, object]] = [{"flood": size, "chunk": chunk}, {"raw": "\r\nend"}]
    session, grown = await run_hostile(tmp_path, acts, probe)
    screen = session.screen
    assert most["scrollback"] == len(screen.scrollback) == SCROLLBACK
    assert most["deferred"] <= screen.lines
    assert all(len(line.text) <= screen.columns for line in screen.scrollback)
    assert all(line.wrapped for line in list(screen.scrollback)[:-1])
    assert "end" in screen.text_rows()
    assert grown < 2 * MB, f"memory grew by {grown} bytes"
