"""A job survives a SIGKILL of its engine in its Claude Code conversation (real `semo engine`
processes, the real Claude Code CLI offline against scripted Messages APIs, one per agent).

FE runs a job: it invokes BE, then is given another prompt (it is busy in that turn when BE
delivers, so BE's result waits for it, pending). The engine is SIGKILLed, agents and all. The
next engine:

- resumed: starts FE's conversation again with `claude --resume` in the same worktree and
  tells it to continue the job: the request the scripted API gets for that carries the earlier
  turns (the task, FE's INVOKE); then BE's result, which waited, is typed into the same
  conversation with a note that semo restarted; FE finishes, the job is done in 2 attempts, the
  invocation delivered, nothing cancelled, the task never sent again;
- resume fails (FE's CLI exits at once when asked to resume): a `resume_failed` step on the
  job's timeline, the job goes on in a new FE session with the whole task and a retry note, and
  BE's result is delivered to that session: neither the job nor the result is lost.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from semo.engine.config import load_config
from semo.engine.store import open_store
from semo.engine.store.models import AgentResult
from tests.support.claude_home import claude_env
from tests.support.office_files import kept_temp_dir, write_claude_office
from tests.support.scripted_api import ScriptedMessagesAPI
from tests.support.scripted_api import last_user_text as last_user
from tests.support.semo_process import engine_in, run_semo, start_semo
from tests.support.waiting import eventually_value

pytestmark = [pytest.mark.claude, pytest.mark.timeout(420)]

TIMEOUT = 120.0
TASK = "Build the login page"
BUSY = "Also look at the footer."
INVOKE_BE = '[INVOKE:BE]\n{"task": "Add GET /health"}\n[/INVOKE]'
WAITING = "Understood; waiting."
CONTINUING = "Picking up the login page where I left off."
STARTING_OVER = "Starting over on the login page."
DONE = "[SEMO:DONE] login page built"


class Script:
    """FE's and BE's scripted models, answering by what they were just told."""

    def __init__(self) -> None:
        self.be_invoked = threading.Event()
        self.fe_busy = threading.Event()
        self.release = threading.Event()
        self.invoked: list[str] = []
        self.fe_tasks = 0

    def fe(self, request: dict[str, Any]) -> str:
        text = last_user(request)
        if "You were working on job" in text:
            return CONTINUING
        if "Result of invocation" in text:
            return DONE
        if "Retry (attempt" in text:
            return STARTING_OVER
        if TASK in text:
            self.fe_tasks += 1
            return INVOKE_BE
        if BUSY in text:
            self.fe_busy.set()
            self.release.wait(TIMEOUT)  # busy until its engine is gone
            return WAITING
        return WAITING

    def be(self, request: dict[str, Any]) -> str:
        match = re.search(r"Invocation ([0-9a-f-]{36}) from FE", last_user(request))
        if match is None:
            return WAITING
        self.invoked.append(match.group(1))
        self.be_invoked.set()
        self.fe_busy.wait(TIMEOUT)  # FE is in another turn: the result waits for it
        body = {"invocation_id": match.group(1), "summary": "GET /health added"}
        return f"Done.\n\n[DELIVER_RESULT:FE]\n{json.dumps(body)}\n[/DELIVER_RESULT]"


@pytest.fixture
def folder() -> Iterator[Path]:
    with kept_temp_dir("semo-rj-") as path:
        yield path


def write_office(folder: Path, apis: dict[str, ScriptedMessagesAPI], fe_command: str) -> None:
    store = '[store]\nbackend = "sqlite"\nsqlite_path = "semo.db"'
    write_claude_office(
        folder, "resume-jobs", store, apis, max_sessions=4, commands={"FE": fe_command}
    )


def engine_env(folder: Path, api: ScriptedMessagesAPI) -> dict[str, str]:
    env = claude_env(folder / "elsewhere", folder / "home", api)
    env["XDG_STATE_HOME"] = str(folder / "state")
    return env


async def semo(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return await run_semo(*args, cwd=folder)


async def sessions(folder: Path) -> list[dict[str, Any]]:
    listed = await semo(folder, "sessions", "--json")
    return list(json.loads(listed.stdout)) if listed.returncode == 0 else []


async def ready_session(folder: Path, role: str) -> dict[str, Any]:
    async def ready() -> dict[str, Any] | None:
        rows = [r for r in await sessions(folder) if r["role"] == role]
        return next((r for r in rows if r["status"] == "ready"), None)

    return await eventually_value(ready, f"{role} ready", TIMEOUT)


async def pending_result(folder: Path) -> AgentResult:
    config = load_config(folder / "semo.toml")

    async def pending() -> AgentResult | None:
        async with open_store(config.store_config()) as store:
            [office] = await store.list_offices()
            return next(iter(await store.list_results(office.id, status="pending")), None)

    return await eventually_value(pending, "BE's result, waiting for FE", TIMEOUT)


def fake_claude(folder: Path) -> Path:
    """`claude` that exits at once when asked to resume while `fail-resume` exists."""
    real = shutil.which("claude")
    assert real is not None
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    script = bin_dir / "claude"
    flag = folder / "fail-resume"
    script.write_text(
        "#!/bin/sh\n"
        f'for a in "$@"; do if [ "$a" = --resume ] && [ -e "{flag}" ]; then\n'
        '  echo "cannot resume" >&2; exit 7; fi; done\n'
        f'exec "{real}" "$@"\n'
    )
    script.chmod(0o755)
    return script


@pytest.mark.parametrize("resume", ["works", "fails"])
async def test_a_job_goes_on_in_its_conversation_after_an_engine_sigkill(
    folder: Path, resume: str
) -> None:
    script = Script()
    apis = {
        "FE": ScriptedMessagesAPI(replies=[script.fe] * 12).start(),
        "BE": ScriptedMessagesAPI(replies=[script.be] * 12).start(),
    }
    try:
        fe_command = await asyncio.to_thread(fake_claude, folder)
        await asyncio.to_thread(write_office, folder, apis, str(fe_command))
        env = engine_env(folder, apis["FE"])
        async with engine_in(folder, env, log="first.log") as first:
            await ready_session(folder, "BE")
            fe = await ready_session(folder, "FE")
            job = await start_semo(
                "job", "create", "--role", "FE", "--task", TASK, "--wait", cwd=folder
            )
            await asyncio.to_thread(script.be_invoked.wait, TIMEOUT)
            await ready_session(folder, "FE")  # its INVOKE turn is over
            payload = json.dumps({"prompt": BUSY})
            sent = await semo(
                folder, "command", "send_prompt", "--session", fe["session_id"],
                "--payload", payload,
            )  # fmt: skip
            assert sent.returncode == 0, sent.stderr
            result = await pending_result(folder)
            await asyncio.sleep(1.0)  # the CLIs write their transcripts after the hooks
            first.kill()
            await first.wait()
        script.release.set()
        if resume == "fails":
            (folder / "fail-resume").touch()
        before = len(apis["FE"].main_requests)
        async with engine_in(folder, env, log="second.log"):
            async with asyncio.timeout(TIMEOUT * 2):
                out, err = await job.communicate()
        logs = (folder / "first.log").read_text() + (folder / "second.log").read_text()
        lines = out.decode().splitlines()
        assert job.returncode == 0, (lines, err.decode(), logs)
        job_id = lines[0]
        assert lines[-1] == f"job {job_id} done after 2 attempt(s)", lines
        steps = [line.split()[1] for line in lines[1:] if line[:2].isdigit()]
        died = steps.index("engine_died")
        assert steps[died : died + 2] == ["engine_died", "retry"] and steps[-1] == "done"

        shown = json.loads((await semo(folder, "job", "show", job_id, "--json")).stdout)
        [invocation] = shown["invocations"]
        assert invocation["status"] == "delivered"  # not cancelled with the dead engine
        [delivered] = shown["results"]
        assert (delivered["id"], delivered["status"]) == (result.id, "delivered")
        assert script.invoked == [invocation["id"]]  # BE's work was not redone

        after = [r.last_user_text() for r in apis["FE"].main_requests[before:]]
        [told] = [i for i, text in enumerate(after) if "Result of invocation" in text]
        assert "it was waiting for you when semo restarted" in after[told]
        if resume == "works":
            assert "resume_failed" not in steps
            [cont] = [r for r in apis["FE"].main_requests[before:] if "working on job" in
                      r.last_user_text()]  # fmt: skip
            body = cont.body_text()
            assert TASK in body and "[INVOKE:BE]" in body  # the earlier turns
            assert after.index(cont.last_user_text()) < told  # told to continue first
            resumed_request = apis["FE"].main_requests[before + told].body_text()
            assert TASK in resumed_request and CONTINUING in resumed_request
            assert script.fe_tasks == 1  # the task was never sent again
            assert not any("Retry (attempt" in text for text in after)
        else:
            assert "resume_failed" in steps
            assert "not resumed" in (folder / "second.log").read_text()
            assert script.fe_tasks == 1 and sum("Retry (attempt 2)" in t for t in after) == 1
            retry = next(t for t in after if "Retry (attempt 2)" in t)
            assert TASK in retry and "goes on" in retry
            assert not any("working on job" in text for text in after)
    except BaseException:
        show_what_happened(folder, apis)  # in the failure's captured output
        raise
    finally:
        script.release.set()
        script.fe_busy.set()
        for api in apis.values():
            api.close()


def show_what_happened(folder: Path, apis: dict[str, ScriptedMessagesAPI]) -> None:
    for name in ("first.log", "second.log"):
        path = folder / name
        if path.exists():
            print(f"--- {name} (last 80 lines)")
            print("\n".join(path.read_text(errors="replace").splitlines()[-80:]))
    for role, api in apis.items():
        print(f"--- {role}: what each main request ended with")
        for request in api.main_requests:
            print(repr(request.last_user_text()[-300:]))
