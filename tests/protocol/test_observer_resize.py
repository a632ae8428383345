"""A resize never makes, repeats, splits or loses a protocol message (audit15 #1).

Two consoles of different sizes flip a session's PTY size; the screen is reflowed with its
scrollback (rows re-wrapped and moved). The observer read protocol blocks the agent printed
before again, or cut a long JSON line where it now wrapped: `[/ASK_USER] closes nothing`,
`bad_json ... Extra data`, the question asked twice and the operator's answer lost. Every test
runs a real program in a real PTY through `AgentSession.resize` (what the control server calls).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from semo.engine.agents.claude import CLAUDE
from semo.engine.agents.generic import GENERIC
from semo.engine.agents.replay import replay
from semo.engine.protocol.observer import MalformedMessage, MessageFound
from semo.engine.sessions.agent_session import AgentSession, SessionEvent
from tests.support.waiting import eventually

SOURCE = Path(__file__).resolve().parents[2]
TIMEOUT = 20.0

QUESTION = {
    "type": "choice",
    "question": "Which database should the signup page keep its accounts in, given that the "
    "load test showed a thousand sign-ups a minute at peak?",
    "options": ["postgres with a connection pool", "sqlite in WAL mode", "none: in memory"],
}
TASK = {
    "task": "Add a GET /health endpoint that returns 200, the build id and the commit, with "
    "a test in tests/api that starts the app on a free port",
    "context": {"file": "api/routes.py", "why": "the load balancer probes it every 5 s"},
}
RESULT = {
    "invocation_id": "inv-42",
    "summary": "GET /health added in api/routes.py with its test in tests/api/test_health.py; "
    "the whole suite passes (312 tests) and the linter is clean",
}
BLOCKS = (
    f"[ASK_USER]\r\n{json.dumps(QUESTION)}\r\n[/ASK_USER]\r\n"
    f"[INVOKE:BE]\r\n{json.dumps(TASK)}\r\n[/INVOKE]\r\n"
    f"[DELIVER_RESULT:FE]\r\n{json.dumps(RESULT)}\r\n[/DELIVER_RESULT]\r\n"
)
EXPECTED = [
    ("ask_user", QUESTION["question"]),
    ("invoke", TASK["task"]),
    ("deliver_result", RESULT["summary"]),
]
#: narrower (the JSON lines wrap over several rows), wider, shorter, taller, and back
SIZES = [(46, 24), (160, 45), (80, 24), (31, 9), (211, 60), (80, 24), (23, 40), (120, 12)]


class Recorder:
    def __init__(self) -> None:
        self.found: list[MessageFound] = []
        self.malformed: list[MalformedMessage] = []

    def __call__(self, _session: AgentSession, event: SessionEvent) -> None:
        if isinstance(event, MessageFound):
            self.found.append(event)
        elif isinstance(event, MalformedMessage):
            self.malformed.append(event)

    def messages(self) -> list[tuple[str, str]]:
        out = []
        for event in self.found:
            message = event.message
            text = getattr(message, "question", None) or getattr(message, "task", None)
            text = text or getattr(message, "summary", None) or getattr(message, "text", "")
            out.append((message.kind, text))
        return out

    def problems(self) -> list[str]:
        return [f"{e.error.kind} {e.error.tag}: {e.error.detail[:80]}" for e in self.malformed]


def env_for(tmp_path: Path) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(SOURCE)}


def hostile(tmp_path: Path, script: object, record: Path | None = None) -> AgentSession:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    argv = [sys.executable, "-m", "tests.support.hostile_agent", "--script", str(path)]
    argv += ["--log", str(tmp_path / "prompts.jsonl")]
    env = env_for(tmp_path)
    return AgentSession("agent", argv, GENERIC, env=env, cols=80, rows=24, record=record)


@pytest.fixture
async def running() -> AsyncIterator[list[AgentSession]]:
    sessions: list[AgentSession] = []
    yield sessions
    for session in sessions:
        await session.terminate()


async def read_out(session: AgentSession) -> None:
    """Until the observer has read everything drawn so far (its frame ran)."""
    await asyncio.sleep(0.05)
    await eventually(lambda: session._frame is None, TIMEOUT)


async def test_blocks_printed_before_resizes_are_read_once(
    tmp_path: Path, running: list[AgentSession]
) -> None:
    replies = [{"match": f"ping{n}", "raw": f"[STEP_COMPLETE] pong{n}\r\n"} for n in range(9)]
    cast = tmp_path / "agent.cast"
    session = hostile(tmp_path, {"start": [{"raw": BLOCKS}], "replies": replies}, cast)
    seen = Recorder()
    session.add_listener(seen)
    running.append(session)
    session.start()
    await eventually(lambda: len(seen.found) >= 3, TIMEOUT)
    await read_out(session)
    for n, size in enumerate(SIZES):
        session.resize(*size)
        await read_out(session)
        session.write(f"ping{n}\r")  # output after each resize: what was read is not read again
        await eventually(lambda n=n: ("step_complete", f"pong{n}") in seen.messages(), TIMEOUT)
        await read_out(session)
    for size in SIZES:  # and resizes with no output between them
        session.resize(*size)
    session.write("ping8\r")
    await eventually(lambda: ("step_complete", "pong8") in seen.messages(), TIMEOUT)
    await read_out(session)
    pongs = [("step_complete", f"pong{n}") for n in range(9)]
    assert seen.problems() == []
    assert seen.messages() == [*EXPECTED, *pongs]
    # `semo parse` of the session's recording (its resizes included) reads the same
    await session.terminate()
    replayed = Recorder()
    for event in replay(cast).events:
        replayed(session, event)  # type: ignore[arg-type]
    assert replayed.problems() == []
    assert replayed.messages() == [*EXPECTED, *pongs]


async def test_lines_being_printed_during_resizes_are_read_whole(
    tmp_path: Path, running: list[AgentSession]
) -> None:
    # the agent prints the first half of its long lines at a narrow width, the PTY widens and
    # narrows before the lines are final, then it prints the rest: each line is read once, whole
    cut = BLOCKS.index("linter")  # inside the result's JSON line, after two whole blocks
    start = [{"raw": BLOCKS[:cut]}, {"raw": BLOCKS[cut:], "delay": 2.0}]
    session = hostile(tmp_path, {"start": start, "replies": []})
    session.terminal.resize(30, 24)  # before it starts: the agent prints at 30 columns
    seen = Recorder()
    session.add_listener(seen)
    running.append(session)
    session.start()
    await eventually(lambda: "312 tests" in "".join(session.screen_rows()), TIMEOUT)
    await read_out(session)
    for size in [(150, 40), (25, 10), (97, 30)]:
        session.resize(*size)
        await read_out(session)
    await eventually(lambda: len(seen.found) + len(seen.malformed) >= 3, TIMEOUT)
    await eventually(lambda: "❯" in "".join(session.screen_rows()), TIMEOUT)
    await read_out(session)
    assert seen.problems() == []
    assert seen.messages() == EXPECTED


async def test_bash_agent_blocks_survive_resizes(
    tmp_path: Path, running: list[AgentSession]
) -> None:
    # the audit's bash office: a bash agent that printed an [ASK_USER] choice block, then two
    # consoles of different sizes attached and flipped its size
    blocks = tmp_path / "blocks.txt"
    blocks.write_text(BLOCKS.replace("\r\n", "\n"))
    env = env_for(tmp_path) | {"PS1": "$ ", "TERM": "xterm"}
    argv = ["bash", "--norc", "--noprofile", "-i"]
    session = AgentSession("bash", argv, GENERIC, env=env, cols=80, rows=24)
    seen = Recorder()
    session.add_listener(seen)
    running.append(session)
    session.start()
    await session.wait_ready(TIMEOUT)
    session.write(f"cat {blocks}\r")
    await eventually(lambda: len(seen.found) >= 3, TIMEOUT)
    await read_out(session)
    for n, size in enumerate(SIZES):
        session.resize(*size)
        await read_out(session)
        session.write(f"echo '[STEP_COMPLETE]' pong{n}\r")
        await eventually(lambda n=n: ("step_complete", f"pong{n}") in seen.messages(), TIMEOUT)
        await read_out(session)
    assert seen.problems() == []
    pongs = [("step_complete", f"pong{n}") for n in range(len(SIZES))]
    assert seen.messages() == [*EXPECTED, *pongs]


# -- Claude Code read from the screen (no hooks) ----------------------------------------------

CLAUDE_LIKE = r"""
import json, os, signal, sys, time

