"""Audit of issue 12: gaps found in the session's delivery queue (engine/sessions/agent_session.py,
OBSERVER's file, still being worked on when the audit ran). Each test reproduces the attack on
a real program in a real PTY and is marked xfail(strict=True) until the queue is fixed: remove
the mark with the fix.

- An agent waiting for the operator's answer (ASK_USER pending) gets a prompt queued (another
  agent's result, semo's feedback, a job's task); the operator's answer queues behind it and
  neither is ever typed (the queue only looks at its head, and a prompt is not typed while the
  agent waits for input): the session is stuck in waiting_input for good. Any agent can do this
  to another by delivering it a result while it waits.
- An agent that exits while a prompt is being typed makes the delivery task die with
  TerminalClosedError; ending the session afterwards raises that error (a traceback in the
  engine's log, a terminate command that fails).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.protocol.state import AgentState
from engine.sessions.manager import SessionManager
from engine.sessions.profiles import GENERIC
from engine.store.models import Agent
from tests.support.waiting import eventually

SOURCE = Path(__file__).resolve().parents[2]
TIMEOUT = 10.0

EXIT_WHILE_TYPED = """
import os, sys, time, tty
tty.setraw(0)
os.write(1, "ready\\r\\n\\u276f ".encode())
os.read(0, 1)
time.sleep(0.05)
sys.exit(0)
"""


@pytest.fixture
async def manager(tmp_path: Path) -> AsyncIterator[SessionManager]:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(SOURCE)}
    async with SessionManager(agent_env=env, runtime_dir=tmp_path / "run") as manager:
        yield manager


@pytest.mark.xfail(strict=True, reason="agent_session: an answer waits behind a queued prompt")
async def test_an_answer_is_typed_though_a_prompt_was_queued_while_the_agent_waited(
    manager: SessionManager, tmp_path: Path
) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"match": "go", "text": "[ASK_USER] which one?"}]))
    log = tmp_path / "prompts.jsonl"
    command = [sys.executable, "-m", "tests.support.hostile_agent", "--script", str(script)]
    agent = Agent(office_id="o", name="A", role="A", command=[*command, "--log", str(log)])
    session = await manager.create(agent, working_dir=tmp_path, profile=GENERIC)
    await session.wait_ready(TIMEOUT)
    await session.execute("go", timeout=TIMEOUT)
    assert session.state == AgentState.WAITING_INPUT
    session.post("a result another agent delivered")  # waits: the agent waits for input
    session.post("the operator's answer", kind="answer")

    def typed() -> list[str]:
        return [json.loads(line) for line in log.read_text().splitlines()]

    await eventually(lambda: "the operator's answer" in typed(), TIMEOUT)
    await eventually(lambda: "a result another agent delivered" in typed(), TIMEOUT)


@pytest.mark.xfail(strict=True, reason="agent_session: TerminalClosedError escapes _deliver_loop")
async def test_an_agent_that_exits_while_a_prompt_is_typed_ends_cleanly(
    manager: SessionManager, tmp_path: Path
) -> None:
    program = tmp_path / "exit_while_typed.py"
    program.write_text(EXIT_WHILE_TYPED)
    agent = Agent(office_id="o", name="X", role="X", command=[sys.executable, str(program)])
    session = await manager.create(agent, working_dir=tmp_path, profile=GENERIC)
    await session.wait_ready(TIMEOUT)
    delivered = session.submit("hello " * 50)
    # the agent is gone (the prompt failed) and the delivery got past its typing
    await eventually(lambda: delivered.done() and session._typing is None, TIMEOUT)
    await manager.terminate(session.session_id, reason="test over")  # raised TerminalClosedError
    assert session.ended
