"""A job's work on its branch, with the real Claude Code team (FE, BE, QA) and a real `semo
engine` (sqlite), each agent talking to its own scripted Messages API whose tool calls really
run in the agent's worktree:

- FE commits a page, invokes BE, BE leaves a file uncommitted: the job ends done with one job
  branch holding both roles' commits, and `semo job diff` shows both files; `semo job ship
  --pr --merge` pushes it to a local bare origin, a loopback GitHub API receives exactly one
  PR whose body names the job, and main is fast-forwarded to it;
- FE and BE write the same file differently: the job ends needs_review naming the file; `semo
  job resolve --prompt` hands it to BE, whose worktree gets the conflict, BE resolves it, and
  the job is done with the resolution on its branch, which `semo job ship --merge` lands on main;
- the engine is SIGKILLed after FE wrote half its work: the next engine goes on with the job on
  the same branch and worktree, and the job branch holds both halves; nothing was saved
  elsewhere or left behind.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.claude_jobs import (
    ROLES,
    TIMEOUT,
    WAITING,
    block,
    engine_process,
    semo,
    team_ready,
    write_office,
)
from tests.support.github_api import GitHubApi
from tests.support.office_files import kept_temp_dir
from tests.support.scripted_api import ScriptedMessagesAPI, ScriptedReply, ToolUse
from tests.support.scripted_api import last_user_text as last_user
from tests.support.semo_process import run_semo, semo_env, start_semo
from tests.support.waiting import eventually_value

pytestmark = pytest.mark.claude

SQLITE = '[store]\nbackend = "sqlite"\nsqlite_path = "semo.db"'
INVOKE_BE = block("INVOKE:BE", {"task": "Add GET /health"}, "INVOKE")


@pytest.fixture
def folder() -> Iterator[Path]:
    with kept_temp_dir("semo-jb-") as path:
        yield path


def bash(command: str, what: str) -> ScriptedReply:
    return ScriptedReply(
        f"{what}.", tool_uses=(ToolUse("Bash", {"command": command, "description": what}),)
    )


def tool_result(request: dict[str, Any]) -> bool:
    """Whether the request's last user message carries a tool's result."""
    messages = request.get("messages") or []
    last = messages[-1] if messages else {}
    content = last.get("content") if last.get("role") == "user" else None
    return isinstance(content, list) and any(
        isinstance(c, dict) and c.get("type") == "tool_result" for c in content
    )


def invocation(request: dict[str, Any]) -> str | None:
    match = re.search(r"Invocation ([0-9a-f-]{36}) from FE", json.dumps(request))
    return match.group(1) if match else None


def delivered(request: dict[str, Any], summary: str) -> str:
    body = {"invocation_id": invocation(request), "summary": summary}
    return "Done.\n\n" + block("DELIVER_RESULT:FE", body, "DELIVER_RESULT")


def git(folder: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(folder / "repo"), *args], check=True, capture_output=True, text=True
    ).stdout


def agents(fe: Callable[..., Any], be: Callable[..., Any]) -> dict[str, ScriptedMessagesAPI]:
    replies = {"FE": [fe] * 12, "BE": [be] * 12, "QA": [lambda _request: WAITING] * 12}
    return {role: ScriptedMessagesAPI(replies=replies[role]).start() for role in ROLES}


async def run_job(folder: Path) -> tuple[str, list[str], int]:
    job = await start_semo(
        "job", "create", "--role", "FE", "--task", "Build the login page", "--wait", cwd=folder
    )
    async with asyncio.timeout(TIMEOUT * 2):
        out, err = await job.communicate()
    lines = out.decode().splitlines()
    assert lines, err.decode()
    return lines[0], lines, job.returncode or 0


def fe_page_then_be(final: str) -> Callable[[dict[str, Any]], Any]:
    def fe(request: dict[str, Any]) -> Any:
        text = last_user(request)
        if tool_result(request):
            return INVOKE_BE
        if "Build the login page" in text and "Retry" not in text:
            return bash(final, "Writing the page")
        if "Result of invocation" in text:
            return "[SEMO:DONE] login page built"
        return WAITING

    return fe


@pytest.mark.timeout(400)
async def test_fe_and_be_work_lands_on_one_job_branch(folder: Path) -> None:
    fe = fe_page_then_be(
        "echo '<form>login</form>' > login.html && git add login.html "
        "&& git commit -qm 'FE: the login page'"
    )

    def be(request: dict[str, Any]) -> Any:
        if tool_result(request):
            return delivered(request, "GET /health added")
        if invocation(request):
            return bash("printf 'def health():\\n    return 200\\n' > api.py", "Adding the route")
        return WAITING

    apis = agents(fe, be)
    try:
        write_office(folder, SQLITE, apis)
        async with engine_process(folder, apis):
            await team_ready(folder)
            job_id, lines, code = await run_job(folder)
            assert code == 0, (lines, (folder / "engine.log").read_text())
            shown = json.loads((await semo(folder, "job", "show", job_id, "--json")).stdout)
            diff = await semo(folder, "job", "diff", job_id)
            stat = await semo(folder, "job", "diff", job_id, "--stat")
        # shipped: the branch to a local bare origin, one PR to a loopback GitHub API, merged
        git(folder, "init", "-q", "--bare", str(folder / "origin.git"))
        git(folder, "remote", "add", "origin", str(folder / "origin.git"))
        with GitHubApi() as github:
            with (folder / "semo.toml").open("a") as toml:
                toml.write(
                    f'\n[ship]\npr_tool = "api"\ngithub_api_url = "{github.url}"\n'
                    'github_repo = "acme/shop"\n'
                )
            env = semo_env(GITHUB_TOKEN=github.token)
            shipped = await run_semo("job", "ship", job_id, "--pr", "--merge", cwd=folder, env=env)
        assert shipped.returncode == 0, shipped.stderr
        assert len(github.pulls) == 1 and job_id in github.pulls[0]["body"]
        assert "GET /health added" in github.pulls[0]["body"]
        job_head = git(folder, "rev-parse", f"semo/job/{job_id}")
        assert (
            git(folder, "--git-dir", str(folder / "origin.git"), "rev-parse", f"semo/job/{job_id}")
            == job_head
        )
        assert git(folder, "rev-parse", "main") == job_head  # fast-forwarded
        work = shown["work"]
        assert work["branch"] == f"semo/job/{job_id}" and work["base_branch"] == "main"
        by_role = {c["role"]: c["subject"] for c in work["commits"] if c["role"]}
        assert by_role["FE"] == "FE: the login page"  # FE's own commit, as "semo FE"
        assert by_role["BE"] == f"Build the login page (BE, job {job_id[:8]})"  # its leftover
        assert {f["path"] for f in work["files"]} == {"login.html", "api.py"}
        assert set(work["roles"]) == {"FE", "BE"}
        assert all(r["dirty"] is False for r in work["roles"].values())
        assert "+<form>login</form>" in diff.stdout and "+def health():" in diff.stdout
        assert "A api.py" in stat.stdout and "2 file(s) changed" in stat.stdout
        steps = [line.split()[1] for line in lines[1:] if line[:2].isdigit()]
        assert {"branch", "worktree", "committed", "combined"} <= set(steps)
        assert git(folder, "show", f"semo/job/{job_id}:login.html") == "<form>login</form>\n"
    finally:
        for api in apis.values():
            api.close()


@pytest.mark.timeout(400)
async def test_a_conflict_is_named_and_a_prompt_to_a_role_resolves_it(folder: Path) -> None:
    fe = fe_page_then_be("echo 'greeting = \"hello from FE\"' > app.py")
    resolved = threading.Event()

    def be(request: dict[str, Any]) -> Any:
        text = last_user(request)
        if tool_result(request):
            if resolved.is_set():
                return "[SEMO:DONE] kept both greetings"
            return delivered(request, "greeting changed")
        if "Keep both greetings" in text:
            resolved.set()
            return bash(
                "printf 'greeting = \"hello from FE and BE\"\\n' > app.py", "Resolving the conflict"
            )
        if invocation(request):
            return bash("echo 'greeting = \"hello from BE\"' > app.py", "Changing the greeting")
        return WAITING

    apis = agents(fe, be)
    try:
        write_office(folder, SQLITE, apis)
        async with engine_process(folder, apis):
            await team_ready(folder)
            job_id, lines, code = await run_job(folder)
            assert code == 1, (lines, (folder / "engine.log").read_text())
            assert lines[-1].startswith(f"job {job_id} needs_review after 1 attempt(s)")
            assert "the work of BE conflicts with the job branch in app.py" in lines[-1]
            shown = (await semo(folder, "job", "show", job_id)).stdout
            assert "conflict: the work of BE conflicts" in shown
            handed = await semo(folder, "job", "resolve", job_id, "--prompt", "Keep both greetings")
            assert handed.returncode == 0, handed.stderr

            async def done() -> dict[str, Any] | None:
                out = (await semo(folder, "job", "show", job_id, "--json")).stdout
                data = json.loads(out)
                return data if data["job"]["status"] not in ("pending", "running") else None

            final = await eventually_value(done, "the resolved job", TIMEOUT)
            shipped = await semo(folder, "job", "ship", job_id, "--merge")  # it can be shipped
        assert final["job"]["status"] == "done", (
            final["entries"],
            (folder / "engine.log").read_text(),
        )
        assert final["work"]["conflict"] is None
        steps = [e["step"] for e in final["entries"]]
        assert "resolve_requested" in steps and "resolving" in steps
        app = git(folder, "show", f"semo/job/{job_id}:app.py")
        assert app == 'greeting = "hello from FE and BE"\n'
        assert shipped.returncode == 0, shipped.stderr
        assert git(folder, "show", "main:app.py") == app  # merged into the base branch
        be_prompts = [r.last_user_text() for r in apis["BE"].main_requests]
        resolve_prompt = next(p for p in be_prompts if "Keep both greetings" in p)
        assert f"semo/job/{job_id}" in resolve_prompt and "[SEMO:DONE]" in resolve_prompt
    finally:
        for api in apis.values():
            api.close()


@pytest.mark.timeout(400)
async def test_a_job_retried_after_a_sigkill_continues_on_its_branch(folder: Path) -> None:
    release = threading.Event()
    half_written = threading.Event()
    state = {"rest": False}

    def fe(request: dict[str, Any]) -> Any:
        text = last_user(request)
        if tool_result(request):
            if state["rest"]:
                return "[SEMO:DONE] both halves written"
            half_written.set()
            release.wait(TIMEOUT)  # FE "thinks" until its engine is gone
            return WAITING
        if "You were working on job" in text or "Retry (attempt 2)" in text:
            state["rest"] = True
            return bash("echo rest > rest.txt", "Writing the rest")
        if "Build the login page" in text:
            return bash("echo half > half.txt", "Writing the first half")
        return WAITING

    apis = agents(fe, lambda _request: WAITING)
    try:
        write_office(folder, SQLITE, apis)
        async with engine_process(folder, apis) as first:
            await team_ready(folder)
            job = await start_semo(
                "job", "create", "--role", "FE", "--task", "Build the login page", "--wait",
                cwd=folder,
            )  # fmt: skip
            await asyncio.to_thread(half_written.wait, TIMEOUT)
            first.kill()
            await first.wait()
        release.set()
        async with engine_process(folder, apis):
            async with asyncio.timeout(TIMEOUT * 2):
                out, err = await job.communicate()
            lines = out.decode().splitlines()
            assert job.returncode == 0, (lines, err.decode(), (folder / "engine.log").read_text())
            job_id = lines[0]
            listed = json.loads((await semo(folder, "worktrees", "--json")).stdout)
        assert lines[-1] == f"job {job_id} done after 2 attempt(s)"
        branch = f"semo/job/{job_id}"
        assert git(folder, "show", f"{branch}:half.txt") == "half\n"
        assert git(folder, "show", f"{branch}:rest.txt") == "rest\n"
        # FE's work is on one branch (its warm worktree's first branch holds nothing)
        fe_work = git(
            folder,
            "branch",
            "--list",
            "semo/FE/*",
            "--no-merged",
            "main",
            "--format=%(refname:short)",
        )
        assert fe_work.split() == [f"semo/FE/job-{job_id}"]
        assert git(folder, "for-each-ref", "refs/heads/semo/saved") == ""
        fe_trees = [w for w in listed["worktrees"] if w["role"] == "FE"]
        # one FE worktree, the warm one (named per office and workspace: warm-fe-<digest>)
        assert [(w["task_id"].startswith("warm-fe-"), w["dirty"]) for w in fe_trees] == [
            (True, False)
        ], fe_trees
    finally:
        release.set()
        for api in apis.values():
            api.close()
