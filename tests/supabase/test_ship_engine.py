"""`ship_job` end to end: a team's operator ships a finished job from Supabase to a running
`semo engine` (a real subprocess on the Supabase emulator's office, started as a user would).

The job is done first, through the CLI (`semo job create --wait`): FE, a scripted generic agent
in its worktree, writes `login.html` and finishes; the job's branch holds it. The repository
has a local bare `origin`, `[ship]` names a loopback GitHub API (tests/support/github_api.py)
and the engine has GITHUB_TOKEN in its environment. An operator added with `semo office
members add` signs in and inserts `ship_job` rows through PostgREST (RLS applies):
- `{"pr": true}`: the branch is pushed to origin, the API receives exactly one pull request
  (head the job's branch, base main, its body names the job and its outcome), the command's
  result reports it and the timeline has `pushed` and `pr_opened`;
- `{"pr": true, "merge": true}`: no second pull request (the job has one); main is
  fast-forwarded to the job's branch; `merged` is on the timeline.
The token is in no result, timeline entry or log line.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.git_repo import git
from tests.support.github_api import GitHubApi
from tests.support.job_cli_office import CREATE_LOGIN_JOB, write_config
from tests.support.semo_process import engine_in, start_semo
from tests.support.ship_office import FE_WRITES_THE_PAGE, with_origin
from tests.support.supabase_dashboard import TIMEOUT, env_for, office, semo
from tests.support.supabase_emulator import SupabaseEmulator
from tests.support.waiting import eventually_value

PASSWORD = "an operator's password"
EMAIL = "operator@team.test"


async def operator_token(emulator: SupabaseEmulator) -> str:
    async with httpx.AsyncClient() as http:
        response = await http.post(
            f"{emulator.url}/auth/v1/token",
            params={"grant_type": "password"},
            json={"email": EMAIL, "password": PASSWORD},
            headers={"apikey": emulator.anon_key},
        )
    assert response.status_code == 200, response.text
    return str(response.json()["access_token"])


async def ship_from_supabase(
    emulator: SupabaseEmulator, token: str, office_id: str, payload: dict[str, Any]
) -> dict[str, Any]:
    """Insert a `ship_job` row as the operator (PostgREST, RLS) and wait for its result."""
    headers = {"apikey": emulator.anon_key, "Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=f"{emulator.url}/rest/v1", headers=headers) as http:
        inserted = await http.post(
            "/agent_commands",
            json={"office_id": office_id, "command_type": "ship_job", "payload": payload},
            headers={"Prefer": "return=representation"},
        )
        assert inserted.status_code == 201, inserted.text
        command_id = inserted.json()[0]["id"]

        async def result() -> dict[str, Any] | None:
            rows = await http.get(
                "/agent_command_results", params={"command_id": f"eq.{command_id}"}
            )
            assert rows.status_code == 200, rows.text
            return rows.json()[0] if rows.json() else None

        return await eventually_value(result, f"the result of {payload}", TIMEOUT)


async def team_ready(folder: Path, emulator: SupabaseEmulator) -> None:
    async def ready() -> bool | None:
        listed = await semo(folder, emulator, "sessions", "--json")
        rows = json.loads(listed.stdout) if listed.returncode == 0 else []
        return sorted(r["role"] for r in rows if r["status"] == "ready") == ["BE", "FE"] or None

    await eventually_value(ready, "FE and BE ready", TIMEOUT)


@pytest.mark.timeout(300)
async def test_an_operator_ships_a_done_job_through_supabase(tmp_path: Path) -> None:
    async with office() as (emulator, _dsn):
        store = f'[store]\nbackend = "supabase"\nsupabase_url = "{emulator.url}"'
        config = write_config(tmp_path, store, FE_WRITES_THE_PAGE)
        repo, origin = with_origin(tmp_path)
        with GitHubApi() as github:
            with config.open("a") as toml:
                toml.write(
                    f'\n[ship]\npr_tool = "api"\ngithub_api_url = "{github.url}"\n'
                    'github_repo = "acme/shop"\n'
                )
            env = env_for(emulator) | {"GITHUB_TOKEN": github.token}
            async with engine_in(tmp_path, env, grace=TIMEOUT):
                await team_ready(tmp_path, emulator)
                created = await start_semo(*CREATE_LOGIN_JOB, cwd=tmp_path, env=env)
                async with asyncio.timeout(TIMEOUT * 2):
                    out, err = await created.communicate()
                lines = out.decode().splitlines()
                assert created.returncode == 0, (lines, err.decode())
                job_id = lines[0]
                assert lines[-1] == f"job {job_id} done after 1 attempt(s)"
                branch = f"semo/job/{job_id}"
                head = git(repo, "rev-parse", branch).strip()
                assert git(repo, "show", f"{branch}:login.html") == "<form>login</form>\n"

                await asyncio.to_thread(emulator.create_user, EMAIL, PASSWORD)
                added = await semo(tmp_path, emulator, "office", "members", "add", EMAIL)
                assert added.returncode == 0, added.stderr
                shown = await semo(tmp_path, emulator, "job", "show", job_id, "--json")
                office_id = json.loads(shown.stdout)["job"]["office_id"]
                token = await operator_token(emulator)

                opened = await ship_from_supabase(
                    emulator, token, office_id, {"job_id": job_id, "pr": True}
                )
                assert opened["success"], opened["error"]
                assert git(origin, "rev-parse", branch).strip() == head  # pushed
                assert len(github.pulls) == 1
                [pull] = github.pulls
                assert (pull["head"], pull["base"], pull["repo"]) == (branch, "main", "acme/shop")
                assert job_id in pull["body"] and "login page built" in pull["body"]
                assert job_id[:8] in pull["title"] and "Build the login page" in pull["title"]
                assert opened["result"]["pr"] == {
                    "number": 1,
                    "url": "https://github.example/acme/shop/pull/1",
                }
                assert opened["result"]["pushed"] == head and not opened["result"]["pr_existed"]

                merged = await ship_from_supabase(
                    emulator, token, office_id, {"job_id": job_id, "pr": True, "merge": True}
                )
                assert merged["success"], merged["error"]
                assert len(github.pulls) == 1  # the job has its pull request
                assert merged["result"]["pr_existed"] and merged["result"]["pr"]["number"] == 1
                assert git(repo, "rev-parse", "main").strip() == head  # fast-forwarded
                assert merged["result"]["merged"] == head
                timeline = await semo(tmp_path, emulator, "job", "show", job_id, "--json")
        entries = json.loads(timeline.stdout)["entries"]
        steps = [e["step"] for e in entries]
        assert steps.count("pr_opened") == 1 and steps.count("merged") == 1
        assert steps.count("pushed") == 2  # each command pushed the branch (unchanged)
        pr_entry = next(e for e in entries if e["step"] == "pr_opened")
        assert (pr_entry["ref_id"], pr_entry["detail"]) == ("#1", opened["result"]["pr"]["url"])
        for text in (json.dumps(opened), json.dumps(merged), timeline.stdout):
            assert github.token not in text
        assert github.token not in (tmp_path / "engine.log").read_text()
