"""Hostile: an agent prints protocol blocks with long JSON lines in small pieces while its PTY
is resized again and again (two consoles of different sizes taking turns, audit15 #1). Each
resize reflows the screen and its scrollback; every message must still be read exactly once,
whole, and nothing malformed may appear that the agent never wrote.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from semo.engine.agents.generic import GENERIC
from semo.engine.protocol.observer import MalformedMessage, MessageFound
from semo.engine.sessions.agent_session import AgentSession, SessionEvent
from tests.support.waiting import eventually

SOURCE = Path(__file__).resolve().parents[2]
TIMEOUT = 15.0
SIZES = [(30, 10), (157, 40), (80, 24), (23, 60), (203, 12), (47, 33)]


def blocks(n: int) -> tuple[str, list[tuple[str, str]]]:
    question = {
        "type": "choice",
        "question": f"Round {n}: which of the three storage engines should the accounts "
        "service use, given the numbers the load test printed above?",
        "options": ["postgres with a pool of 20", "sqlite in WAL mode", "none: in memory"],
    }
    task = {
        "task": f"Round {n}: add the /health endpoint with the build id, the commit and "
        "the uptime, and a test that starts the app on a free port",
        "context": {"files": ["api/routes.py", "tests/api/test_health.py"], "round": n},
    }
    result = {
        "invocation_id": f"inv-{n}",
        "summary": f"Round {n}: /health is in api/routes.py and its test passes; the suite "
        "passes too (312 tests) and the linter found nothing to say",
    }
    text = (
        f"● round {n}: some prose before the messages\r\n"
        f"[ASK_USER]\r\n{json.dumps(question)}\r\n[/ASK_USER]\r\n"
        f"[INVOKE:BE]\r\n{json.dumps(task)}\r\n[/INVOKE]\r\n"
        f"[DELIVER_RESULT:FE]\r\n{json.dumps(result)}\r\n[/DELIVER_RESULT]\r\n"
        f"[STEP_COMPLETE] round {n}\r\n"
    )
    expected = [
        ("ask_user", question["question"]),
        ("invoke", task["task"]),
        ("deliver_result", result["summary"]),
        ("step_complete", f"round {n}"),
    ]
    return text, expected


def text_of(event: MessageFound) -> tuple[str, str]:
    message = event.message
    for field in ("question", "task", "summary", "text"):
        value = getattr(message, field, None)
        if value is not None:
            return message.kind, value
    return message.kind, ""


async def test_blocks_printed_in_pieces_while_the_pty_is_resized_are_read_once(
    tmp_path: Path,
) -> None:
    rounds = 6
    acts, expected = [], []
    for n in range(rounds):
        text, messages = blocks(n)
        expected += messages
        # pieces of 23 characters: a resize lands inside lines, inside tags, inside JSON
        acts += [{"raw": text[i : i + 23], "delay": 0.004} for i in range(0, len(text), 23)]
    acts.append({"raw": "[STEP_COMPLETE] all printed\r\n"})
    expected.append(("step_complete", "all printed"))
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"start": acts, "replies": []}))
    argv = [sys.executable, "-m", "tests.support.hostile_agent", "--script", str(script)]
    argv += ["--log", str(tmp_path / "prompts.jsonl")]
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(SOURCE)}
    session = AgentSession("hostile", argv, GENERIC, env=env, cols=80, rows=24)
    found: list[tuple[str, str]] = []
    malformed: list[str] = []

    def record(_session: AgentSession, event: SessionEvent) -> None:
        if isinstance(event, MessageFound):
            found.append(text_of(event))
        elif isinstance(event, MalformedMessage):
            malformed.append(f"{event.error.kind} {event.error.tag}: {event.error.excerpt[:60]}")

    session.add_listener(record)
    session.start()
    try:
        flips = 0
        while ("step_complete", "all printed") not in found and flips < 1500:
            session.resize(*SIZES[flips % len(SIZES)])
            flips += 1
            await asyncio.sleep(0.003)
        await eventually(lambda: ("step_complete", "all printed") in found, TIMEOUT)
        for size in SIZES:  # and after: nothing read again
            session.resize(*size)
        session.write("are you there\r")
        await eventually(lambda: "(script exhausted)" in "".join(session.screen_rows()), TIMEOUT)
        await asyncio.sleep(0.05)
        await eventually(lambda: session._frame is None, TIMEOUT)
        assert malformed == []
        assert found == expected
    finally:
        await session.terminate()
