"""Helpers of test_claude_jobs that other test modules use too."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from tests.support.claude_home import claude_env
from tests.support.office_files import write_claude_office
from tests.support.scripted_api import ScriptedMessagesAPI
from tests.support.semo_process import engine_in, run_semo, start_semo
from tests.support.waiting import eventually_value

TIMEOUT = 120.0


ROLES = ("FE", "BE", "QA")


def block(tag: str, body: dict[str, Any], close: str) -> str:
    return f"[{tag}]\n{json.dumps(body)}\n[/{close}]"


def invocation_id(request: dict[str, Any]) -> str:
    match = re.search(r"Invocation ([0-9a-f-]{36}) from FE", json.dumps(request))
    assert match, "the invocation prompt names its id"
    return match.group(1)


def deliver(summary: str) -> Any:
    def reply(request: dict[str, Any]) -> str:
        body = {"invocation_id": invocation_id(request), "summary": summary}
        return "Done.\n\n" + block("DELIVER_RESULT:FE", body, "DELIVER_RESULT")

    return reply


ASK = block(
    "ASK_USER",
    {"type": "choice", "question": "Which database?", "options": ["postgres", "sqlite"]},
    "ASK_USER",
)


INVOKE_BE = block("INVOKE:BE", {"task": "Add GET /health", "context": {"db": "postgres"}}, "INVOKE")


INVOKE_QA = "[INVOKE:QA]\nRun the whole test suite\n[/INVOKE]"


def write_office(folder: Path, store: str, apis: dict[str, ScriptedMessagesAPI]) -> None:
    write_claude_office(folder, "claude-jobs", store, apis, max_sessions=6)


async def semo(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return await run_semo(*args, cwd=folder)


def engine_process(
    folder: Path, apis: dict[str, ScriptedMessagesAPI]
) -> AbstractAsyncContextManager[asyncio.subprocess.Process]:
    return engine_in(folder, claude_env(folder / "elsewhere", folder / "home", apis["FE"]))


async def team_ready(folder: Path) -> None:
    async def ready() -> bool | None:
        listed = await semo(folder, "sessions", "--json")
        rows = json.loads(listed.stdout) if listed.returncode == 0 else []
        return sorted(r["role"] for r in rows if r["status"] == "ready") == sorted(ROLES) or None

    await eventually_value(ready, "FE, BE and QA ready", TIMEOUT)


async def start_job(folder: Path) -> asyncio.subprocess.Process:
    return await start_semo(
        "job", "create", "--role", "FE", "--task", "Build the login page", "--wait", cwd=folder
    )


async def answer_the_question(folder: Path) -> str:
    async def pending() -> dict[str, Any] | None:
        listed = await semo(folder, "questions", "--json")
        rows = json.loads(listed.stdout) if listed.returncode == 0 else []
        return rows[0] if rows else None

    question = await eventually_value(pending, "FE's question", TIMEOUT)
    assert (question["question"], question["options"]) == (
        "Which database?",
        ["postgres", "sqlite"],
    )
    answered = await semo(folder, "answer", question["id"], "--option", "1")
    assert answered.returncode == 0, answered.stderr
    return str(question["id"])


WAITING = "Understood; waiting for instructions."
