"""The protocol pipeline live on the real Claude Code CLI (offline, scripted Messages API).

A prompt makes the scripted model reply with an ASK_USER block: the observer reports the exact
question and options and the state waiting_input; the answer is typed as the next prompt, the
model finishes with [SEMO:DONE], and the state is ready again. Hooks feed the observer exactly
as the engine will; the screen feeds it too (permission dialogs, tool output).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from semo.engine.agents.claude.screen import ClaudeScreen
from semo.engine.agents.claude.settings import install_hooks
from semo.engine.protocol.hooks import HookEvent, HookServer, default_hook_command
from semo.engine.protocol.messages import AskUser, Done
from semo.engine.protocol.observer import AgentObserver, MessageFound
from semo.engine.protocol.state import AgentState, StateChange
from semo.engine.terminal.session import TerminalSession
from tests.support.claude_home import claude_argv, claude_env
from tests.support.scripted_api import ScriptedMessagesAPI
from tests.support.waiting import eventually

pytestmark = pytest.mark.claude

QUESTION = "Which database should the service use for its job queue and audit log?"
ASK_REPLY = (
    "I need one decision first.\n\n[ASK_USER]\n"
    f'{{"type": "choice", "question": "{QUESTION}", "options": ["postgres", "sqlite"]}}\n'
    "[/ASK_USER]"
)
DONE_REPLY = "Using postgres as you chose.\n\n[SEMO:DONE]"


async def wait_for(
    predicate: Callable[[], object], timeout: float, what: str, observer: AgentObserver
) -> None:
    await eventually(
        predicate, timeout, what=what, interval=0.02, detail=lambda: f"events: {observer.events}"
    )


async def type_prompt(session: TerminalSession, text: str, observer: AgentObserver) -> None:
    """Type, wait until the input box shows it, then Enter (what the engine's input queue does)."""
    await session.send_keys(text)
    await wait_for(
        lambda: any(f"❯ {text}" in r.replace("\xa0", " ") for r in session.screen.text_rows()),
        10,
        "the typed prompt",
        observer,
    )
    await session.send_keys("<Enter>")


async def test_ask_user_reply_means_waiting_input_then_ready(tmp_path: Path) -> None:
    work = (tmp_path / "work").resolve()
    work.mkdir()
    install_hooks(work, default_hook_command())
    observer: AgentObserver | None = None

    def on_hook(event: HookEvent) -> None:
        assert observer is not None
        observer.on_hook(event.event, event.payload, event.received_at)

    with ScriptedMessagesAPI(replies=[ASK_REPLY, DONE_REPLY]) as api:
        async with HookServer(runtime_dir=tmp_path / "run", on_event=on_hook) as server:
            server.register_session("fe")
            env = claude_env(work, tmp_path / "home", api) | server.env_for("fe")
            session = TerminalSession(claude_argv(), cols=100, rows=30, cwd=work, env=env)
            observer = AgentObserver(ClaudeScreen(), screen=session.screen)
            session.add_listener(lambda _: observer.on_screen(session.screen, time.monotonic()))
            session.start()
            try:
                await wait_for(lambda: observer.state == AgentState.READY, 30, "ready", observer)
                await type_prompt(session, "plan the queue", observer)
                await wait_for(
                    lambda: observer.state == AgentState.WAITING_INPUT, 30, "a question", observer
                )
                messages = [e.message for e in observer.events if isinstance(e, MessageFound)]
                assert messages == [
                    AskUser(
                        question=QUESTION, question_type="choice", options=["postgres", "sqlite"]
                    )
                ]
                waiting = [e for e in observer.events if isinstance(e, StateChange)][-1]
                assert waiting.source == "protocol" and waiting.reason == "ASK_USER pending"

                observer.answered(time.monotonic())
                await type_prompt(session, "postgres", observer)
                await wait_for(
                    lambda: any(
                        isinstance(e, MessageFound) and isinstance(e.message, Done)
                        for e in observer.events
                    ),
                    30,
                    "[SEMO:DONE]",
                    observer,
                )
                await wait_for(lambda: observer.state == AgentState.READY, 10, "ready", observer)
                states = [e.state for e in observer.events if isinstance(e, StateChange)]
                assert states == [
                    AgentState.READY,
                    AgentState.EXECUTING,
                    AgentState.WAITING_INPUT,
                    AgentState.EXECUTING,
                    AgentState.READY,
                ]
                assert "postgres" in api.main_requests[-1].last_user_text()
            finally:
                await session.close()
            assert not server.rejected
