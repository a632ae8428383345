"""Helpers of test_claude_approvals that other test modules use too."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from tests.support.office_files import write_claude_office
from tests.support.scripted_api import ScriptedMessagesAPI, ScriptedReply, ToolUse
from tests.support.semo_process import run_semo
from tests.support.waiting import eventually_value

TIMEOUT = 90.0


def bash(command: str) -> ToolUse:
    return ToolUse("Bash", {"command": command, "description": "Run it"})


def uses(*tools: ToolUse, text: str = "Working on it.") -> ScriptedReply:
    return ScriptedReply(text, tool_uses=tools)


def write_office(
    folder: Path, api: ScriptedMessagesAPI, *, mode: str | None, approvals: str = ""
) -> None:
    store = '[store]\nbackend = "sqlite"\nsqlite_path = "semo.db"'
    write_claude_office(folder, "claude-approvals", store, {"FE": api}, max_sessions=2)
    config = folder / "semo.toml"
    extra = f'permission_mode = "{mode}"\n' if mode else ""
    config.write_text(config.read_text() + extra + approvals)


async def semo(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return await run_semo(*args, cwd=folder)


async def semo_json(folder: Path, *args: str) -> Any:
    done = await semo(folder, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def fe_ready(folder: Path) -> None:
    async def ready() -> bool | None:
        done = await semo(folder, "sessions", "--json")
        rows = json.loads(done.stdout) if done.returncode == 0 else []
        return any(r["role"] == "FE" and r["status"] == "ready" for r in rows) or None

    await eventually_value(ready, "FE ready", TIMEOUT)


async def pending_permission(folder: Path) -> dict[str, Any]:
    async def pending() -> dict[str, Any] | None:
        rows = await semo_json(folder, "questions")
        asks = [r for r in rows if r["question_type"] == "permission"]
        return asks[0] if asks else None

    return await eventually_value(pending, "a permission request in semo questions", TIMEOUT)


async def create_job(folder: Path, task: str) -> str:
    done = await semo(folder, "job", "create", "--role", "FE", "--task", task)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()[0]


async def job_status(folder: Path, job_id: str, status: str) -> dict[str, Any]:
    async def reached() -> dict[str, Any] | None:
        shown = await semo_json(folder, "job", "show", job_id)
        return shown if shown["job"]["status"] == status else None

    return await eventually_value(reached, f"job {job_id} {status}", TIMEOUT)


def tool_results(api: ScriptedMessagesAPI) -> list[dict[str, Any]]:
    """Every tool_result block the CLI sent back to the model, in order."""
    out = []
    for request in api.main_requests:
        last = request.body["messages"][-1]
        content = last.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                out.append(block)
    return out


def result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return str(content)


RULES = """
[approvals]
deny_after_minutes = 30

[[approvals.rules]]
name = "text files"
tool = "Bash"
pattern = "touch *.txt"
decision = "allow"

[[approvals.rules]]
name = "no pushes"
tool = "Bash"
pattern = "git push*"
decision = "deny"
reason = "Pushing is the operator's job."
"""


API_TOKEN = "approvals-rest-token-0123456789"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def other_permission(
    find: Callable[[], Awaitable[dict[str, Any] | None]], seen: str
) -> dict[str, Any] | None:
    found = await find()
    return found if found is not None and found["id"] != seen else None
