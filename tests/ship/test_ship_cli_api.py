"""`semo job ship` (the real `semo` program, semo.toml's [ship] pointing at a loopback GitHub
API) and `POST /api/offices/{office}/jobs/{id}/ship` (the API app over the same store): the
job's branch goes to the bare origin, exactly one pull request names the job, --merge lands
the work on main; a conflict is exit 1 / 409 with the files named; bad input exit 2 / 422."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from pydantic import SecretStr

from semo.engine.api.app import create_app
from semo.engine.api.settings import ApiSettings
from semo.engine.office.job_ops import job_timeline
from semo.engine.ship.settings import ShipSection
from tests.ship.conftest import World
from tests.support.git_repo import git
from tests.support.github_api import GitHubApi
from tests.support.semo_process import run_semo, semo_env

GH_TOKEN = "ghp_loopback_0123456789abcdef"
API_TOKEN = "api-token-0123456789abcdef"


def write_config(world: World, tmp_path: Path, api_url: str) -> Path:
    path = tmp_path / "semo.toml"
    path.write_text(
        f'[office]\nname = "ship"\nrepository = "{world.repo}"\n'
        f'[store]\nbackend = "sqlite"\nsqlite_path = "{tmp_path / "semo.db"}"\n'
        f'[ship]\npr_tool = "api"\ngithub_api_url = "{api_url}"\ngithub_repo = "acme/shop"\n'
    )
    return path


async def test_semo_job_ship_pushes_opens_one_pr_and_merges(world: World, tmp_path: Path) -> None:
    with GitHubApi(token=GH_TOKEN) as api:
        config = write_config(world, tmp_path, api.url)
        env = semo_env(GITHUB_TOKEN=GH_TOKEN)
        job = world.job.id
        nothing = await run_semo("job", "ship", job, "--config", str(config), env=env)
        assert nothing.returncode == 2 and "--push, --pr and/or --merge" in nothing.stderr
        shipped = await run_semo(
            "job", "ship", job, "--pr", "--merge", "--json", "--config", str(config), env=env
        )
        assert shipped.returncode == 0, shipped.stderr
        report = json.loads(shipped.stdout)
        again = await run_semo("job", "ship", job[:8], "--pr", "--config", str(config), env=env)
    assert again.returncode == 0, again.stderr
    assert "(the job's pull request already)" in again.stdout
    assert len(api.pulls) == 1 and job in api.pulls[0]["body"]
    assert report["pr"]["url"].endswith("/pull/1") and report["merge_kind"] == "fast-forward"
    branch = world.target.branch
    assert git(world.origin, "rev-parse", branch) == git(world.repo, "rev-parse", branch)
    assert git(world.repo, "rev-parse", "main") == git(world.repo, "rev-parse", branch)
    steps = [e.step for e in (await job_timeline(world.store, job)).entries]
    assert steps[-4:] == ["pushed", "pr_opened", "merged", "pushed"]


async def test_a_conflicting_merge_from_the_cli_is_exit_1_and_names_the_file(
    world: World, tmp_path: Path
) -> None:
    world.commit(world.target.branch, "app.py", "x = 2\n", "FE: x")
    (world.repo / "app.py").write_text("x = 3\n")
    git(world.repo, "-c", "user.email=t@e", "-c", "user.name=t", "commit", "-q", "-am", "x")
    config = write_config(world, tmp_path, "http://127.0.0.1:9")
    refused = await run_semo("job", "ship", world.job.id, "--merge", "--config", str(config))
    assert refused.returncode == 1
    assert "conflicts in app.py" in refused.stderr and "Nothing was changed" in refused.stderr


async def test_the_api_ships_a_job(world: World) -> None:
    with GitHubApi(token=GH_TOKEN) as api:
        ship = ShipSection(
            pr_tool="api",
            github_api_url=api.url,
            github_repo="acme/shop",
            github_token=SecretStr(GH_TOKEN),
        )
        app = create_app(world.store, ApiSettings(tokens={"ship": SecretStr(API_TOKEN)}, ship=ship))
        headers = {"Authorization": f"Bearer {API_TOKEN}"}
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://t", headers=headers
        ) as client:
            url = f"/api/offices/{world.job.office_id}/jobs/{world.job.id}/ship"
            empty = await client.post(url, json={})
            assert empty.status_code == 422, empty.text
            unknown = await client.post(url, json={"push": True, "force": True})
            assert unknown.status_code == 422, unknown.text
            shipped = await client.post(url, json={"pr": True})
            assert shipped.status_code == 200, shipped.text
            assert shipped.json()["pr"]["number"] == 1
            await world.store.update_job(world.job.id, status="running")
            refused = await client.post(url, json={"merge": True})
            assert refused.status_code == 409
            assert "only a job that is done" in refused.json()["error"]["message"]
            other = await client.post(
                f"/api/offices/{world.job.office_id}/jobs/nope/ship", json={"push": True}
            )
            assert other.status_code == 404
    assert len(api.pulls) == 1 and world.job.id in api.pulls[0]["body"]