TURN = json.loads(sys.argv[1])
REDRAW = sys.argv[2] == "redraw"


def wrap(text, width):
    rows, row = [], ""
    for word in text.split(" "):
        if row and len(row) + 1 + len(word) > width:
            rows.append(row)
            row = word
        else:
            row = f"{row} {word}" if row else word
    return [*rows, row]


def draw(*_):
    width = os.get_terminal_size(1).columns
    out = ["\x1b[2J\x1b[3J\x1b[H"] if _ else []
    out.append("\x1b[48;5;237m\u276f build the health check\x1b[K\x1b[0m\r\n\r\n")
    for index, line in enumerate(TURN):
        for number, row in enumerate(wrap(line, width - 2)):
            gutter = "\u25cf " if index == 0 and number == 0 else "  "
            out.append(gutter + row + "\r\n")
    out.append(f"\r\n\u273b Baked for 2s (w{width})\r\n\r\n")
    out.append("\u2500" * width + "\r\n\u276f \r\n" + "\u2500" * width + "\r\n")
    os.write(1, "".join(out).encode())


def status(*_):
    os.write(1, b"\x1b[?25h")  # a TUI that repaints only its status: output, nothing drawn


signal.signal(signal.SIGWINCH, draw if REDRAW else status)
draw()
while True:
    time.sleep(1)
