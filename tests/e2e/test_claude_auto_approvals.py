"""Auto mode's dialogs (no hook) decided as the hook's requests are, on the real Claude Code CLI.

Claude Code 2.1.328 in its own default (auto mode) behind an endpoint that does not pass its
safety check: the first action shows "Auto mode can't check actions in this session", every
action "Do you want to proceed?", neither calls the PermissionRequest hook. A real `semo
engine` reads the command off the screen and decides as for a hook request: "allow for this
session" lets the next identical action through with no one asked, `[approvals]` rules answer
with no one asked (the timeline names the rule), a deny's reason is typed into the dialog's
"No, and tell Claude what to do differently" (the model reads it as the tool's refusal), and
an operator's Supabase row answers as the CLI does. Checked on what the scripted Messages API
receives and on the job's timeline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from semo.engine.store.migrate import migrate
from tests.store.conftest import ADMIN_DSN, admin_connection_check
from tests.support.claude_approvals import (
    TIMEOUT,
    bash,
    create_job,
    fe_ready,
    job_status,
    pending_permission,
    result_text,
    semo,
    semo_json,
    tool_results,
    uses,
    write_office,
)
from tests.support.claude_home import claude_env
from tests.support.office_files import kept_temp_dir, write_claude_office
from tests.support.scripted_api import ScriptedMessagesAPI
from tests.support.semo_process import engine_in, run_semo, semo_env
from tests.support.supabase_emulator import SupabaseEmulator, temporary_database
from tests.support.waiting import eventually_value

pytestmark = pytest.mark.claude

NOTICE = "Auto mode can't check actions in this session"


@pytest.fixture
def folder() -> Iterator[Path]:
    with kept_temp_dir("semo-auto-") as path:
        yield path


def decisions(shown: dict[str, Any]) -> list[str]:
    return [e["detail"] for e in shown["entries"] if e["step"] == "permission_decided"]


async def permissions(folder: Path) -> list[dict[str, Any]]:
    everything = await semo_json(folder, "questions", "--all")
    return [q for q in everything if q["question_type"] == "permission"]


@pytest.mark.timeout(300)
async def test_allow_for_this_session_lets_the_same_command_through(folder: Path) -> None:
    """One item for the first action (the notice); "allow for this session" runs it, and the
    same command asked for again is allowed with no one asked."""
    command = 'python3 -c \'open("again.txt", "w")\''
    replies = [uses(bash(command)), uses(bash(command), text="Once more."), "[SEMO:DONE] twice"]
    with ScriptedMessagesAPI(replies=replies, safeguards=False) as api:
        write_office(folder, api, mode=None)
        env = claude_env(folder / "elsewhere", folder / "home", api)
        async with engine_in(folder, env):
            await fe_ready(folder)
            job = await create_job(folder, "Make again.txt twice")
            asked = await pending_permission(folder)
            assert NOTICE in asked["question"]
            answered = await semo(folder, "answer", asked["id"], "--option", "2")
            assert answered.returncode == 0, answered.stderr
            shown = await job_status(folder, job, "done")
            asked_all = await permissions(folder)
        assert decisions(shown) == [
            f"allowed (allow for this session) by a person: Bash: {command}",
            f"allowed for this session earlier: Bash: {command}",
        ]
        assert [r["is_error"] for r in tool_results(api)] == [False, False]
        assert [q["id"] for q in asked_all] == [asked["id"]]


RULES = """
[[approvals.rules]]
name = "opens"
tool = "Bash"
pattern = "python3 -c *open(*"
decision = "allow"

