"""Reviewing a job's work on real git: job_review (branch, base, commits with their roles,
diffstat, the roles' worktrees) and job_diff (the whole job or one role, file by file), with an
agent's textconv and external diff in the repository's config that must not run."""

from __future__ import annotations

from pathlib import Path

import pytest

from semo.engine.jobwork.review import job_diff, job_review
from semo.engine.store.base import NotFound
from tests.jobwork.conftest import Office_
from tests.support.git_repo import git


async def _two_roles(office: Office_) -> tuple[str, Path, Path]:
    job = await office.job()
    fe, be = await office.worktree("FE", "warm-fe"), await office.worktree("BE", "warm-be")
    await office.workspace.enter(job.id, "FE", fe)
    await office.workspace.enter(job.id, "BE", be)
    (fe / "login.html").write_text("<form>login</form>\n")
    (be / "api.py").write_text("def health():\n    return 'ok'\n")
    (be / "logo.png").write_bytes(b"\x89PNG\0\0binary")
    await office.workspace.finish(job.id)
    return job.id, fe, be


async def test_a_review_shows_the_branch_commits_diffstat_and_worktrees(office: Office_) -> None:
    job_id, fe, _ = await _two_roles(office)
    (fe / "after.txt").write_text("FE goes on after the job\n")
    review = await job_review(office.store, job_id)
    job = review.job
    assert (review.branch, review.base_branch, review.base_commit) == (
        job.branch,
        "main",
        job.base_commit,
    )
    assert review.head == git(office.repo, "rev-parse", f"semo/job/{job_id}").strip()
    roles = {c.role for c in review.commits}
    assert {"FE", "BE"} <= roles
    assert {c.subject for c in review.commits if c.role == "FE"} == {
        f"Build the login page (FE, job {job_id[:8]})"
    }
    stats = {f.path: (f.added, f.removed) for f in review.files}
    assert stats == {"login.html": (1, 0), "api.py": (2, 0), "logo.png": (None, None)}
    assert (review.insertions, review.deletions) == (3, 0)
    assert review.roles["FE"].dirty is True and review.roles["BE"].dirty is False
    assert review.roles["BE"].commits == 1 and review.roles["FE"].worktree == str(fe)
    assert review.conflict is None and review.note is None
    assert review.model_dump(mode="json")["roles"]["FE"]["branch"] == f"semo/FE/job-{job_id}"


async def test_a_diff_shows_each_file_and_no_program_of_the_repository_runs(
    office: Office_, tmp_path: Path
) -> None:
    job_id, _, _ = await _two_roles(office)
    marker = tmp_path / "ran"
    (office.repo / ".git" / "info" / "attributes").write_text("* diff=evil\n")
    git(office.repo, "config", "diff.evil.textconv", f"touch {marker}; cat")
    git(office.repo, "config", "diff.evil.command", f"touch {marker}")
    git(office.repo, "config", "diff.external", f"touch {marker}")
    diff = await job_diff(office.store, job_id)
    assert [f.path for f in diff.files] == ["api.py", "login.html", "logo.png"]
    by_path = {f.path: f for f in diff.files}
    assert by_path["api.py"].status == "A" and "+def health():" in by_path["api.py"].patch
    assert by_path["logo.png"].added is None and "Binary files" in by_path["logo.png"].patch
    assert diff.text.count("diff --git ") == 3
    be_only = await job_diff(office.store, job_id, role="BE")
    assert [f.path for f in be_only.files] == ["api.py", "logo.png"]
    await job_review(office.store, job_id)
    assert not marker.exists()


async def test_what_cannot_be_diffed_says_why(office: Office_) -> None:
    from semo.engine.store.models import Job

    job_id, _, _ = await _two_roles(office)
    with pytest.raises(ValueError, match=r"role 'QA' did not work on job .*roles: FE, BE"):
        await job_diff(office.store, job_id, role="QA")
    fresh = await office.store.create_job(
        Job(office_id=office.office.id, agent_id=office.fe.id, task="later")
    )
    with pytest.raises(ValueError, match="has no branch yet"):
        await job_diff(office.store, fresh.id)
    review = await job_review(office.store, fresh.id)
    assert review.note == "the job has no branch yet" and review.commits == []
    with pytest.raises(NotFound):
        await job_review(office.store, "no-such-job")
