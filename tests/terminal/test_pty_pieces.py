"""A turn of reading handed on in pieces (engine/terminal/pty_process.py, `_read_slice`).

A turn reads up to `read_size` bytes and hands them on whenever the line discipline's buffer is
found empty (the screen works while the kernel refills it) or a piece is big enough, and ends
after a piece once MAX_SLICE_SECONDS have passed. Whatever the pieces: every byte arrives once,
in order, UTF-8 characters cut between reads are whole, and a flood (a hostile agent's too)
leaves the loop to everyone else.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import sys
import time
from pathlib import Path

import pytest

from semo.engine.terminal.pty_process import MAX_SLICE_SECONDS, TerminalProcess
from semo.engine.terminal.session import TerminalSession
from tests.support.pty_children import Output, Spawn, python
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(60)
ROOT = Path(__file__).resolve().parents[2]

#: numbered lines with two- three- and four-byte characters, so reads cut characters apart
NUMBERED = python(
    "import sys\n"
    "out = sys.stdout.buffer\n"
    "for n in range(60000):\n"
    "    out.write(f'{n:06d} é中🚀 {\"x\" * (n % 97)}\\n'.encode())\n"
    "out.flush()\n"
)


def numbered_text() -> str:
    # the PTY turns each \n into \r\n (ONLCR)
    return "".join(f"{n:06d} é中🚀 {'x' * (n % 97)}\r\n" for n in range(60000))


async def test_a_large_output_arrives_whole_and_in_order(spawn: Spawn) -> None:
    out = Output()
    process = spawn(NUMBERED, on_output=out, read_size=65536)
    await asyncio.wait_for(process.wait(), 30)
    expected = numbered_text()
    assert len(out.text) == len(expected)
    assert out.text == expected
    assert "\ufffd" not in out.text  # no character was split between two pieces


async def test_each_turn_reports_what_it_took(spawn: Spawn) -> None:
    out = Output()
    turns: list[tuple[float, int]] = []
    process = spawn(NUMBERED, on_output=out, on_slice=lambda s, n: turns.append((s, n)))
    await asyncio.wait_for(process.wait(), 30)
    # bytes of every turn together: all the output (the exit drain reads outside the turns)
    assert 0 < sum(n for _, n in turns) <= len(out.text.encode())
    assert all(seconds >= 0 and taken > 0 for seconds, taken in turns)
    assert len(turns) <= process.reads


async def test_a_turn_ends_after_a_piece_that_took_past_the_slice_time(
    spawn: Spawn,
) -> None:
    """Each piece here takes longer than MAX_SLICE_SECONDS to handle: a turn is one piece,
    so the loop gets its turn back after every piece, whatever `read_size` allows."""
    pieces_per_turn: list[int] = []
    current = [0]

    def slow(_text: str) -> None:
        current[0] += 1
        time.sleep(MAX_SLICE_SECONDS * 1.5)

    def turn_done(_seconds: float, _taken: int) -> None:
        pieces_per_turn.append(current[0])
        current[0] = 0

    flood = python("import sys\nwhile True: sys.stdout.write('y' * 300 + '\\n')")
    process = spawn(flood, on_output=slow, on_slice=turn_done, read_size=1 << 20)
    await eventually(lambda: len(pieces_per_turn) >= 20, 20)
    assert max(pieces_per_turn) == 1
    assert process.running


async def test_the_loop_and_another_terminal_are_served_during_a_hostile_flood(
    tmp_path: Path,
) -> None:
    """An agent flooding its terminal without end: timers keep firing and another terminal's
    echo arrives while the flood goes on, and what the flooder wrote reaches its screen."""
    script = tmp_path / "acts.json"
    script.write_text(json.dumps({"start": [{"flood": 1 << 40, "chunk": "flood é "}]}))
    log = tmp_path / "prompts.jsonl"
    flooder = TerminalSession(
        [sys.executable, "-m", "tests.support.hostile_agent", "--script", str(script),
         "--log", str(log)],
        cwd=str(ROOT),
    )  # fmt: skip
    other = TerminalSession(["cat"])
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.001)
            ticks += 1

    tick_task = asyncio.create_task(ticker())
    try:
        flooder.start()
        other.start()
        await eventually(lambda: flooder.bytes_out > 1_000_000, 30)
        seen = ticks
        await eventually(lambda: ticks >= seen + 50, 30)
        other.write("still here\r")
        await eventually(lambda: "still here" in other.screen.text_rows()[0], 30)
        assert flooder.exit_status is None  # the flood was still going on all along
        assert "flood é" in "\n".join(flooder.screen.text_rows())
    finally:
        tick_task.cancel()
        await flooder.close(grace=0.5)
        await other.close(grace=0.5)


async def test_a_binary_flood_is_delivered_byte_for_byte(spawn: Spawn) -> None:
    """Every byte value the child writes (invalid UTF-8 included) comes out as the decoder
    says, the same as decoding the whole output at once."""
    code = (
        "import os, random\n"
        "rng = random.Random(3)\n"
        "data = bytes(rng.randrange(256) for _ in range(400000))\n"
        "view = memoryview(data)\n"
        "while view:\n"
        "    view = view[os.write(1, view[:5000]):]\n"
    )
    out = Output()
    # raw mode: the PTY passes bytes through (no \n -> \r\n, no control characters)
    process = spawn(python("import tty, sys; tty.setraw(1)\n" + code), on_output=out)
    await finish_long(process)
    rng = random.Random(3)
    data = bytes(rng.randrange(256) for _ in range(400000))
    expected = data.decode("utf-8", errors="replace")
    assert len(out.text) == len(expected)
    assert digest(out.text) == digest(expected)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


async def finish_long(process: TerminalProcess) -> None:
    await asyncio.wait_for(process.wait(), 30)


async def test_pieces_can_be_turned_off_for_a_bench(
    spawn: Spawn,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SEMO_PTY_PIECES=0: a turn goes on in one piece (the output is the same)."""
    monkeypatch.setenv("SEMO_PTY_PIECES", "0")
    out = Output()
    per_turn: list[int] = []
    current = [0]

    def chunk(text: str) -> None:
        out(text)
        current[0] += 1

    def turn(_seconds: float, _taken: int) -> None:
        per_turn.append(current[0])
        current[0] = 0

    process = spawn(NUMBERED, on_output=chunk, on_slice=turn)
    await asyncio.wait_for(process.wait(), 30)
    assert out.text == numbered_text()
    assert per_turn and all(count == 1 for count in per_turn)
