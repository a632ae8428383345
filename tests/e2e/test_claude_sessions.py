"""SessionManager driving the real Claude Code CLI (offline, scripted Messages API).

Checked: a session created by the manager reaches its prompt with no human (onboarding and
the worktree's trust are pre-accepted by the manager in the agent's HOME); a prompt is
delivered (bracketed paste + Enter, confirmed by UserPromptSubmit) and its reply observed
through the Stop hook; the persona and protocol the manager injected reach the model; hooks
drive the states; a prompt sent while the agent is busy, or while Claude Code shows a
permission dialog, is delivered once, after the turn ends; terminate ends the CLI.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from semo.engine.agents.claude.trust import project_key
from semo.engine.protocol.messages import StepComplete
from semo.engine.protocol.state import AgentState, StateChange
from semo.engine.sessions.agent_session import AgentSession
from semo.engine.sessions.manager import SessionManager
from semo.engine.store.models import Agent
from tests.support.claude_home import claude_env
from tests.support.claude_screen import wait_screen
from tests.support.scripted_api import ScriptedMessagesAPI, ScriptedReply, ToolUse
from tests.support.temp_dirs import short_temp_dir

pytestmark = pytest.mark.claude

STARTUP = 30.0
TURN = 30.0
PERSONA_MARKER = "persona-word-93be1c"

BE = Agent(
    office_id="office-1",
    name="Backend Bob",
    role="BE",
    prompt=f"You build the HTTP API. Your secret word is {PERSONA_MARKER}.",
)
FE = Agent(office_id="office-1", name="Frontend Fran", role="FE")


@pytest.fixture
def runtime_dir() -> Iterator[Path]:
    with short_temp_dir("semo-e2e-") as path:  # short: AF_UNIX path limit
        yield path


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    path = (tmp_path / "work").resolve()
    path.mkdir()
    return path


@asynccontextmanager
async def claude_session(
    tmp_path: Path, worktree: Path, runtime_dir: Path, api: ScriptedMessagesAPI
) -> AsyncIterator[tuple[SessionManager, AgentSession, list[StateChange]]]:
    # The HOME's .claude.json trusts another folder only: trusting `worktree` is the manager's job.
    env = claude_env(tmp_path / "elsewhere", tmp_path / "home", api)
    async with SessionManager(agent_env=env, runtime_dir=runtime_dir) as manager:
        session = await manager.create(BE, working_dir=worktree, peers=[BE, FE], cols=100, rows=30)
        states: list[StateChange] = []
        session.add_listener(lambda _s, e: states.append(e) if isinstance(e, StateChange) else None)
        yield manager, session, states


async def test_create_prompt_reply_terminate(
    tmp_path: Path, worktree: Path, runtime_dir: Path
) -> None:
    reply = "Health endpoint planned.\n[STEP_COMPLETE] plan written"
    with ScriptedMessagesAPI(replies=[reply]) as api:
        async with claude_session(tmp_path, worktree, runtime_dir, api) as (manager, s, states):
            await s.wait_ready(STARTUP)
            config = json.loads((tmp_path / "home" / ".claude.json").read_text())
            assert config["projects"][project_key(worktree)]["hasTrustDialogAccepted"] is True

            result = await s.execute("Add a /health endpoint\nwith two lines", timeout=TURN)
            assert result.state == AgentState.READY
            assert result.text == reply
            assert [type(m) for m in result.messages] == [StepComplete]

            request = api.main_requests[0]
            assert "Add a /health endpoint\nwith two lines" in request.last_user_text()
            body = request.body_text()
            assert PERSONA_MARKER in body
            assert "Frontend Fran" in body  # a peer it may invoke
            assert "[ASK_USER]" in body  # the protocol section
            assert states[0].state == AgentState.READY  # SessionStart + the input box drawn
            assert [(c.state, c.source) for c in states[1:]] == [
                (AgentState.EXECUTING, "hook"),
                (AgentState.READY, "hook"),
            ]

            await manager.terminate(s.session_id, reason="test over")
            assert s.state == AgentState.TERMINATED
            assert s.exit_status is not None
            assert (worktree / ".claude" / "settings.local.json").exists()


async def test_prompt_sent_while_busy_is_delivered_once_after_the_turn(
    tmp_path: Path, worktree: Path, runtime_dir: Path
) -> None:
    replies = [ScriptedReply("First done.", first_delay=1.5), "Second done."]
    with ScriptedMessagesAPI(replies=replies) as api:
        async with claude_session(tmp_path, worktree, runtime_dir, api) as (_m, s, _states):
            await s.wait_ready(STARTUP)
            await s.submit("first task")
            assert s.state == AgentState.EXECUTING
            second = s.submit("second task")
            # What the first turn's end finds: the second prompt still queued, one request made.
            # (UserPromptSubmit confirms a prompt before Claude Code sends its request, so the
            # request count is read when the turn ends, not a moment after the confirmation.)
            at_turn_end: list[tuple[bool, int]] = []

            def turn_end(_s: AgentSession, event: object) -> None:
                if isinstance(event, StateChange) and event.state == AgentState.READY:
                    at_turn_end.append((second.done(), len(api.main_requests)))

            s.add_listener(turn_end)
            await asyncio.wait_for(second, TURN)
            assert at_turn_end[0] == (False, 1)
            await s.wait_ready(TURN)
            users = [r.last_user_text() for r in api.main_requests]
            assert len(users) == 2
            assert "first task" in users[0] and "second task" in users[1]
            assert s.delivered == 2


async def test_prompt_sent_during_a_permission_dialog_is_not_lost(
    tmp_path: Path, worktree: Path, runtime_dir: Path
) -> None:
    settings = worktree / ".claude" / "settings.local.json"
    settings.parent.mkdir()
    settings.write_text('{"permissions": {"defaultMode": "default"}}\n')  # Bash asks first
    call = ToolUse("Bash", {"command": "touch made.txt", "description": "Make a file"})
    replies = [ScriptedReply("Making it.", tool_uses=(call,)), "File made.", "Later task done."]
    with ScriptedMessagesAPI(replies=replies) as api:
        async with claude_session(tmp_path, worktree, runtime_dir, api) as (_m, s, states):
            await s.wait_ready(STARTUP)
            await s.submit("make the file")
            await wait_screen(s.terminal, lambda t: "Do you want to proceed?" in t, TURN, "dialog")
            await s.wait_for_state(AgentState.WAITING_INPUT, TURN)
            later = s.submit("the later task")
            await asyncio.sleep(0.5)
            assert not later.done(), "typed into an open dialog"
            await s.send_keys("<Enter>")  # "1. Yes"
            await asyncio.wait_for(later, TURN)
            await s.wait_ready(TURN)
            assert (worktree / "made.txt").exists()
            users = [r.last_user_text() for r in api.main_requests]
            assert sum("the later task" in u for u in users) == 1
            assert "the later task" in users[-1]
            # the PermissionRequest hook says so first now; the screen read agrees after it
            waiting = [c.source for c in states if c.state == AgentState.WAITING_INPUT]
            assert waiting and set(waiting) <= {"hook", "screen"}, waiting
