"""Hostile output through the protocol pipeline, on real processes.

Each test runs `tests/support/hostile_agent.py` in a real PTY as a generic `AgentSession`
(real screen, real observer) and checks what semo makes of what the agent prints, and what
reaches the agent when semo types into it (the agent logs every line it reads).
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from semo.engine.agents.generic import GENERIC
from semo.engine.protocol.messages import AskUser, ProtocolError, StepComplete
from semo.engine.protocol.observer import MAX_MESSAGES_PER_TURN, MalformedMessage, MessageFound
from semo.engine.protocol.state import AgentState
from semo.engine.sessions.agent_session import AgentSession, SessionEvent
from tests.support.script_agent import logged_prompts
from tests.support.waiting import eventually

TURN = 30.0


@dataclass
class Hostile:
    session: AgentSession
    log: Path
    events: list[SessionEvent] = field(default_factory=list)

    def prompts(self) -> list[str]:
        return logged_prompts(self.log)

    def errors(self) -> list[ProtocolError]:
        return [e.error for e in self.events if isinstance(e, MalformedMessage)]

    def messages(self) -> list[Any]:
        return [e.message for e in self.events if isinstance(e, MessageFound)]


@asynccontextmanager
async def hostile(tmp_path: Path, script: Any, *, cols: int = 100) -> AsyncIterator[Hostile]:
    (tmp_path / "script.json").write_text(json.dumps(script))
    argv = [
        sys.executable,
        "-m",
        "tests.support.hostile_agent",
        "--script",
        str(tmp_path / "script.json"),
        "--log",
        str(tmp_path / "prompts.jsonl"),
    ]
    session = AgentSession("hostile", argv, GENERIC, cols=cols, rows=30)
    agent = Hostile(session, tmp_path / "prompts.jsonl")

    def record(_session: AgentSession, event: SessionEvent) -> None:
        if isinstance(event, MessageFound | MalformedMessage):
            agent.events.append(event)

    session.add_listener(record)
    session.start()
    try:
        await session.wait_ready(TURN)
        yield agent
    finally:
        await session.terminate()


def kinds(errors: list[ProtocolError]) -> list[str]:
    return [error.kind for error in errors]


async def answered(agent: Hostile, prompt: str = "ping") -> None:
    """The session still works: a prompt goes in and the turn ends at the prompt."""
    result = await agent.session.execute(prompt, timeout=TURN)
    assert result.state == AgentState.READY
    assert agent.prompts()[-1] == prompt


# -- long lines and floods ----------------------------------------------------------------------


async def test_a_10_mb_line_without_newline_is_an_oversize_error_and_the_session_goes_on(
    tmp_path: Path,
) -> None:
    # a question whose one line is 10 MB: reported as over the 64 KiB payload limit, never sent
    script = [{"raw": "[ASK_USER] " + "x" * (10 * 1024 * 1024) + "\r\n"}, "ok"]
    async with hostile(tmp_path, script) as agent:
        result = await agent.session.execute("go", timeout=120)
        assert result.state == AgentState.READY
        assert kinds(agent.errors()) == ["oversize"]
        assert not [m for m in agent.messages() if isinstance(m, AskUser)]
        assert agent.session.observer.reader._final_lines._size == 0  # nothing left accumulated
        await answered(agent)


async def test_a_marker_flood_yields_a_bounded_number_of_messages_and_one_too_many_error(
    tmp_path: Path,
) -> None:
    script = [{"raw": "● [STEP_COMPLETE] again\r\n", "repeat": 5000}]
    async with hostile(tmp_path, script) as agent:
        result = await agent.session.execute("go", timeout=120)
        assert result.state == AgentState.READY
        steps = [m for m in agent.messages() if isinstance(m, StepComplete)]
        assert len(steps) == MAX_MESSAGES_PER_TURN
        assert kinds(agent.errors()) == ["too_many"]
        assert len(result.messages) == MAX_MESSAGES_PER_TURN
        await answered(agent)  # the next turn has its own budget and works


async def test_a_flood_of_lines_with_a_message_at_its_end_is_read(tmp_path: Path) -> None:
    line = "● lorem ipsum dolor sit amet " * 3 + "\r\n"
    script = [{"raw": line * 20000 + "● [STEP_COMPLETE] after the flood\r\n"}]
    async with hostile(tmp_path, script) as agent:
        await agent.session.execute("go", timeout=120)
        assert agent.messages() == [StepComplete(text="after the flood")]
        assert agent.errors() == []


# -- generic screens: clear, redraws, scroll regions, unclosed blocks ---------------------------


async def test_ask_user_printed_right_after_clear_is_read(tmp_path: Path) -> None:
    # the screen was full of earlier output; `clear` moves the cursor back to the top
    script = [
        {"raw": "".join(f"● earlier line {i}\r\n" for i in range(25))},
        {"raw": "\x1b[H\x1b[2J\x1b[3J● [ASK_USER] Is this ok after a clear?\r\n"},
    ]
    async with hostile(tmp_path, script) as agent:
        await answered(agent, "first")
        result = await agent.session.execute("second", timeout=TURN)
        assert result.state == AgentState.WAITING_INPUT
        assert agent.messages() == [AskUser(question="Is this ok after a clear?")]


async def test_a_cursor_home_redraw_with_new_text_is_read_and_an_identical_one_is_not(
    tmp_path: Path,
) -> None:
    def frame(*rows: str) -> str:  # a TUI-style redraw from the top-left corner
        return "\x1b[H" + "".join(f"● {row}\x1b[K\r\n" for row in rows) + "\x1b[J"

    script = [
        {"raw": "\x1b[2J" + frame("status: building", "[STEP_COMPLETE] compiled")},
        {"raw": frame("status: building", "[STEP_COMPLETE] compiled")},  # nothing new
        {"raw": frame("status: done", "[SEMO:DONE] shipped")},
    ]
    async with hostile(tmp_path, script) as agent:
        for prompt in ("one", "two", "three"):
            await agent.session.execute(prompt, timeout=TURN)
        assert [m.kind for m in agent.messages()] == ["step_complete", "done"]


async def test_lines_scrolling_inside_a_scroll_region_are_read_once(tmp_path: Path) -> None:
    # a status bar on the last row, output scrolling in rows 1-10 (nothing enters scrollback)
    body = "".join(f"● line {i}\r\n" for i in range(30))
    script = [
        {
            "raw": "\x1b[2J\x1b[30;1Hstatus bar\x1b[1;10r\x1b[10;1H"
            + body
            + "● [STEP_COMPLETE] inside the region\r\n"
            + "● after\r\n"
            + "\x1b[r\x1b[11;1H"
        },
    ]
    async with hostile(tmp_path, script) as agent:
        await agent.session.execute("go", timeout=TURN)
        assert agent.messages() == [StepComplete(text="inside the region")]


async def test_an_unclosed_block_at_turn_end_is_a_missing_close_error_not_pending(
    tmp_path: Path,
) -> None:
    script = [{"text": '[INVOKE:BE]\n{"task": "never closed"}'}, "fine"]
    async with hostile(tmp_path, script) as agent:
        result = await agent.session.execute("go", timeout=TURN)
        assert result.state == AgentState.READY
        assert kinds(agent.errors()) == ["missing_close"]
        assert agent.errors()[0].tag == "[INVOKE:BE]"
        assert agent.messages() == []
        # the next turn is not swallowed into the old block
        await agent.session.execute("again", timeout=TURN)
        assert agent.prompts() == ["go", "again"]


async def test_a_lone_closing_tag_is_reported_once_and_nothing_is_typed(tmp_path: Path) -> None:
    script = [{"text": "[/ASK_USER]"}]
    async with hostile(tmp_path, script) as agent:
        await agent.session.execute("go", timeout=TURN)
        assert kinds(agent.errors()) == ["unexpected_close"]
        assert agent.prompts() == ["go"]  # the observer reports; it types nothing


# -- what semo types into an agent ---------------------------------------------------------------


async def test_a_rebuilt_paste_end_marker_cannot_escape_the_paste(tmp_path: Path) -> None:
    # the agent enables bracketed paste; the task nests the end marker so that removing it
    # once would rebuild it, then carries Enter, Shift+Tab and a C1 CSI
    script = {"start": [{"raw": "\x1b[?2004h"}], "replies": ["ok"]}
    task = "do \x1b[20\x1b[201~1~ this\r!rm -rf x\x1b[Z\x9b201~ end"
    async with hostile(tmp_path, script) as agent:
        await agent.session.execute(task, timeout=TURN)
        # a cooked-mode agent reads the pasted newline as a line end; every byte it got is
        # the paste's text, and the only escape sequences are the paste's own two brackets
        typed = "\n".join(agent.prompts()[:2])
        assert typed == "\x1b[200~do [20[201~1~ this\n!rm -rf x[Z201~ end\x1b[201~"


async def test_control_characters_never_reach_an_agent_without_bracketed_paste(
    tmp_path: Path,
) -> None:
    script = ["ok"]
    async with hostile(tmp_path, script) as agent:
        await agent.session.execute("a\x1b[201~b\rc\x03d\x7fe\x9bf\tg", timeout=TURN)
        assert agent.prompts() == ["a[201~b cdef g"]  # controls removed, tab made a space


async def test_terminal_query_replies_are_not_typed_into_a_cooked_mode_agent(
    tmp_path: Path,
) -> None:
    # window size, device attributes, cursor position: printed while the agent reads lines
    script = [{"raw": "\x1b[18t\x1b[c\x1b[6n\x1b[>c"}, "fine"]
    async with hostile(tmp_path, script) as agent:
        result = await agent.session.execute("query", timeout=TURN)
        assert result.state == AgentState.READY  # not stuck in executing
        await agent.session.execute("next", timeout=TURN)
        assert agent.prompts() == ["query", "next"]  # no reply glued to the next prompt


async def test_a_raw_mode_program_still_gets_its_query_answered(tmp_path: Path) -> None:
    script = tmp_path / "ask.py"
    script.write_text(
        "import os,sys,termios,tty\n"
        "fd=0; old=termios.tcgetattr(fd); tty.setraw(fd)\n"
        "os.write(1,b'\\x1b[6n'); r=b''\n"
        "while not r.endswith(b'R'): r+=os.read(fd,1)\n"
        "termios.tcsetattr(fd,termios.TCSADRAIN,old)\n"
        "print('reply', r[1:].decode()); print('$ ', end='', flush=True); sys.stdin.readline()\n"
    )
    session = AgentSession("raw", [sys.executable, str(script)], GENERIC, cols=80, rows=10)
    session.start()
    try:
        await eventually(lambda: any(r.startswith("reply [") for r in session.screen_rows()))
        assert "reply [1;1R" in session.screen_rows()
    finally:
        await session.terminate()
