"""A real bash in a real PTY as a generic agent: its default prompt and the operator's draft."""

from __future__ import annotations

import os
import time

from semo.engine.agents.generic import GENERIC
from semo.engine.protocol.state import AgentState, StateChange
from semo.engine.sessions.agent_session import AgentSession, SessionEvent
from tests.support.waiting import eventually

TIMEOUT = 15.0
BASH = ["bash", "--norc", "--noprofile", "-i"]


def bash_session(ps1: str | None) -> AgentSession:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp", "TERM": "xterm"}
    if ps1 is not None:
        env["PS1"] = ps1
    return AgentSession("bash", BASH, GENERIC, env=env, cols=80, rows=10)


def cursor_row(session: AgentSession) -> str:
    screen = session.terminal.screen
    return screen.row_line(screen.cursor.y).text


async def test_bash_default_prompt_is_a_prompt() -> None:
    # no PS1: bash shows `bash-5.2$ ` (or `#` as root); the engine waited for it in vain before
    session = bash_session(None)
    session.start()
    try:
        await session.wait_ready(TIMEOUT)
        assert cursor_row(session).rstrip().startswith(("bash-", "sh-"))
    finally:
        await session.terminate()


async def test_a_draft_typed_into_bash_keeps_it_ready_and_enter_runs_it() -> None:
    session = bash_session(None)
    changes: list[StateChange] = []

    def record(_session: AgentSession, event: SessionEvent) -> None:
        if isinstance(event, StateChange):
            changes.append(event)

    session.add_listener(record)
    session.start()
    try:
        await session.wait_ready(TIMEOUT)
        session.write("echo draft-$((6*7))")
        await eventually(lambda: "echo draft-$((6*7))" in cursor_row(session), TIMEOUT)
        await eventually(lambda: session._frame is None, TIMEOUT)  # the observer read it
        assert session.state == AgentState.READY
        assert not [c for c in changes if c.state == AgentState.EXECUTING]
        entered = time.monotonic()
        session.write("\r")
        await eventually(lambda: "draft-42" in "\n".join(session.screen_rows()), TIMEOUT)
        await session.wait_ready(TIMEOUT)
        # the draft never made it look busy; Enter and the output may (if seen between frames)
        assert all(c.at >= entered for c in changes if c.state == AgentState.EXECUTING)
    finally:
        await session.terminate()