"""

CLAUDE_TURN = [
    "Here is the task for the backend.",
    "[INVOKE:BE]",
    json.dumps(TASK),
    "[/INVOKE]",
    "[SEMO:DONE] health check handed to BE",
]


@pytest.mark.parametrize("redraw", ["static", "redraw"])
async def test_claude_screen_turn_is_reported_once_across_resizes(
    tmp_path: Path, running: list[AgentSession], redraw: str
) -> None:
    # without hooks a Claude Code turn is read from the screen once its end line shows; a
    # resize re-wraps its rows (and Claude Code may draw it again at the new width): the
    # same turn, not a new one, and never a JSON line cut where the terminal wrapped it
    argv = [sys.executable, "-c", CLAUDE_LIKE, json.dumps(CLAUDE_TURN), redraw]
    session = AgentSession("claude", argv, CLAUDE, env=env_for(tmp_path), cols=80, rows=24)
    seen = Recorder()
    session.add_listener(seen)
    running.append(session)
    session.start()
    await eventually(lambda: len(seen.found) >= 2, TIMEOUT)
    await read_out(session)
    for size in SIZES:
        session.resize(*size)
        await read_out(session)
        if redraw == "redraw":  # until it drew the turn again at the new width
            drawn = f"(w{size[0]})"
            await eventually(lambda d=drawn: d in "".join(session.screen_rows()), TIMEOUT)
            await read_out(session)
    assert seen.problems() == []
    assert seen.messages() == [
        ("invoke", TASK["task"]),
        ("done", "health check handed to BE"),
    ]


async def test_demo_agent_answer_while_two_consoles_flip_its_size(
    tmp_path: Path, running: list[AgentSession]
) -> None:
    # audit15 #1: the demo FE, with some history, asks which database; an 80x24 and a 160x45
    # console take turns sizing its pane (46x20, 101x40) while the operator answers and FE
    # works: the question is asked once, FE invokes BE, nothing is malformed
    argv = [sys.executable, "-m", "semo.engine.demo.agent", "--role", "FE", "--steps", "2"]
    argv += ["--delay", "0.05"]
    session = AgentSession("FE", argv, GENERIC, env=env_for(tmp_path), cols=120, rows=40)
    seen = Recorder()
    session.add_listener(seen)
    running.append(session)
    session.start()
    await session.wait_ready(TIMEOUT)
    for n in range(3):
        session.write(f"[semo] Your task {n}: tidy the README\r")
        await eventually(lambda n=n: [m[0] for m in seen.messages()].count("done") > n, TIMEOUT)
    session.write("build the signup page\r")
    await eventually(lambda: "ask_user" in [m[0] for m in seen.messages()], TIMEOUT)
    await read_out(session)
    session.resize(101, 40)
    session.write("[semo] Answer to your question q-1: sqlite\r")
    sizes = [(46, 20), (101, 40)]
    flips = 0
    while not any(m[0] == "invoke" for m in seen.messages()) and flips < 600:
        session.resize(*sizes[flips % 2])
        flips += 1
        await asyncio.sleep(0.01)
    await eventually(lambda: any(m[0] == "invoke" for m in seen.messages()), TIMEOUT)
    await read_out(session)
    assert seen.problems() == []
    kinds = [m[0] for m in seen.messages()]
    assert kinds.count("ask_user") == 1
    assert kinds.count("done") == 3
    assert seen.messages()[-1] == ("invoke", "Add the /login API on sqlite")
