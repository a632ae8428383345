"""The real Claude Code CLI in a fresh HOME where only ``ensure_trusted`` was applied reaches its
prompt with no dialog, in a real git worktree made by ``WorktreeManager``.

Controls show the test would see a dialog: with no config the CLI opens its onboarding (theme
picker), with onboarding done but no trust entry it asks whether to trust the folder. What else
makes a first start quiet (``tests.support.claude_home``'s ``quiet`` keys) is cosmetic, and not
written by semo: the "Auto mode is now the default" notice may show above the prompt.

The CLI runs offline against the scripted Messages API with ``ANTHROPIC_AUTH_TOKEN`` (so there is
no "use this API key?" question either); a user's real login lives in the same file and is kept.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from semo.engine.agents.claude.trust import ensure_trusted, forget, owned_projects, project_key
from semo.engine.sessions.worktrees import Worktree, WorktreeManager
from semo.engine.terminal.session import TerminalSession
from tests.support.claude_home import claude_argv, claude_env
from tests.support.claude_screen import prompt_ready, wait_screen
from tests.support.scripted_api import ScriptedMessagesAPI

pytestmark = pytest.mark.claude

COLS, ROWS = 100, 30
STARTUP_TIMEOUT = 30.0
TRUST_QUESTION = "Yes, I trust this folder"
THEME_PICKER = "Choose the text style"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True
    ).stdout


async def make_worktree(tmp_path: Path, task: str = "t1") -> Worktree:
    repo = tmp_path / "repo"
    if not repo.exists():
        repo.mkdir()
        git(repo, "init", "-q", "-b", "main")
        git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q",
            "--allow-empty", "-m", "init")  # fmt: skip
    return await WorktreeManager(repo, tmp_path / "workspace").create("FE", task)


def fresh_home_env(
    tmp_path: Path, workdir: Path, api: ScriptedMessagesAPI
) -> tuple[Path, dict[str, str]]:
    """The offline environment of ``claude_env``, with its ``.claude.json`` taken away again:
    the HOME holds nothing semo did not write."""
    home = tmp_path / "home"
    env = claude_env(workdir, home, api)
    (home / ".claude.json").unlink()
    return home, env


@pytest.fixture(autouse=True)
def _needs_claude() -> None:
    assert shutil.which("claude"), "the Claude Code CLI must be installed (scripts/test does it)"


async def test_only_ensure_trusted_reaches_the_prompt(tmp_path: Path) -> None:
    wt = await make_worktree(tmp_path)
    other = await make_worktree(tmp_path, "t2")
    reply = "Trusted and ready."
    with ScriptedMessagesAPI(replies=[reply]) as api:
        home, env = fresh_home_env(tmp_path, wt.path, api)
        assert ensure_trusted(wt.path, home=home) is True
        assert set(json.loads((home / ".claude.json").read_text())) == {
            "hasCompletedOnboarding",
            "hasSeenAutoDefaultNudge",
            "projects",
        }
        session = TerminalSession(claude_argv(), cols=COLS, rows=ROWS, cwd=wt.path, env=env)
        session.start()
        try:
            # while the CLI writes its own start-up keys, semo trusts another worktree
            assert await asyncio.to_thread(ensure_trusted, other.path, home=home)
            first = await wait_screen(session, prompt_ready, STARTUP_TIMEOUT, "the prompt")
            assert TRUST_QUESTION not in first and THEME_PICKER not in first
            assert "Claude Code" in first

            await session.send_keys("hello")
            await wait_screen(session, lambda s: "❯ hello" in s, 10, "the typed prompt")
            await session.send_keys("<Enter>")
            await wait_screen(session, lambda s: reply in s, 30, "the reply")
        finally:
            await session.close()

    config = json.loads((home / ".claude.json").read_text())
    assert config["hasCompletedOnboarding"] is True
    for path in (wt.path, other.path):  # neither the CLI nor semo lost the other's writes
        assert config["projects"][project_key(path)]["hasTrustDialogAccepted"] is True
    assert config.get("numStartups", 0) >= 1  # the CLI's own keys are there too
    assert set(owned_projects(home=home)) == {project_key(wt.path), project_key(other.path)}

    # the CLI keeps its per-repository state under the main checkout's path: not semo's
    cli_entries = set(config["projects"]) - set(owned_projects(home=home))
    assert forget(wt.path, home=home) and forget(other.path, home=home)
    after = json.loads((home / ".claude.json").read_text())
    assert set(after["projects"]) == cli_entries
    assert {k: v for k, v in after.items() if k != "projects"} == {
        k: v for k, v in config.items() if k != "projects"
    }


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        pytest.param("nothing", THEME_PICKER, id="no-config-onboarding"),
        pytest.param("onboarding-only", TRUST_QUESTION, id="no-trust-entry"),
    ],
)
async def test_controls_show_the_dialogs_semo_prevents(
    tmp_path: Path, setup: str, expected: str
) -> None:
    wt = await make_worktree(tmp_path)
    with ScriptedMessagesAPI(replies=[]) as api:
        home, env = fresh_home_env(tmp_path, wt.path, api)
        if setup == "onboarding-only":
            (home / ".claude.json").write_text(json.dumps({"hasCompletedOnboarding": True}))
        session = TerminalSession(claude_argv(), cols=COLS, rows=ROWS, cwd=wt.path, env=env)
        session.start()
        try:
            screen = await wait_screen(
                session, lambda s: expected in s, STARTUP_TIMEOUT, f"{expected!r}"
            )
            assert not prompt_ready(screen)
        finally:
            await session.close()
