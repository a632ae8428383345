"""A job's work from the real `semo` program and the API app over the same sqlite store: `semo
job show` (branch, commits, worktrees, the conflict), `semo job diff [--stat] [--role]`, `semo
job resolve` (to an agent: pending with a run_job command; by hand: --done combines again), and
GET .../work, GET .../diff, POST .../resolve; bad input exit 2 / 409, another office 404."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from pydantic import SecretStr

from semo.engine.api.app import create_app
from semo.engine.api.settings import ApiSettings
from semo.engine.jobwork.model import JobWork
from semo.engine.store.models import Job
from tests.jobwork.conftest import Office_, config_for
from tests.support.git_repo import git
from tests.support.semo_process import run_semo

API_TOKEN = "api-token-0123456789abcdef"


async def conflicted(office: Office_) -> tuple[Job, Path, Path]:
    """A job whose FE and BE changed the same line, ended as the runner ends it."""
    job = await office.job()
    fe, be = await office.worktree("FE", "warm-fe"), await office.worktree("BE", "warm-be")
    await office.workspace.enter(job.id, "FE", fe)
    await office.workspace.enter(job.id, "BE", be)
    (fe / "app.py").write_text("x = 'fe'\n")
    (be / "app.py").write_text("x = 'be'\n")
    (be / "api.py").write_text("def health(): ...\n")
    end = await office.workspace.finish(job.id)
    assert end.conflict is not None
    job = await office.store.update_job(
        job.id, status="needs_review", failure_reason=end.conflict.detail, needs_human=True
    )
    return job, fe, be


async def test_show_diff_and_resolve_by_hand_from_the_cli(office: Office_, tmp_path: Path) -> None:
    job, _, be = await conflicted(office)
    config = config_for(office, tmp_path)
    shown = await run_semo("job", "show", job.id, "--config", config)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert f"branch: semo/job/{job.id} (base main at {job.base_commit[:10]})" in out
    assert f"[FE] Build the login page (FE, job {job.id[:8]})" in out
    assert f"worktree [BE] {be}: semo/BE/job-{job.id}, 1 commit(s) ahead, clean" in out
    assert "conflict: the work of BE conflicts with the job branch in app.py" in out
    as_json = json.loads(
        (await run_semo("job", "show", job.id, "--json", "--config", config)).stdout
    )
    assert as_json["work"]["conflict"]["files"] == ["app.py"]
    assert as_json["work"]["branch"] == f"semo/job/{job.id}" and "job" not in as_json["work"]

    listed = await run_semo("jobs", "--json", "--config", config)  # it waits for the operator
    assert [(j["id"], j["status"]) for j in json.loads(listed.stdout)] == [(job.id, "needs_review")]
    stat = await run_semo("job", "diff", job.id[:8], "--stat", "--config", config)
    assert stat.returncode == 0, stat.stderr
    assert "M app.py | +1 -1" in stat.stdout and "1 file(s) changed" in stat.stdout
    be_diff = await run_semo("job", "diff", job.id[:8], "--role", "BE", "--config", config)
    assert "+x = 'be'" in be_diff.stdout and "+def health(): ..." in be_diff.stdout
    unknown = await run_semo("job", "diff", job.id, "--role", "QA", "--config", config)
    assert unknown.returncode == 2 and "did not work on job" in unknown.stderr

    still = await run_semo("job", "resolve", job.id[:8], "--done", "--config", config)
    assert still.returncode == 1 and "needs_review" in still.stdout
    _merge_by_hand(be, job)  # the operator resolves it by hand in BE's worktree
    resolved = await run_semo("job", "resolve", job.id, "--done", "--config", config)
    assert resolved.returncode == 0, resolved.stdout + resolved.stderr
    assert f"job {job.id} done" in resolved.stdout
    assert git(office.repo, "show", f"{job.branch}:app.py") == "x = 'fe + be'\n"
    row = await office.store.get_job(job.id)
    assert row.status == "done" and JobWork.of(row).conflict is None
    again = await run_semo("job", "resolve", job.id, "--config", config)
    assert again.returncode == 2 and "only a job that needs review" in again.stderr


def _merge_by_hand(be: Path, job: Job) -> None:
    import subprocess

    subprocess.run(["git", "-C", str(be), "merge", "-q", f"semo/job/{job.id}"], capture_output=True)
    assert "<<<<<<<" in (be / "app.py").read_text()
    (be / "app.py").write_text("x = 'fe + be'\n")
    git(be, "add", "app.py")
    git(be, "-c", "user.name=op", "-c", "user.email=op@e", "commit", "-q", "--no-edit")


async def test_the_api_reviews_and_hands_the_conflict_to_an_agent(office: Office_) -> None:
    job, _, _ = await conflicted(office)
    app = create_app(office.store, ApiSettings(tokens={"o": SecretStr(API_TOKEN)}))
    headers = {"Authorization": f"Bearer {API_TOKEN}"}
    base = f"/api/offices/{office.office.id}/jobs"
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t", headers=headers
    ) as client:
        work = await client.get(f"{base}/{job.id}/work")
        assert work.status_code == 200, work.text
        body = work.json()
        assert body["branch"] == job.branch and body["conflict"]["roles"] == ["BE"]
        assert {c["role"] for c in body["commits"]} >= {"FE"}
        diff = await client.get(f"{base}/{job.id}/diff", params={"stat": "true"})
        assert diff.status_code == 200
        assert [(f["path"], f["patch"]) for f in diff.json()["files"]] == [("app.py", "")]
        be = await client.get(f"{base}/{job.id}/diff", params={"role": "BE"})
        assert "+x = 'be'" in "".join(f["patch"] for f in be.json()["files"])
        no_role = await client.get(f"{base}/{job.id}/diff", params={"role": "QA"})
        assert no_role.status_code == 409
        handed = await client.post(f"{base}/{job.id}/resolve", json={"prompt": "Keep both"})
        assert handed.status_code == 200, handed.text
        assert handed.json()["status"] == "pending"
        twice = await client.post(f"{base}/{job.id}/resolve", json={"role": "BE"})
        assert twice.status_code == 409 and "only a job that needs review" in twice.text
        other = await client.get(f"{base}/nope/work")
        assert other.status_code == 404
    row = await office.store.get_job(job.id)
    resolve = JobWork.of(row).resolve
    assert resolve is not None and (resolve.role, resolve.prompt) == ("BE", "Keep both")
    commands = await office.store.list_commands(office.office.id)
    assert [c.payload for c in commands if c.command_type == "run_job"] == [{"job_id": job.id}]
