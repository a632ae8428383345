"""An office driven by the `semo job` command line: scripted FE and BE agents, an engine process."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from tests.support.git_repo import make_repo
from tests.support.office_files import engine_pool_toml
from tests.support.semo_process import engine_in, run_semo, semo_env
from tests.support.waiting import eventually_value

REPO = Path(__file__).resolve().parents[2]


TIMEOUT = 60.0


#: `semo job create --wait` of FE's login page (the scripts' first match)
CREATE_LOGIN_JOB = ("job", "create", "--role", "FE", "--task", "Build the login page", "--wait")


def block(tag: str, body: dict[str, Any], close: str) -> str:
    return f"[{tag}]\n{json.dumps(body)}\n[/{close}]"


FE_SCRIPT = [
    {
        "match": "Build the login page",
        "text": block(
            "ASK_USER",
            {"type": "choice", "question": "Which database?", "options": ["postgres", "sqlite"]},
            "ASK_USER",
        ),
    },
    {
        "match": "Answer to your question",
        "text": block("INVOKE:BE", {"task": "Add GET /health"}, "INVOKE"),
    },
    {"match": "Result of invocation", "text": "[SEMO:DONE] login page built"},
]


BE_SCRIPT = [
    {
        "match": "Invocation",
        "text": block("DELIVER_RESULT:FE", {"summary": "GET /health added"}, "DELIVER_RESULT"),
    }
]


def agent_toml(folder: Path, role: str, script: list[Any]) -> str:
    path = folder / f"{role}.json"
    path.write_text(json.dumps(script))
    command = [sys.executable, "-m", "tests.support.script_agent", "--script", str(path)]
    command += ["--log", str(folder / f"{role}.log")]
    return f"""
[[agents]]
role = "{role}"
profile = "generic"
command = {json.dumps(command)}
env = {{ PYTHONPATH = "{REPO}" }}
reads_prompts = true
"""


def write_config(folder: Path, store: str, fe: list[Any]) -> Path:
    make_repo(folder / "repo")
    agents = agent_toml(folder, "FE", fe) + agent_toml(folder, "BE", BE_SCRIPT)
    pool = engine_pool_toml(
        command_timeout=10, shutdown_grace=1, max_sessions=3, warm_roles=["FE", "BE"]
    )
    config = folder / "semo.toml"
    config.write_text(
        f"""
[office]
name = "cli-jobs"
repository = "repo"
workspace_root = "ws"

{store}
{pool}{agents}"""
    )
    return config


async def semo(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return await run_semo(*args, cwd=folder, timeout=TIMEOUT)


async def semo_json(folder: Path, *args: str) -> Any:
    """What `semo ARGS` printed, as JSON; a failing command fails the test with its stderr."""
    done = await semo(folder, *args)
    assert done.returncode == 0, f"semo {' '.join(args)}: exit {done.returncode}: {done.stderr}"
    return json.loads(done.stdout)


def engine_process(folder: Path) -> AbstractAsyncContextManager[asyncio.subprocess.Process]:
    return engine_in(folder, semo_env(), grace=TIMEOUT)


async def ready(folder: Path) -> None:
    async def both_ready() -> bool | None:
        listed = await semo(folder, "sessions", "--json")
        rows = json.loads(listed.stdout) if listed.returncode == 0 else []
        return sorted(r["role"] for r in rows if r["status"] == "ready") == ["BE", "FE"] or None

    await eventually_value(both_ready, "FE and BE ready", TIMEOUT)
