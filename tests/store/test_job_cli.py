"""A person runs a job with the CLI alone: `semo job create --wait`, `semo questions`,
`semo answer`, `semo job show`, `semo jobs`, `semo job cancel`, against a real `semo engine`
whose store (sqlite, or postgres in a fresh database) is chosen in semo.toml alone. The agents
are the scripted polite agent (tests/support/script_agent.py) as generic agents: FE asks a
question, invokes BE, gets its result and finishes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from semo.engine.config import load_config
from semo.engine.store import open_store
from semo.engine.store.base import Store
from semo.engine.store.migrate import migrate
from tests.store.conftest import fresh_database
from tests.support.job_cli_office import (
    CREATE_LOGIN_JOB,
    FE_SCRIPT,
    TIMEOUT,
    block,
    engine_process,
    ready,
    semo,
    semo_json,
    write_config,
)
from tests.support.semo_process import start_semo
from tests.support.waiting import eventually_value

SLOW_SCRIPT = [{"match": "Wait forever", "text": "working", "delay": 0.1}]


@pytest.fixture(params=["sqlite", "postgres"])
async def office(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """The [store] section of semo.toml for a fresh store of the backend."""
    if request.param == "sqlite":
        yield '[store]\nbackend = "sqlite"\nsqlite_path = "semo.db"'
        return
    async with fresh_database() as dsn:
        await migrate(dsn)
        yield f'[store]\nbackend = "postgres"\ndatabase_url = "{dsn}"'


@asynccontextmanager
async def engine_store(folder: Path, office: str) -> AsyncIterator[Store]:
    """The store the folder's semo.toml names, opened the way the CLI opens it."""
    config = load_config(folder / "semo.toml")
    async with open_store(config.store_config()) as store:
        yield store


async def test_a_job_run_with_the_cli_alone(office: str, tmp_path: Path) -> None:
    write_config(tmp_path, office, FE_SCRIPT)
    async with engine_process(tmp_path):
        await ready(tmp_path)
        context = '{"ticket": "WEB-12"}'
        waiting = await start_semo(*CREATE_LOGIN_JOB, "--context", context, cwd=tmp_path)

        async def the_question() -> dict[str, Any] | None:
            listed = await semo(tmp_path, "questions", "--json")
            rows = json.loads(listed.stdout) if listed.returncode == 0 else []
            return rows[0] if rows else None

        question = await eventually_value(the_question, "FE's question", TIMEOUT)
        assert question["question"] == "Which database?"
        assert question["role"] == "FE"  # who asks
        table = (await semo(tmp_path, "questions")).stdout.splitlines()
        assert table[0].split()[:2] == ["id", "role"] and table[1].split()[1] == "FE"
        # the short id the console shows is enough
        answered = await semo(tmp_path, "answer", question["id"][:8], "--option", "1")
        assert answered.returncode == 0, answered.stderr
        async with asyncio.timeout(TIMEOUT):
            out, err = await waiting.communicate()
        lines = out.decode().splitlines()
        assert waiting.returncode == 0, (out, err)

    job_id = lines[0]
    steps = [line.split()[1] for line in lines[1:] if line[:2].isdigit()]
    # each step once, in order (questions, invocations and results are the job's own)
    expected = ["started", "session", "delivered", "question_asked", "question_answered"]
    expected += ["invoked", "invocation_sent", "result_created", "result_delivered", "done"]
    assert [s for s in steps if s in expected] == expected, lines
    assert f"answer with: semo answer {question['id']}" in out.decode()
    assert lines[-1] == f"job {job_id} done after 1 attempt(s)"

    shown = await semo(tmp_path, "job", "show", job_id[:8], "--json")
    timeline = json.loads(shown.stdout)
    assert timeline["job"]["status"] == "done" and timeline["job"]["role"] == "FE"
    assert timeline["job"]["context"] == {"ticket": "WEB-12"}
    [invocation] = timeline["invocations"]
    [result] = timeline["results"]
    assert (invocation["status"], invocation["job_id"]) == ("delivered", job_id)
    assert (result["status"], result["job_id"], result["summary"]) == (
        "delivered",
        job_id,
        "GET /health added",
    )
    assert [q["answer"] for q in timeline["questions"]] == ["postgres"]
    text = (await semo(tmp_path, "job", "show", job_id)).stdout
    assert f"job {job_id}: done, 1 attempt(s), agent FE" in text
    assert "invocation " in text and "-> BE (delivered): Add GET /health" in text
    assert "result " in text and "from BE (delivered): GET /health added" in text

    assert await semo_json(tmp_path, "jobs", "--json") == []
    everything = await semo_json(tmp_path, "jobs", "--all", "--json")
    assert [(j["id"], j["status"], j["role"]) for j in everything] == [(job_id, "done", "FE")]


