"""Claude Code's offer to make auto mode the default never meets a job on the real CLI.

Claude Code 2.1.328, when the operator's own settings (`~/.claude/settings.json`) ask for the
classic "ask" mode and semo.toml gives the agent no `permission_mode`, opens every new session
with "Make auto mode your default permission mode?" about a second after its prompt first
shows (reproduced here without semo's settling: `claude_config.SETTLED_AHEAD`). Answered in an
agent's pane it changes the operator's own settings, and semo used to type a job's prompt into
it. semo settles it ahead (`hasSeenAutoDefaultNudge` in the CLI's config, beside onboarding):
a real `semo engine` runs the agent offline against a scripted Messages API, a job is created at
once, and the job's session shows no offer, its prompt reaches the model, its Bash tool use asks
through the hook as the classic mode does (a permission item: the operator's mode is kept), and
the operator's settings are unchanged.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from semo.engine.terminal.session import TerminalSession
from tests.support.claude_approvals import (
    TIMEOUT,
    bash,
    create_job,
    fe_ready,
    job_status,
    semo,
    semo_json,
    tool_results,
    uses,
    write_office,
)
from tests.support.claude_home import claude_argv, claude_env
from tests.support.office_files import kept_temp_dir
from tests.support.scripted_api import ScriptedMessagesAPI
from tests.support.semo_process import engine_in
from tests.support.waiting import eventually_value

pytestmark = pytest.mark.claude

OFFER = "Make auto mode your default permission mode?"
CLASSIC = {"permissions": {"defaultMode": "default"}}


@pytest.fixture
def folder() -> Iterator[Path]:
    with kept_temp_dir("semo-offer-") as path:
        yield path


def operator_settings(home: Path) -> Path:
    """The operator's own Claude Code settings: the classic "ask" mode."""
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps(CLASSIC))
    return settings


async def screen_after(cli: TerminalSession, seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "\n".join(cli.screen.text_rows())


@pytest.mark.timeout(120)
async def test_the_offer_shows_on_the_real_cli_without_semos_settling(folder: Path) -> None:
    """What semo settles ahead is real: the same home, without `hasSeenAutoDefaultNudge`,
    brings the offer up over the prompt (the test below would not see it otherwise)."""
    work = folder / "work"
    work.mkdir()
    await asyncio.to_thread(subprocess.run, ["git", "init", "-q", str(work)], check=True)
    with ScriptedMessagesAPI(replies=["Hi."]) as api:
        env = claude_env(work, folder / "home", api)
        operator_settings(folder / "home")
        cli = TerminalSession(claude_argv(), cols=100, rows=30, cwd=work, env=env)
        cli.start()
        try:
            deadline = asyncio.get_running_loop().time() + 30
            while OFFER not in (shown := await screen_after(cli, 0.5)):
                assert asyncio.get_running_loop().time() < deadline, shown
            assert "Yes, set auto mode as my default permission mode" in shown
        finally:
            await cli.close()


@pytest.mark.timeout(300)
async def test_semo_settles_the_offer_and_the_job_asks_through_the_hook(folder: Path) -> None:
    replies = [uses(bash("touch after-offer.txt")), "[SEMO:DONE] made"]
    with ScriptedMessagesAPI(replies=replies) as api:
        write_office(folder, api, mode=None)
        env = claude_env(folder / "elsewhere", folder / "home", api)
        settings = operator_settings(folder / "home")
        async with engine_in(folder, env):
            await fe_ready(folder)
            job = await create_job(folder, "Make after-offer.txt")

            async def permission() -> dict[str, Any] | None:
                rows = await semo_json(folder, "questions")
                asks = [r for r in rows if r["question_type"] == "permission"]
                return asks[0] if asks else None

            asked = await eventually_value(permission, "the job's permission request", TIMEOUT)
            assert asked["question"] == "Bash: touch after-offer.txt"  # the hook's, not a dialog
            assert "Make after-offer.txt" in api.main_requests[0].body_text()
            assert (await semo(folder, "answer", asked["id"], "allow")).returncode == 0
            await job_status(folder, job, "done")
            everything = await semo_json(folder, "questions", "--all")
        assert [q["question"] for q in everything] == ["Bash: touch after-offer.txt"]
        assert [r["is_error"] for r in tool_results(api)] == [False]
        assert json.loads(settings.read_text()) == CLASSIC  # the operator's mode is theirs
        config = json.loads((folder / "home" / ".claude.json").read_text())
        assert config["hasSeenAutoDefaultNudge"] is True
        log = (folder / "engine.log").read_text()
        # the prompt reached the model (above) and was confirmed, not typed into an offer;
        # only the hook's request was asked. A "dialog waits" line may appear: Claude Code can
        # draw its permission dialog while the hook waits, and on a loaded machine the screen
        # reader sees it (the same request, already in the inbox).
        assert "not confirmed" not in log
