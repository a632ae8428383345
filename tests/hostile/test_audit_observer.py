"""Audit of issue 12: gaps found in the session's delivery queue (engine/sessions/agent_session.py,
OBSERVER's file, still being worked on when the audit ran). Each test reproduces the attack on
a real program in a real PTY (they were strict xfails until the queue was fixed).

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

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from semo.engine.agents.generic import GENERIC
from semo.engine.protocol.state import AgentState
from semo.engine.sessions.agent_session import AgentSession, SessionEnded
from semo.engine.sessions.manager import SessionManager
from semo.engine.store.models import Agent
from tests.support.script_agent import logged_prompts
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


async def test_an_answer_is_typed_though_a_prompt_was_queued_while_the_agent_waited(
    manager: SessionManager, tmp_path: Path
) -> None:
    agent, log = _scripted_agent(tmp_path, [{"match": "go", "text": "[ASK_USER] which one?"}])
    session = await _asked(manager, agent, tmp_path)
    assert session.state == AgentState.WAITING_INPUT
    session.post("a result another agent delivered")  # waits: the agent waits for input
    session.post("the operator's answer", kind="answer")
    await eventually(lambda: "the operator's answer" in _typed(log), TIMEOUT)
    await eventually(lambda: "a result another agent delivered" in _typed(log), TIMEOUT)


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
    assert isinstance(delivered.exception(), SessionEnded)  # a clear failure for its caller
    await manager.terminate(session.session_id, reason="test over")  # raised TerminalClosedError
    assert session.ended


def _scripted_agent(tmp_path: Path, acts: list[dict[str, object]]) -> tuple[Agent, Path]:
    """A generic hostile agent playing `acts`, and the file it logs the prompts it got to."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps(acts))
    log = tmp_path / "prompts.jsonl"
    command = [sys.executable, "-m", "tests.support.hostile_agent", "--script", str(script)]
    return Agent(office_id="o", name="A", role="A", command=[*command, "--log", str(log)]), log


def _asking_agent(tmp_path: Path, replies: int) -> tuple[Agent, Path]:
    """A generic agent that asks the operator on `go` and answers anything else with `ok`."""
    acts = [{"match": "go", "text": "[ASK_USER] which one?"}] + [{"text": "ok"}] * replies
    return _scripted_agent(tmp_path, acts)


async def _asked(manager: SessionManager, agent: Agent, tmp_path: Path) -> AgentSession:
    """`agent`'s session, ready, after it was given `go`."""
    session = await manager.create(agent, working_dir=tmp_path, profile=GENERIC)
    await session.wait_ready(TIMEOUT)
    await session.execute("go", timeout=TIMEOUT)
    return session


def _typed(log: Path) -> list[str]:
    return logged_prompts(log)


async def test_an_answer_overtakes_queued_prompts_which_keep_their_order(
    manager: SessionManager, tmp_path: Path
) -> None:
    """Two prompts (another agent's result, semo's feedback) queued while the agent waits for
    the operator: the answer is typed first, then both prompts in the order they came, each
    once the agent is ready again."""
    agent, log = _asking_agent(tmp_path, replies=3)
    session = await _asked(manager, agent, tmp_path)
    assert session.state == AgentState.WAITING_INPUT
    first = session.submit("first queued prompt")
    second = session.submit("second queued prompt")
    answer = session.submit("the operator's answer", kind="answer")
    await asyncio.wait_for(asyncio.gather(first, second, answer), TIMEOUT)
    # a prompt is delivered once typed; the agent logs it when it has read it
    await eventually(lambda: len(_typed(log)) >= 4, TIMEOUT)
    assert _typed(log) == [
        "go",
        "the operator's answer",
        "first queued prompt",
        "second queued prompt",
    ]
    assert answer.result().prompt_id > first.result().prompt_id  # it did overtake them


async def test_a_prompt_withdrawn_while_the_agent_waits_is_never_typed(
    manager: SessionManager, tmp_path: Path
) -> None:
    """A caller gives up on its prompt while the agent waits for the operator: the operator's
    answer queued behind it is typed, and the prompt leaves the queue, never typed (here the
    agent stays busy with the answer, with no new prompt, until the caller gave up)."""
    acts: list[dict[str, object]] = [
        {"match": "go", "text": "[ASK_USER] which one?"},
        {"match": "answer", "text": "working on it", "prompt": False},
    ]
    agent, log = _scripted_agent(tmp_path, acts)
    session = await _asked(manager, agent, tmp_path)
    given_up = asyncio.create_task(session.deliver("a prompt nobody waits for", timeout=0.5))
    await asyncio.sleep(0)  # queued first
    await session.deliver("the operator's answer", kind="answer", timeout=TIMEOUT)
    with pytest.raises(TimeoutError):
        await given_up
    assert session.queued == 0
    await eventually(lambda: "the operator's answer" in _typed(log), TIMEOUT)
    assert _typed(log) == ["go", "the operator's answer"]