async def test_cancelling_a_running_job_and_a_pending_one(office: str, tmp_path: Path) -> None:
    write_config(tmp_path, office, SLOW_SCRIPT)
    async with engine_process(tmp_path):
        await ready(tmp_path)
        created = await semo(tmp_path, "job", "create", "--role", "FE", "--task", "Wait forever")
        assert created.returncode == 0, created.stderr
        job_id = created.stdout.strip()

        async def running() -> bool | None:
            shown = await semo_json(tmp_path, "job", "show", job_id, "--json")
            return "delivered" in [e["step"] for e in shown["entries"]] or None

        await eventually_value(running, "the job's prompt delivered", TIMEOUT)
        cancelled = await semo(tmp_path, "job", "cancel", job_id[:8], "--reason", "wrong task")
        assert cancelled.returncode == 0, cancelled.stderr

        async def ended() -> dict[str, Any] | None:
            shown = await semo_json(tmp_path, "job", "show", job_id, "--json")
            return shown if shown["job"]["status"] == "failed" else None

        timeline = await eventually_value(ended, "the job cancelled", TIMEOUT)
        assert timeline["job"]["failure_reason"] == "cancelled: wrong task"
        steps = [e["step"] for e in timeline["entries"]]
        assert steps[-3:] == ["cancel_requested", "cancelling", "failed"]
        again = await semo(tmp_path, "job", "cancel", job_id)
        assert again.returncode == 2 and "has ended (failed: cancelled: wrong task)" in again.stderr

    # no engine: a job stays pending, and a cancel fails it at once
    created = await semo(tmp_path, "job", "create", "--role", "FE", "--task", "later", "--json")
    pending = json.loads(created.stdout)
    assert pending["status"] == "pending"
    listed = await semo_json(tmp_path, "jobs", "--json")
    assert [j["id"] for j in listed] == [pending["id"]]
    cancelled = await semo(tmp_path, "job", "cancel", pending["id"], "--json")
    assert json.loads(cancelled.stdout)["failure_reason"] == (
        "cancelled: cancelled by an operator (semo job cancel)"
    )


async def test_bad_job_requests_are_clear_errors(office: str, tmp_path: Path) -> None:
    write_config(tmp_path, office, FE_SCRIPT)
    async with engine_process(tmp_path):
        await ready(tmp_path)
    cases = [
        (["--role", "XX", "--task", "t"], "no agent with role 'XX' in this office (roles: BE, FE)"),
        (["--role", "FE", "--task", "t", "--context", "[1]"], "--context must be a JSON object"),
        (["--role", "FE", "--task", "t", "--context", "{"], "--context is not JSON"),
        (["--role", "FE", "--task", "  "], "the task is empty"),
        (["--role", "FE", "--task", ""], "the task is empty"),
        (["--role", "FE", "--task", "x" * 100_001], "task: String should have at most 100000"),
    ]
    for args, message in cases:
        result = await semo(tmp_path, "job", "create", *args)
        assert result.returncode == 2, (args, result.stderr)
        assert message in result.stderr, (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr  # one line, no dump
    missing = await semo(tmp_path, "job", "show", "no-such-job")
    assert missing.returncode == 2 and "no job no-such-job" in missing.stderr
    assert await semo_json(tmp_path, "jobs", "--all", "--json") == []


FE_RETRY_SCRIPT = [
    {"match": "Retry (attempt 2)", "text": block("INVOKE:BE", {"task": "quick health"}, "INVOKE")},
    {
        "match": "Build the login page",
        "text": block("INVOKE:BE", {"task": "slow health"}, "INVOKE"),
    },
    {"match": "Result of invocation", "text": "[SEMO:DONE] login page built"},
]
BE_RETRY_SCRIPT = [
    {
        "match": "slow health",
        "text": block("DELIVER_RESULT:FE", {"summary": "too late"}, "DELIVER_RESULT"),
        "delay": 600,
    },
    {
        "match": "quick health",
        "text": block("DELIVER_RESULT:FE", {"summary": "health added"}, "DELIVER_RESULT"),
    },
]


async def test_an_engine_killed_mid_invocation_the_next_engine_retries_the_job(
    office: str, tmp_path: Path
) -> None:
    """SIGKILL while BE works on FE's invocation: the next engine cancels the job's open
    invocation (never sent again), retries the job once from a new FE session, and the job
    ends done; every invocation and result is the job's, and each invocation reached BE
    once."""
    write_config(tmp_path, office, FE_RETRY_SCRIPT)
    (tmp_path / "BE.json").write_text(json.dumps(BE_RETRY_SCRIPT))
    async with engine_process(tmp_path) as first:
        await ready(tmp_path)
        waiting = await start_semo(*CREATE_LOGIN_JOB, cwd=tmp_path)

        async def be_working() -> bool | None:
            log = tmp_path / "BE.log"
            return (log.exists() and "slow health" in log.read_text()) or None

        await eventually_value(be_working, "BE working on the slow invocation", TIMEOUT)
        first.kill()
        await first.wait()
    async with engine_process(tmp_path):
        async with asyncio.timeout(TIMEOUT * 2):
            out, err = await waiting.communicate()
    lines = out.decode().splitlines()
    assert waiting.returncode == 0, (out, err)
    job_id = lines[0]
    assert lines[-1] == f"job {job_id} done after 2 attempt(s)"
    steps = [line.split()[1] for line in lines[1:] if line[:2].isdigit()]
    died = steps.index("engine_died")
    assert steps[died : died + 2] == ["engine_died", "retry"]
    assert steps[-1] == "done"

    timeline = await semo_json(tmp_path, "job", "show", job_id, "--json")
    assert (timeline["job"]["status"], timeline["job"]["attempts"]) == ("done", 2)
    invocations = {i["task"]: i for i in timeline["invocations"]}
    assert invocations["slow health"]["status"] == "cancelled"
    assert "while running this job" in invocations["slow health"]["error"]
    assert invocations["quick health"]["status"] == "delivered"
    assert [r["summary"] for r in timeline["results"]] == ["health added"]
    # nothing untracked: every invocation and result of the office is the job's
    async with engine_store(tmp_path, office) as store:
        [row] = await store.list_offices()
        everything = await store.list_invocations(row.id)
        results = await store.list_results(row.id)
    assert {i.job_id for i in everything} == {job_id} and len(everything) == 2
    assert {r.job_id for r in results} == {job_id} and len(results) == 1
    # each invocation reached BE once: the cancelled one was never sent again
    be_prompts = (tmp_path / "BE.log").read_text()
    assert be_prompts.count("slow health") == 1
    assert be_prompts.count("quick health") == 1
