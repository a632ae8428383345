"""A person runs a job for the real Claude Code team (FE, BE, QA) with the CLI alone:
`semo job create --wait`, `semo questions`, `semo answer`, `semo job show`, against a real
`semo engine` process whose store (sqlite, or postgres in a fresh database) is chosen in
semo.toml alone. Each agent talks to its own scripted Messages API (offline).

The second test SIGKILLs the engine while BE works on FE's invocation: the next engine retries
the job once and finishes it; every invocation reached BE once (the cancelled one was never sent
again) and every invocation and result of the office is the job's.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from semo.engine.config import load_config
from semo.engine.store import open_store
from semo.engine.store.migrate import migrate
from tests.store.conftest import fresh_database
from tests.support.claude_jobs import (
    ASK,
    INVOKE_BE,
    INVOKE_QA,
    ROLES,
    TIMEOUT,
    WAITING,
    answer_the_question,
    block,
    deliver,
    engine_process,
    semo,
    start_job,
    team_ready,
    write_office,
)
from tests.support.office_files import kept_temp_dir
from tests.support.scripted_api import ScriptedMessagesAPI
from tests.support.scripted_api import last_user_text as last_user

pytestmark = pytest.mark.claude


@pytest.fixture
def folder() -> Iterator[Path]:
    with kept_temp_dir("semo-cj-") as path:
        yield path


@pytest.fixture(params=["sqlite", "postgres"])
async def store_section(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield '[store]\nbackend = "sqlite"\nsqlite_path = "semo.db"'
        return
    async with fresh_database() as dsn:
        await migrate(dsn)
        yield f'[store]\nbackend = "postgres"\ndatabase_url = "{dsn}"'


@pytest.mark.timeout(300)
async def test_a_claude_team_job_with_the_cli_alone(store_section: str, folder: Path) -> None:
    replies = {
        "FE": [ASK, INVOKE_BE, INVOKE_QA, "[SEMO:DONE] login page built on postgres"],
        "BE": [deliver("GET /health added")],
        "QA": [deliver("All tests passed (12)")],
    }
    apis = {role: ScriptedMessagesAPI(replies=replies[role]).start() for role in ROLES}
    try:
        write_office(folder, store_section, apis)
        async with engine_process(folder, apis):
            await team_ready(folder)
            job = await start_job(folder)
            question_id = await answer_the_question(folder)
            async with asyncio.timeout(TIMEOUT):
                out, err = await job.communicate()
        lines = out.decode().splitlines()
        assert job.returncode == 0, (lines, err.decode(), (folder / "engine.log").read_text())
        job_id = lines[0]
        assert lines[-1] == f"job {job_id} done after 1 attempt(s)"
        steps = [line.split()[1] for line in lines[1:] if line[:2].isdigit()]
        assert steps[:6] == ["created", "started", "branch", "session", "worktree", "delivered"]
        assert steps.count("invocation_sent") == 2 and steps.count("result_delivered") == 2
        assert steps[-1] == "done"

        shown = json.loads((await semo(folder, "job", "show", job_id, "--json")).stdout)
        assert (shown["job"]["status"], shown["job"]["role"]) == ("done", "FE")
        assert [(q["id"], q["answer"]) for q in shown["questions"]] == [(question_id, "postgres")]
        invocations = shown["invocations"]
        assert sorted(i["task"] for i in invocations) == [
            "Add GET /health",
            "Run the whole test suite",
        ]
        assert {(i["status"], i["job_id"]) for i in invocations} == {("delivered", job_id)}
        results = shown["results"]
        assert sorted(r["summary"] for r in results) == [
            "All tests passed (12)",
            "GET /health added",
        ]
        assert {(r["status"], r["job_id"]) for r in results} == {("delivered", job_id)}
        text = (await semo(folder, "job", "show", job_id)).stdout
        assert f"job {job_id}: done, 1 attempt(s), agent FE" in text

        fe = [r.last_user_text() for r in apis["FE"].main_requests]
        assert "Build the login page" in fe[0]
        assert f"Answer to your question {question_id}: postgres" in fe[1]
        assert "from BE: GET /health added" in fe[2] and "from QA: All tests passed" in fe[3]
        assert len(fe) == 4
        assert len(apis["BE"].main_requests) == len(apis["QA"].main_requests) == 1
    finally:
        for api in apis.values():
            api.close()


@pytest.mark.timeout(400)
async def test_the_engine_sigkilled_mid_invocation_the_next_one_finishes_the_job(
    store_section: str, folder: Path
) -> None:
    """The scripted models answer by what they were just told (a Claude Code session resumed
    by the next engine may first be told that its engine stopped: it waits)."""
    release = threading.Event()
    slow_started = threading.Event()
    invoked: list[str] = []

    def be(request: dict[str, Any]) -> str:
        match = re.search(r"Invocation ([0-9a-f-]{36}) from FE", last_user(request))
        if match is None:
            return WAITING
        invoked.append(match.group(1))
        if len(invoked) == 1:
            slow_started.set()
            release.wait(TIMEOUT)  # BE "works" until its engine is gone
        body = {"invocation_id": match.group(1), "summary": "GET /health added"}
        return "Done.\n\n" + block("DELIVER_RESULT:FE", body, "DELIVER_RESULT")

    def fe(request: dict[str, Any]) -> str:
        text = last_user(request)
        if "You were working on job" in text:
            return WAITING  # its invocation is still out: wait for the result
        if "Build the login page" in text:
            return INVOKE_BE
        if "Result of invocation" in text:
            return "[SEMO:DONE] login page built"
        return WAITING

    replies = {"FE": [fe] * 10, "BE": [be] * 10, "QA": [lambda request: WAITING] * 10}
    apis = {role: ScriptedMessagesAPI(replies=replies[role]).start() for role in ROLES}
    try:
        write_office(folder, store_section, apis)
        async with engine_process(folder, apis) as first:
            await team_ready(folder)
            job = await start_job(folder)
            await asyncio.to_thread(slow_started.wait, TIMEOUT)
            first.kill()
            await first.wait()
        async with engine_process(folder, apis):
            async with asyncio.timeout(TIMEOUT * 2):
                out, err = await job.communicate()
        release.set()
        lines = out.decode().splitlines()
        assert job.returncode == 0, (lines, err.decode(), (folder / "engine.log").read_text())
        job_id = lines[0]
        assert lines[-1] == f"job {job_id} done after 2 attempt(s)"
        steps = [line.split()[1] for line in lines[1:] if line[:2].isdigit()]
        died = steps.index("engine_died")
        assert steps[died : died + 2] == ["engine_died", "retry"] and steps[-1] == "done"

        shown = json.loads((await semo(folder, "job", "show", job_id, "--json")).stdout)
        assert (shown["job"]["status"], shown["job"]["attempts"]) == ("done", 2)
        # FE's conversation was resumed and went on with the job: its one invocation stayed
        # open, was sent again to BE's resumed conversation (with a restart note) and delivered
        [invocation] = shown["invocations"]
        assert invocation["status"] == "delivered"
        assert [r["summary"] for r in shown["results"]] == ["GET /health added"]
        assert invoked == [invocation["id"], invocation["id"]]
        be_prompts = [r.last_user_text() for r in apis["BE"].main_requests]
        assert any("semo was restarted while this invocation" in text for text in be_prompts)
        # one turn after the restart: the invocation again, the restart note in it (a note of
        # its own first made a Claude agent go on with the task, then do it again)
        assert not any("this conversation was resumed" in text for text in be_prompts)
        assert len(be_prompts) == 2, be_prompts
        fe_prompts = [r.last_user_text() for r in apis["FE"].main_requests]
        assert sum("You were working on job" in text for text in fe_prompts) == 1
        assert not any("Retry (attempt 2)" in text for text in fe_prompts)
        first_prompts = [text for text in fe_prompts if "You were" not in text]
        assert sum("Build the login page" in text for text in first_prompts) == 1
        # nothing untracked: every invocation and result of the office is the job's
        config = load_config(folder / "semo.toml")
        async with open_store(config.store_config()) as store:
            [office] = await store.list_offices()
            invocations = await store.list_invocations(office.id)
            results = await store.list_results(office.id)
        assert len(invocations) == 1 and {i.job_id for i in invocations} == {job_id}
        assert len(results) == 1 and {r.job_id for r in results} == {job_id}
    finally:
        release.set()
        for api in apis.values():
            api.close()
