"""Output chunks of an agent session per turn of reading (engine/sessions/agent_session.py).

A turn of reading hands the screen its output in pieces; the session turns each turn's pieces
into one OutputChunk (what the bus publishes as session_output), so a flood makes as many
events as turns, and the chunks together are all the output, in order, the part read while
the child exits included.
"""

from __future__ import annotations

import asyncio
import sys

import pytest

from semo.engine.sessions.agent_session import AgentSession, OutputChunk, SessionEvent
from semo.engine.sessions.profiles import profile_named
from semo.engine.terminal.session import TerminalSession

pytestmark = pytest.mark.timeout(60)

LINES = 40000
PROGRAM = [
    sys.executable,
    "-c",
    f"import sys\nfor n in range({LINES}): sys.stdout.write(f'{{n:06d}} é中🚀 line\\n')",
]


def expected() -> str:
    return "".join(f"{n:06d} é中🚀 line\r\n" for n in range(LINES))


async def test_one_output_chunk_per_turn_and_together_all_the_output() -> None:
    session = AgentSession("turns", PROGRAM, profile_named("generic"), cols=80, rows=24)
    chunks: list[OutputChunk] = []

    def collect(_session: AgentSession, event: SessionEvent) -> None:
        if isinstance(event, OutputChunk):
            chunks.append(event)

    session.add_listener(collect)
    session.start()
    try:
        await asyncio.wait_for(session.terminal.wait(), 30)
        assert "".join(chunk.data for chunk in chunks) == expected()
        assert [chunk.seq for chunk in chunks] == sorted({chunk.seq for chunk in chunks})
        process = session.terminal.process
        assert process is not None
        assert len(chunks) <= process.reads + 1  # a chunk per turn, and one at exit
    finally:
        await session.terminate("test done")


async def test_turn_listeners_run_after_the_chunks_of_their_turn() -> None:
    terminal = TerminalSession([*PROGRAM[:2], PROGRAM[2].replace(str(LINES), "5000")])
    events: list[str] = []
    terminal.add_listener(lambda text: events.append("chunk"))
    terminal.add_turn_listener(lambda: events.append("turn"))
    terminal.start()
    try:
        await asyncio.wait_for(terminal.wait(), 30)
        assert events.count("turn") >= 1
        # every turn follows a chunk (no turn without output)
        assert all(events[i - 1] == "chunk" for i, e in enumerate(events) if e == "turn")
        assert terminal.process is not None
        assert events.count("turn") <= terminal.process.reads
    finally:
        await terminal.close()
