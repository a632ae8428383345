"""`[ship] on_done` in a real `semo engine` (a subprocess, sqlite office): a job its scripted
FE finishes is pushed to the local bare `origin` and merged into main by the engine itself,
with `pushed` and `merged` on its timeline after `done`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.support.git_repo import git
from tests.support.job_cli_office import (
    CREATE_LOGIN_JOB,
    TIMEOUT,
    engine_process,
    ready,
    semo,
    write_config,
)
from tests.support.semo_process import start_semo
from tests.support.ship_office import FE_WRITES_THE_PAGE, with_origin
from tests.support.waiting import eventually_value


@pytest.mark.timeout(240)
async def test_the_engine_ships_a_done_job_by_itself(tmp_path: Path) -> None:
    config = write_config(
        tmp_path, '[store]\nbackend = "sqlite"\nsqlite_path = "semo.db"', FE_WRITES_THE_PAGE
    )
    repo, origin = with_origin(tmp_path)
    with config.open("a") as toml:
        toml.write('\n[ship]\non_done = ["push", "merge"]\n')
    async with engine_process(tmp_path):
        await ready(tmp_path)
        created = await start_semo(*CREATE_LOGIN_JOB, cwd=tmp_path)
        async with asyncio.timeout(TIMEOUT * 2):
            out, err = await created.communicate()
        lines = out.decode().splitlines()
        assert created.returncode == 0, (lines, err.decode())
        job_id = lines[0]

        async def shipped() -> list[str] | None:
            shown = await semo(tmp_path, "job", "show", job_id, "--json")
            steps = [e["step"] for e in json.loads(shown.stdout)["entries"]]
            return steps if "merged" in steps or "ship_failed" in steps else None

        steps = await eventually_value(shipped, "the job shipped", TIMEOUT)
    assert steps[-3:] == ["done", "pushed", "merged"], steps
    branch = f"semo/job/{job_id}"
    head = git(repo, "rev-parse", branch).strip()
    assert git(origin, "rev-parse", branch).strip() == head
    assert git(repo, "rev-parse", "main").strip() == head
    assert git(repo, "show", "main:login.html") == "<form>login</form>\n"
