"""The persona semo writes into a worktree's ``.claude/CLAUDE.md`` reaches the model.

The real Claude Code CLI runs offline (scripted Messages API) in a worktree made by
``WorktreeManager`` of a repository that has its own, tracked ``CLAUDE.md`` at the root. After
``PersonaInjector.inject`` the first main-conversation request carries the agent's prompt, its
scope, its peers and the protocol section, and the project's own ``CLAUDE.md`` as well (Claude
Code reads both files). The worktree's ``git status`` stays clean before and after the session.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from semo.engine.agents.persona import PersonaInjector, agent_protocol_text
from semo.engine.sessions.worktrees import WorktreeManager
from semo.engine.store.models import Agent
from semo.engine.terminal.session import TerminalSession
from tests.support.claude_home import claude_argv, claude_env
from tests.support.claude_screen import prompt_ready, wait_screen
from tests.support.scripted_api import ScriptedMessagesAPI

pytestmark = pytest.mark.claude

COLS, ROWS = 100, 30
STARTUP_TIMEOUT = 30.0
PERSONA_MARKER = "persona-marker-5c1e9b"
PROJECT_MARKER = "project-marker-a07d42"

BE = Agent(
    office_id="office-1",
    name="Backend Bob",
    role="BE",
    prompt=f"You build and maintain the HTTP API. Your secret word is {PERSONA_MARKER}.",
    scope_patterns=["api/**", "tests/api/**"],
    core_skills=["python", "postgres"],
)
FE = Agent(office_id="office-1", name="Frontend Fran", role="FE")
QA = Agent(office_id="office-1", name="Quality Quinn", role="QA")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True
    ).stdout


async def test_persona_and_project_claude_md_reach_the_model(tmp_path: Path) -> None:
    assert shutil.which("claude"), "the Claude Code CLI must be installed (scripts/test does it)"
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "CLAUDE.md").write_text(f"# Project\n\nThe project word is {PROJECT_MARKER}.\n")
    git(repo, "add", "CLAUDE.md")
    git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "init")
    wt = await WorktreeManager(repo, tmp_path / "workspace").create("BE", "task-7")

    injector = PersonaInjector()
    result = await injector.inject_async(wt.path, BE, [FE, QA])
    assert result.hidden_by == "exclude"
    assert git(wt.path, "status", "--porcelain", "--untracked-files=all") == ""

    reply = "Persona received."
    with ScriptedMessagesAPI(replies=[reply]) as api:
        env = claude_env(wt.path, tmp_path / "home", api)
        session = TerminalSession(claude_argv(), cols=COLS, rows=ROWS, cwd=wt.path, env=env)
        session.start()
        try:
            await wait_screen(session, prompt_ready, STARTUP_TIMEOUT, "the prompt")
            await session.send_keys("hello")
            await wait_screen(session, lambda s: "❯ hello" in s, 10, "the typed prompt")
            await session.send_keys("<Enter>")
            await wait_screen(session, lambda s: reply in s, 30, "the reply")
        finally:
            await session.close()

    mains = [r for r in api.main_requests if "hello" in r.user_text()]
    assert mains, f"no main-conversation request carries the prompt:\n{api.describe()}"
    body = mains[0].body_text()
    assert PERSONA_MARKER in body, "the persona's prompt did not reach the model"
    assert "# You are Backend Bob, the BE agent" in body
    assert "- `api/**`" in body and "- `tests/api/**`" in body
    assert "- `FE`: Frontend Fran" in body and "- `QA`: Quality Quinn" in body
    assert agent_protocol_text().splitlines()[0] in body  # "## Messages to semo"
    assert "[INVOKE:BE]" in body and "[SEMO:DONE]" in body  # the protocol's examples
    assert PROJECT_MARKER in body, "the project's own CLAUDE.md no longer reaches the model"
    assert git(wt.path, "status", "--porcelain", "--untracked-files=all") == ""
