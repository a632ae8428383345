"""Permission requests of the real Claude Code CLI reach the inbox and are answered there.

A real `semo engine` runs one Claude Code agent (FE) offline against a scripted Messages API
whose replies ask for Bash tool uses. With the agent's `permission_mode = "default"` (Claude
Code's classic "ask" mode, written to the worktree's settings by semo) each such use is a
`PermissionRequest` hook that waits in the engine: the request is a `permission` item in
`semo questions`; `allow` runs the command and the turn finishes; `deny: REASON` reaches the
model as the tool's refusal (checked on what the scripted API receives) and the turn goes on;
"allow for this session" lets the next identical request through without asking; a rule of
`[approvals]` allows a request with no one asked, and the job's timeline names the rule.
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
    API_TOKEN,
    RULES,
    TIMEOUT,
    bash,
    create_job,
    fe_ready,
    free_port,
    job_status,
    other_permission,
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


@pytest.fixture
def folder() -> Iterator[Path]:
    with kept_temp_dir("semo-ap-") as path:
        yield path


@pytest.mark.timeout(300)
async def test_allow_deny_and_allow_for_the_session_in_the_classic_mode(folder: Path) -> None:
    replies = [
        # job 1: asks, is allowed, the command runs, the turn finishes
        uses(bash("touch allowed.txt")),
        "[SEMO:DONE] allowed.txt made",
        # job 2: asks, is denied with a reason; the model reads it and the turn goes on
        uses(bash("touch denied.txt")),
        "[SEMO:DONE] did without it",
        # job 3: allowed for the session, then the same command again: not asked
        uses(bash("touch session.txt")),
        uses(bash("touch session.txt"), text="Once more."),
        "[SEMO:DONE] twice",
    ]
    with ScriptedMessagesAPI(replies=replies) as api:
        write_office(folder, api, mode="default")
        env = claude_env(folder / "elsewhere", folder / "home", api)
        async with engine_in(folder, env):
            await fe_ready(folder)

            first = await create_job(folder, "Make allowed.txt")
            asked = await pending_permission(folder)
            assert asked["question"] == "Bash: touch allowed.txt"
            assert asked["options"] == ["allow", "allow for this session", "deny"]
            sessions = await semo_json(folder, "sessions")
            assert [s["status"] for s in sessions if s["role"] == "FE"] == ["waiting_input"]
            answered = await semo(folder, "answer", asked["id"], "allow")
            assert answered.returncode == 0, answered.stderr
            shown = await job_status(folder, first, "done")
            steps = [e["step"] for e in shown["entries"]]
            assert "permission_asked" in steps and "permission_decided" in steps
            decided = [e for e in shown["entries"] if e["step"] == "permission_decided"]
            assert decided[0]["detail"] == "allowed by a person: Bash: touch allowed.txt"
            assert tool_results(api)[0]["is_error"] is False

            second = await create_job(folder, "Make denied.txt")
            asked = await pending_permission(folder)
            assert asked["question"] == "Bash: touch denied.txt"
            denied = await semo(folder, "answer", asked["id"], "deny: use the fixtures instead")
            assert denied.returncode == 0, denied.stderr
            await job_status(folder, second, "done")
            refusal = tool_results(api)[1]
            assert refusal["is_error"] is True
            assert "use the fixtures instead" in result_text(refusal)

            third = await create_job(folder, "Make session.txt twice")
            asked = await pending_permission(folder)
            ok = await semo(folder, "answer", asked["id"], "--option", "2")
            assert ok.returncode == 0, ok.stderr
            shown = await job_status(folder, third, "done")
            decided = [e["detail"] for e in shown["entries"] if e["step"] == "permission_decided"]
            assert decided == [
                "allowed (allow for this session) by a person: Bash: touch session.txt",
                "allowed for this session earlier: Bash: touch session.txt",
            ]
            results = tool_results(api)
            assert [r["is_error"] for r in results[2:]] == [False, False]
            everything = await semo_json(folder, "questions", "--all")
            assert len([q for q in everything if q["question_type"] == "permission"]) == 3


@pytest.mark.timeout(300)
async def test_rules_decide_without_asking_and_the_timeline_names_the_rule(folder: Path) -> None:
    replies = [
        uses(bash("touch notes.txt")),
        uses(bash("git push origin main"), text="Pushing."),
        uses(bash("touch a.txt; touch sneaky.txt"), text="And this."),
        "[SEMO:DONE] checked",
    ]
    with ScriptedMessagesAPI(replies=replies) as api:
        write_office(folder, api, mode="default", approvals=RULES)
        env = claude_env(folder / "elsewhere", folder / "home", api)
        async with engine_in(folder, env):
            await fe_ready(folder)
            job = await create_job(folder, "Check the tree")
            # the chained command is not what the rule allows: a person is asked
            asked = await pending_permission(folder)
            assert asked["question"] == "Bash: touch a.txt; touch sneaky.txt"
            await semo(folder, "answer", asked["id"], "deny")
            shown = await job_status(folder, job, "done")
        decided = [e["detail"] for e in shown["entries"] if e["step"] == "permission_decided"]
        assert decided == [
            "allowed by rule 'text files': Bash: touch notes.txt",
            "denied by rule 'no pushes': Bash: git push origin main",
            "denied by a person: Bash: touch a.txt; touch sneaky.txt",
        ]
        results = tool_results(api)
        assert [r["is_error"] for r in results] == [False, True, True]
        assert "Pushing is the operator's job." in result_text(results[1])
        asked_steps = [e for e in shown["entries"] if e["step"] == "permission_asked"]
        assert len(asked_steps) == 1  # the rules asked no one


@pytest.mark.timeout(300)
async def test_answered_through_rest_and_a_supabase_row(folder: Path) -> None:
    """On the Supabase store (the emulator): one request allowed through the REST API, the
    next denied with a reason by an operator's row UPDATE (as a web app would); the CLI and
    rows agree, and the model got the reason."""
    replies = [
        uses(bash("touch rest.txt")),
        uses(bash("touch row.txt"), text="And the next."),
        "[SEMO:DONE] one of two",
    ]
    port = free_port()
    await admin_connection_check()
    with contextlib.ExitStack() as stack:
        dsn = await asyncio.to_thread(stack.enter_context, temporary_database(ADMIN_DSN))
        await migrate(dsn)
        async with SupabaseEmulator(dsn) as emulator:
            with ScriptedMessagesAPI(replies=replies) as api:
                store = (
                    f'[store]\nbackend = "supabase"\nsupabase_url = "{emulator.url}"\n\n'
                    f'[api]\nlisten = "127.0.0.1:{port}"'
                )
                write_claude_office(folder, "claude-approvals", store, {"FE": api}, max_sessions=2)
                (folder / "semo.toml").write_text(
                    (folder / "semo.toml").read_text() + 'permission_mode = "default"\n'
                )
                keys = {"SUPABASE_SERVICE_ROLE_KEY": emulator.service_role_key}
                env = claude_env(folder / "elsewhere", folder / "home", api)
                cli = semo_env(**keys)

                async def supa(*args: str) -> Any:
                    done = await run_semo(*args, "--json", cwd=folder, env=cli)
                    assert done.returncode == 0, done.stderr
                    return json.loads(done.stdout)

                async with engine_in(folder, env | keys | {"SEMO_API_TOKEN": API_TOKEN}):

                    async def permission() -> dict[str, Any] | None:
                        rows = await supa("questions")
                        return next((r for r in rows if r["question_type"] == "permission"), None)

                    async def fe_ready() -> bool | None:
                        done = await run_semo("sessions", "--json", cwd=folder, env=cli)
                        rows = json.loads(done.stdout) if done.returncode == 0 else []
                        return any(r["status"] == "ready" for r in rows) or None

                    await eventually_value(fe_ready, "FE ready", TIMEOUT)
                    created = await run_semo(
                        "job", "create", "--role", "FE", "--task", "two files", cwd=folder, env=cli
                    )
                    assert created.returncode == 0, created.stderr
                    job_id = created.stdout.split()[0]

                    asked = await eventually_value(permission, "the first request", TIMEOUT)
                    assert asked["question"] == "Bash: touch rest.txt"
                    office = asked["office_id"]
                    url = f"http://127.0.0.1:{port}/api/offices/{office}/questions/{asked['id']}"
                    headers = {"Authorization": f"Bearer {API_TOKEN}"}
                    async with httpx.AsyncClient() as client:
                        bad = await client.post(
                            f"{url}/answer", json={"text": "sure thing"}, headers=headers
                        )
                        assert bad.status_code == 409, bad.text
                        ok = await client.post(
                            f"{url}/answer", json={"text": "allow"}, headers=headers
                        )
                        assert ok.status_code == 200, ok.text

                    second = await eventually_value(
                        lambda: other_permission(permission, asked["id"]),
                        "the second request",
                        TIMEOUT,
                    )
                    assert second["question"] == "Bash: touch row.txt"
                    user = await asyncio.to_thread(emulator.create_user, "op@team.test", "pw")
                    added = await run_semo(
                        "office", "members", "add", "op@team.test", "--role", "operator",
                        cwd=folder, env=cli,
                    )  # fmt: skip
                    assert added.returncode == 0, added.stderr
                    token = emulator.sign_jwt({"sub": user, "role": "authenticated"})
                    member = {"apikey": emulator.anon_key, "Authorization": f"Bearer {token}"}
                    async with httpx.AsyncClient(base_url=emulator.rest_url) as rest:
                        forged = await rest.patch(
                            f"/user_questions?id=eq.{second['id']}",
                            json={"status": "answered", "answer": "yes, run it"},
                            headers=member,
                        )
                        assert forged.status_code >= 400  # not one of the answers
                        row = await rest.patch(
                            f"/user_questions?id=eq.{second['id']}",
                            json={"status": "answered", "answer": "deny: not on a Friday"},
                            headers={**member, "Prefer": "return=representation"},
                        )
                        assert row.status_code == 200, row.text
                        assert row.json()[0]["answer"] == "deny: not on a Friday"

                    async def done() -> dict[str, Any] | None:
                        shown = await supa("job", "show", job_id)
                        return shown if shown["job"]["status"] == "done" else None

                    shown = await eventually_value(done, "the job done", TIMEOUT)
        decided = [e["detail"] for e in shown["entries"] if e["step"] == "permission_decided"]
        assert decided == [
            "allowed by a person: Bash: touch rest.txt",
            "denied by a person (not on a Friday): Bash: touch row.txt",
        ]
        results = tool_results(api)
        assert [r["is_error"] for r in results] == [False, True]
        assert "not on a Friday" in result_text(results[1])


@pytest.mark.timeout(300)
async def test_auto_mode_behind_a_gateway_brings_its_dialogs_to_the_inbox(folder: Path) -> None:
    """Claude Code's own default (auto mode), behind an endpoint that does not pass its safety
    check through: "Auto mode can't check actions in this session" (the first action) and
    "Do you want to proceed?" (each action) call no hook; semo reads them off the screen into
    the inbox, the agent is `waiting_input` (not working), and `allow` answers with keys: the
    command runs. The notice's answer carries to the "proceed" that follows for the same
    command (one item per action): the first action is answered with `semo answer`, the
    second's "proceed" through the REST API."""
    command = 'python3 -c \'open("made.txt", "w")\''
    replies = [uses(bash(command)), uses(bash(f"{command} # 2"), text="Again."), "[SEMO:DONE] made"]
    port = free_port()
    with ScriptedMessagesAPI(replies=replies, safeguards=False) as api:
        write_office(folder, api, mode=None, approvals=f'\n[api]\nlisten = "127.0.0.1:{port}"\n')
        env = claude_env(folder / "elsewhere", folder / "home", api)
        async with engine_in(folder, env | {"SEMO_API_TOKEN": API_TOKEN}):
            await fe_ready(folder)
            job = await create_job(folder, "Make the file with python")
            first = await pending_permission(folder)
            assert "Auto mode can't check actions in this session" in first["question"]
            sessions = await semo_json(folder, "sessions")
            assert [s["status"] for s in sessions if s["role"] == "FE"] == ["waiting_input"]
            assert (await semo(folder, "answer", first["id"], "allow")).returncode == 0

            async def second() -> dict[str, Any] | None:
                asked = await pending_permission(folder)
                return asked if asked["id"] != first["id"] else None

            proceed = await eventually_value(second, "the proceed dialog", TIMEOUT)
            assert "Do you want to proceed?" in proceed["question"]
            assert f"{command} # 2" in proceed["question"]
            office = proceed["office_id"]
            url = f"http://127.0.0.1:{port}/api/offices/{office}/questions/{proceed['id']}/answer"
            async with httpx.AsyncClient() as client:
                headers = {"Authorization": f"Bearer {API_TOKEN}"}
                ok = await client.post(url, json={"option": 1}, headers=headers)
                assert ok.status_code == 200, ok.text
            shown = await job_status(folder, job, "done")
        decided = [e["detail"] for e in shown["entries"] if e["step"] == "permission_decided"]
        assert decided == [
            f"allowed by a person: Bash: {command}",
            f"allowed by a person: Bash: {command} # 2",
        ]
        assert [r["is_error"] for r in tool_results(api)] == [False, False]