[[approvals.rules]]
name = "no removals"
tool = "Bash"
pattern = "python3 -c *remove*"
decision = "deny"
reason = "Removing files is the operator's job."
"""


@pytest.mark.timeout(300)
async def test_rules_answer_the_dialogs_and_a_reason_is_the_tools_refusal(folder: Path) -> None:
    allowed = 'python3 -c \'open("ok.txt", "w")\''
    removal = "python3 -c 'import os; os.remove(\"ok.txt\")'"
    chained = 'python3 -c \'open("b.txt", "w")\'; touch sneaky.txt'
    replies = [
        uses(bash(allowed)),
        uses(bash(removal), text="Removing."),
        uses(bash(chained), text="And this."),
        "[SEMO:DONE] checked",
    ]
    with ScriptedMessagesAPI(replies=replies, safeguards=False) as api:
        write_office(folder, api, mode=None, approvals=RULES)
        env = claude_env(folder / "elsewhere", folder / "home", api)
        async with engine_in(folder, env):
            await fe_ready(folder)
            job = await create_job(folder, "Check the tree")
            # the chained command is not what the rule allows: a person is asked
            asked = await pending_permission(folder)
            assert "Do you want to proceed?" in asked["question"] and chained in asked["question"]
            denied = await semo(folder, "answer", asked["id"], "deny: one file at a time")
            assert denied.returncode == 0, denied.stderr
            shown = await job_status(folder, job, "done")
            made = sorted(p.name for p in (folder / "ws").rglob("*.txt"))
        assert decisions(shown) == [
            f"allowed by rule 'opens': Bash: {allowed}",
            f"denied by rule 'no removals': Bash: {removal}",
            f"denied by a person (one file at a time): Bash: {chained}",
        ]
        results = tool_results(api)
        assert [r["is_error"] for r in results] == [False, True, True]
        assert "Removing files is the operator's job." in result_text(results[1])
        assert "The operator denied this tool use: one file at a time" in result_text(results[2])
        assert made == ["ok.txt"]  # allowed, not removed; the chained one never ran
        asked_steps = [e for e in shown["entries"] if e["step"] == "permission_asked"]
        assert len(asked_steps) == 1  # the rules asked no one


@pytest.mark.timeout(300)
async def test_a_supabase_row_denies_an_auto_mode_dialog(folder: Path) -> None:
    """On the Supabase store (the emulator) an operator's row UPDATE (as a web app would)
    answers the notice: the command never runs and the model reads the reason as the tool's
    refusal."""
    command = 'python3 -c \'open("row.txt", "w")\''
    replies = [uses(bash(command)), "[SEMO:DONE] without it"]
    await admin_connection_check()
    with contextlib.ExitStack() as stack:
        dsn = await asyncio.to_thread(stack.enter_context, temporary_database(ADMIN_DSN))
        await migrate(dsn)
        async with SupabaseEmulator(dsn) as emulator:
            with ScriptedMessagesAPI(replies=replies, safeguards=False) as api:
                store = f'[store]\nbackend = "supabase"\nsupabase_url = "{emulator.url}"'
                write_claude_office(folder, "claude-approvals", store, {"FE": api}, max_sessions=2)
                keys = {"SUPABASE_SERVICE_ROLE_KEY": emulator.service_role_key}
                env = claude_env(folder / "elsewhere", folder / "home", api)
                cli = semo_env(**keys)

                async def supa(*args: str) -> Any:
                    done = await run_semo(*args, "--json", cwd=folder, env=cli)
                    assert done.returncode == 0, done.stderr
                    return json.loads(done.stdout)

                async with engine_in(folder, env | keys):

                    async def permission() -> dict[str, Any] | None:
                        rows = await supa("questions")
                        return next((r for r in rows if r["question_type"] == "permission"), None)

                    async def ready() -> bool | None:
                        done = await run_semo("sessions", "--json", cwd=folder, env=cli)
                        rows = json.loads(done.stdout) if done.returncode == 0 else []
                        return any(r["status"] == "ready" for r in rows) or None

                    await eventually_value(ready, "FE ready", TIMEOUT)
                    created = await run_semo(
                        "job", "create", "--role", "FE", "--task", "row.txt", cwd=folder, env=cli
                    )
                    assert created.returncode == 0, created.stderr
                    job_id = created.stdout.split()[0]
                    asked = await eventually_value(permission, "the notice", TIMEOUT)
                    assert NOTICE in asked["question"]
                    user = await asyncio.to_thread(emulator.create_user, "op@team.test", "pw")
                    added = await run_semo(
                        "office", "members", "add", "op@team.test", "--role", "operator",
                        cwd=folder, env=cli,
                    )  # fmt: skip
                    assert added.returncode == 0, added.stderr
                    token = emulator.sign_jwt({"sub": user, "role": "authenticated"})
                    member = {"apikey": emulator.anon_key, "Authorization": f"Bearer {token}"}
                    async with httpx.AsyncClient(base_url=emulator.rest_url) as rest:
                        row = await rest.patch(
                            f"/user_questions?id=eq.{asked['id']}",
                            json={"status": "answered", "answer": "deny: not on a Friday"},
                            headers=member,
                        )
                        assert row.status_code < 300, row.text

                    async def done() -> dict[str, Any] | None:
                        shown = await supa("job", "show", job_id)
                        return shown if shown["job"]["status"] == "done" else None

                    shown = await eventually_value(done, "the job done", TIMEOUT)
                    made = list((folder / "ws").rglob("row.txt"))
        assert decisions(shown) == [f"denied by a person (not on a Friday): Bash: {command}"]
        [refusal] = tool_results(api)
        assert refusal["is_error"] is True
        assert "The operator denied this tool use: not on a Friday" in result_text(refusal)
        assert made == []
