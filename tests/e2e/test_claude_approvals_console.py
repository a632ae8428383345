"""A real Claude Code agent's permission request in the console's inbox, answered with keys.

The console (Textual's Pilot) runs over a real engine whose one agent is the real Claude Code
CLI, offline against a scripted Messages API, in Claude Code's classic "ask" mode
(`permission_mode = "default"`). Its Bash tool use waits in the inbox marked as a permission:
the agent is `waiting_input` (never "working" while Claude Code waits), `1` allows it (the
command runs, the turn finishes), and for the next one Enter opens the answer line whose text
is the reason of a denial, which the model receives as the tool's refusal.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from semo.console.app import SemoApp
from semo.console.screens.main import MainScreen
from semo.console.widgets.questions_panel import QuestionsPanel
from semo.engine.config import AgentConfig, OfficeConfig, PoolConfig, SemoConfig
from semo.engine.engine import Engine
from semo.engine.in_process import InProcessEngine
from semo.engine.store.models import Agent
from tests.support.claude_approvals import bash, result_text, tool_results, uses
from tests.support.claude_home import claude_env
from tests.support.console_app import runtime_dir_fixture, waiter
from tests.support.scripted_api import ScriptedMessagesAPI

pytestmark = pytest.mark.claude

TIMEOUT = 60.0

runtime_dir = runtime_dir_fixture("semo-apc-")
wait_for = waiter(TIMEOUT)


def claude_engine(
    folder: Path, runtime_dir: Path, api: ScriptedMessagesAPI, mode: str | None = "default"
) -> Engine:
    work = folder / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    agent = AgentConfig(
        role="FE",
        command=["claude"],
        permission_mode=mode,
        env={"ANTHROPIC_BASE_URL": api.base_url},
        cols=100,
        rows=30,
    )
    config = SemoConfig(
        office=OfficeConfig(name="approvals-console", workspace_root=folder / "ws"),
        store={"backend": "sqlite", "sqlite_path": folder / "semo.db"},
        pool=PoolConfig(max_sessions=1, warm_roles=["FE"]),
        agents=[agent],
    )
    env = claude_env(work.resolve(), folder / "home", api) | {"PATH": os.environ["PATH"]}

    def folder_for(_agent: Agent, _task: str) -> Path:
        return work.resolve()

    return Engine(config, agent_env=env, runtime_dir=runtime_dir, folder_for=folder_for)


@pytest.mark.timeout(200)
async def test_the_inbox_allows_and_denies_with_a_reason(tmp_path: Path, runtime_dir: Path) -> None:
    replies = [
        uses(bash("touch from-console.txt")),
        "Made it.",
        uses(bash("touch denied.txt")),
        "Understood.",
    ]
    with ScriptedMessagesAPI(replies=replies) as api:
        app = SemoApp(InProcessEngine(claude_engine(tmp_path, runtime_dir, api)))
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_for(lambda: getattr(app.screen, "started", False), "the engine")
            screen = app.screen
            assert isinstance(screen, MainScreen)
            [session] = app.engine.sessions()
            await wait_for(lambda: session.state.value == "ready", "FE ready")
            panel = screen.query_one(QuestionsPanel)

            app.engine.send_prompt(session.session_id, "make the file")
            await wait_for(lambda: len(panel.questions) == 1, "the permission in the inbox")
            [asked] = panel.questions
            assert (asked.question_type, asked.question) == (
                "permission",
                "Bash: touch from-console.txt",
            )
            assert session.state.value == "waiting_input"
            shown = str(screen.query_one("#question-body").render())
            assert "FE asks permission for: Bash: touch from-console.txt" in shown
            detail = str(screen.query_one("#question-detail").render())
            assert "1 allow" in detail and "2 allow for this session" in detail
            await pilot.press("f4", "1")
            await wait_for(lambda: session.state.value == "ready", "the turn finished")
            assert (tmp_path / "work" / "from-console.txt").exists()
            await wait_for(lambda: not panel.questions, "the inbox empty again")

            app.engine.send_prompt(session.session_id, "make another")
            await wait_for(lambda: len(panel.questions) == 1, "the second permission")
            await pilot.press("f4", "enter")
            await pilot.press(*"not in this repository")
            await pilot.press("enter")
            await wait_for(lambda: session.state.value == "ready", "the turn went on")
            await asyncio.sleep(0)
        refusal = tool_results(api)[1]
        assert refusal["is_error"] is True
        assert "not in this repository" in result_text(refusal)
        assert not (tmp_path / "work" / "denied.txt").exists()


@pytest.mark.timeout(200)
async def test_auto_modes_dialogs_are_allowed_from_the_inbox(
    tmp_path: Path, runtime_dir: Path
) -> None:
    """Claude Code's own default (auto mode) behind a gateway: its dialogs call no hook; the
    console's inbox shows each as a permission read off the screen while the agent is
    `waiting_input`, and `1` answers it in the agent's pane: the command runs. The first
    action's notice ("can't check") is one item with its "Do you want to proceed?"; the next
    action's "proceed" is an item of its own."""
    command = 'python3 -c \'open("auto.txt", "w")\''
    second = 'python3 -c \'open("auto2.txt", "w")\''
    replies = [uses(bash(command)), uses(bash(second), text="Again."), "Made it."]
    with ScriptedMessagesAPI(replies=replies, safeguards=False) as api:
        app = SemoApp(InProcessEngine(claude_engine(tmp_path, runtime_dir, api, mode=None)))
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_for(lambda: getattr(app.screen, "started", False), "the engine")
            screen = app.screen
            assert isinstance(screen, MainScreen)
            [session] = app.engine.sessions()
            await wait_for(lambda: session.state.value == "ready", "FE ready")
            panel = screen.query_one(QuestionsPanel)

            app.engine.send_prompt(session.session_id, "make the file with python")
            await wait_for(lambda: len(panel.questions) == 1, "the dialog in the inbox")
            [first] = panel.questions
            assert first.question_type == "permission"
            assert "Auto mode can't check actions in this session" in first.question
            assert session.state.value == "waiting_input"
            await pilot.press("f4", "1")

            def proceed() -> bool:
                return any("Do you want to proceed?" in q.question for q in panel.questions)

            await wait_for(proceed, "the next action's proceed dialog in the inbox")
            assert second in panel.questions[0].question
            assert session.state.value == "waiting_input"
            await pilot.press("f4", "1")
            await wait_for(lambda: session.state.value == "ready", "the turn finished")
            await wait_for(lambda: not panel.questions, "the inbox empty again")
        assert (tmp_path / "work" / "auto.txt").exists()
        assert (tmp_path / "work" / "auto2.txt").exists()
        assert [r["is_error"] for r in tool_results(api)] == [False, False]