@pytest.mark.timeout(300)
async def test_a_request_no_one_answers_is_denied_after_the_policys_wait(folder: Path) -> None:
    """`[approvals] deny_after_minutes`: the request waits that long, then it is denied (the
    model is told no one answered), its inbox item cancelled, and the turn goes on."""
    replies = [uses(bash("touch late.txt")), "[SEMO:DONE] without it"]
    with ScriptedMessagesAPI(replies=replies) as api:
        policy = "\n[approvals]\ndeny_after_minutes = 0.05\n"
        write_office(folder, api, mode="default", approvals=policy)
        env = claude_env(folder / "elsewhere", folder / "home", api)
        async with engine_in(folder, env):
            await fe_ready(folder)
            job = await create_job(folder, "Make late.txt")
            shown = await job_status(folder, job, "done")
            everything = await semo_json(folder, "questions", "--all")
        [row] = [q for q in everything if q["question_type"] == "permission"]
        assert row["question"] == "Bash: touch late.txt"
        assert (
            row["status"] == "cancelled" and "no one answered within 0.05" in row["cancel_reason"]
        )
        decided = [e["detail"] for e in shown["entries"] if e["step"] == "permission_decided"]
        assert decided == ["denied: no one answered within 0.05 minutes: Bash: touch late.txt"]
        [refusal] = tool_results(api)
        assert refusal["is_error"] is True
        assert "No one answered within 0.05 minutes" in result_text(refusal)


@pytest.mark.timeout(300)
async def test_auto_mode_dialog_denied_with_a_reason_the_model_reads_it(folder: Path) -> None:
    """Claude Code's own default (auto mode) behind a gateway: its "can't check actions"
    dialog, denied with a reason in the inbox: semo stays in auto mode (Enter) and answers the
    "Do you want to proceed?" that follows with "No, and tell Claude what to do differently"
    and the reason. The command does not run, the model reads the reason as the tool's
    refusal, and the job goes on to its end; the timeline says who denied it and why."""
    command = 'python3 -c \'open("never.txt", "w")\''
    replies = [uses(bash(command)), "[SEMO:DONE] did without python"]
    with ScriptedMessagesAPI(replies=replies, safeguards=False) as api:
        write_office(folder, api, mode=None)
        env = claude_env(folder / "elsewhere", folder / "home", api)
        async with engine_in(folder, env):
            await fe_ready(folder)
            job = await create_job(folder, "Make the file with python")
            asked = await pending_permission(folder)
            assert "Auto mode can't check actions in this session" in asked["question"]
            assert command in asked["question"]  # what the decision goes on to
            assert asked["question"].endswith(
                "[allow: Enter, then Yes; deny: Enter, then No and the reason]"
            )
            denied = await semo(folder, "answer", asked["id"], "deny: no python here")
            assert denied.returncode == 0, denied.stderr
            shown = await job_status(folder, job, "done")
            worktrees = list((folder / "ws").rglob("never.txt"))
        decided = [e["detail"] for e in shown["entries"] if e["step"] == "permission_decided"]
        assert decided == [f"denied by a person (no python here): Bash: {command}"]
        [refusal] = tool_results(api)
        assert refusal["is_error"] is True
        assert "The operator denied this tool use: no python here" in result_text(refusal)
        assert worktrees == []  # the command never ran
