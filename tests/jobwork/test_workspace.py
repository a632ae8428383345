"""A job's branch on real git: a clean start with leftovers saved, retries on the same branch,
the roles' work committed and combined, conflicts named and resolved."""

from __future__ import annotations

from pathlib import Path

from semo.engine.jobwork.model import JobWork
from tests.jobwork.conftest import Office_, log
from tests.support.git_repo import AUTHOR, git


async def test_a_job_starts_its_branch_at_the_base_and_keeps_it_on_a_retry(
    office: Office_,
) -> None:
    main = git(office.repo, "rev-parse", "main").strip()
    job = await office.job()
    assert (job.branch, job.base_branch, job.base_commit) == (f"semo/job/{job.id}", "main", main)
    assert git(office.repo, "rev-parse", job.branch).strip() == main
    # main moves on; the retried job keeps its base
    (office.repo / "later.txt").write_text("later\n")
    git(office.repo, "add", "later.txt")
    git(office.repo, *AUTHOR, "commit", "-q", "-m", "later")
    again = await office.workspace.start(job)
    assert (again.branch, again.base_commit) == (job.branch, main)


async def test_a_warm_worktree_starts_clean_and_the_leftovers_are_saved(office: Office_) -> None:
    warm = await office.worktree("FE", "warm-fe")
    (warm / "app.py").write_text("x = 2  # an earlier job's edit\n")
    (warm / "notes.txt").write_text("untracked notes\n")
    (warm / "staged.txt").write_text("staged\n")
    git(warm, "add", "staged.txt")
    job = await office.job()
    entered = await office.workspace.enter(job.id, "FE", warm)
    assert entered.switched and entered.saved is not None
    assert entered.saved.startswith("semo/saved/FE/")
    assert git(warm, "status", "--porcelain") == ""
    assert git(warm, "branch", "--show-current").strip() == f"semo/FE/job-{job.id}"
    assert (warm / "app.py").read_text() == "x = 1\n"
    assert not (warm / "notes.txt").exists() and not (warm / "staged.txt").exists()
    # every leftover is on the saved branch, on top of what the worktree had
    saved = entered.saved
    assert git(office.repo, "show", f"{saved}:app.py") == "x = 2  # an earlier job's edit\n"
    assert git(office.repo, "show", f"{saved}:notes.txt") == "untracked notes\n"
    assert git(office.repo, "show", f"{saved}:staged.txt") == "staged\n"
    assert git(office.repo, "rev-parse", f"{saved}^").strip() == job.base_commit
    assert "semo/FE/warm-fe" in git(office.repo, "log", "-1", "--format=%B", saved)
    work = JobWork.of(await office.store.get_job(job.id))
    assert work.roles["FE"].branch == f"semo/FE/job-{job.id}"
    assert work.roles["FE"].worktree == str(warm)


async def test_a_retry_continues_in_the_same_worktree_with_its_uncommitted_work(
    office: Office_,
) -> None:
    warm = await office.worktree("FE", "warm-fe")
    job = await office.job()
    await office.workspace.enter(job.id, "FE", warm)
    (warm / "login.html").write_text("<form>half done</form>\n")  # attempt 1, then SIGKILL
    entered = await office.workspace.enter(job.id, "FE", warm)
    assert (entered.switched, entered.saved) == (False, None)
    assert (warm / "login.html").read_text() == "<form>half done</form>\n"
    assert git(office.repo, "for-each-ref", "refs/heads/semo/saved") == ""


async def test_a_retry_in_another_worktree_takes_the_branch_and_its_leftovers(
    office: Office_,
) -> None:
    job = await office.job()
    cold = await office.worktree("FE", f"job-{job.id}")
    git(cold, "checkout", "-q", "--detach")
    await office.workspace.enter(job.id, "FE", cold)
    (cold / "login.html").write_text("<form>attempt 1</form>\n")
    warm = await office.worktree("FE", "warm-fe")
    await office.workspace.enter(job.id, "FE", warm)
    assert (warm / "login.html").read_text() == "<form>attempt 1</form>\n"
    assert git(cold, "status", "--porcelain") == ""
    assert git(cold, "branch", "--show-current").strip() == ""  # detached: the branch is free
    end = await office.workspace.finish(job.id)
    assert end.conflict is None
    assert git(office.repo, "show", f"{job.branch}:login.html") == "<form>attempt 1</form>\n"


async def test_the_end_of_a_job_commits_and_combines_every_role(office: Office_) -> None:
    job = await office.job()
    fe, be = await office.worktree("FE", "warm-fe"), await office.worktree("BE", "warm-be")
    await office.workspace.enter(job.id, "FE", fe)
    await office.workspace.enter(job.id, "BE", be)
    (fe / "login.html").write_text("<form>login</form>\n")  # FE never commits
    (be / "api.py").write_text("def health(): ...\n")
    git(be, "add", "api.py")
    git(be, "commit", "-q", "-m", "BE: GET /health")  # BE commits, as the agent would
    (be / "api_test.py").write_text("assert True\n")  # and leaves a file
    end = await office.workspace.finish(job.id)
    assert end.conflict is None and set(end.committed) == {"FE", "BE"}
    files = git(office.repo, "ls-tree", "-r", "--name-only", job.branch).split()
    assert {"login.html", "api.py", "api_test.py", "app.py"} <= set(files)
    subjects = log(office.repo, f"{job.base_commit}..{job.branch}")
    assert "BE: GET /health" in subjects
    assert f"Build the login page (FE, job {job.id[:8]})" in subjects
    assert any(s.startswith("Combine BE's work") for s in subjects)
    assert len(end.commits) == len(subjects)
    assert "3 files changed" in end.diffstat
    author = git(office.repo, "log", "-1", "--format=%an <%ae>", f"semo/FE/job-{job.id}")
    assert author.strip() == "semo FE <fe@agents.semo.invalid>"
    assert git(fe, "status", "--porcelain") == "" and git(be, "status", "--porcelain") == ""


async def test_conflicting_roles_are_named_and_a_resolution_combines(office: Office_) -> None:
    job = await office.job()
    fe, be = await office.worktree("FE", "warm-fe"), await office.worktree("BE", "warm-be")
    await office.workspace.enter(job.id, "FE", fe)
    await office.workspace.enter(job.id, "BE", be)
    (fe / "app.py").write_text("x = 'fe'\n")
    (be / "app.py").write_text("x = 'be'\n")
    end = await office.workspace.finish(job.id)
    assert end.conflict is not None
    assert (end.conflict.roles, end.conflict.files) == (["BE"], ["app.py"])
    stored = JobWork.of(await office.store.get_job(job.id))
    assert stored.conflict == end.conflict
    assert git(office.repo, "show", f"{job.branch}:app.py") == "x = 'fe'\n"  # FE's is in
    files = await office.workspace.prepare_resolve(job.id, "BE", be)
    assert files == ["app.py"]
    assert "<<<<<<<" in (be / "app.py").read_text()
    (be / "app.py").write_text("x = 'fe and be'\n")  # the agent resolves, does not commit
    again = await office.workspace.finish(job.id)
    assert again.conflict is None
    assert git(office.repo, "show", f"{job.branch}:app.py") == "x = 'fe and be'\n"
    assert JobWork.of(await office.store.get_job(job.id)).conflict is None


async def test_nothing_to_record_leaves_the_job_branch_at_its_base(office: Office_) -> None:
    job = await office.job()
    fe = await office.worktree("FE", "warm-fe")
    await office.workspace.enter(job.id, "FE", fe)
    end = await office.workspace.finish(job.id)
    assert (end.committed, end.commits, end.diffstat, end.conflict) == ({}, [], "", None)
    assert git(office.repo, "rev-parse", job.branch).strip() == job.base_commit
    assert Path(JobWork.of(await office.store.get_job(job.id)).roles["FE"].worktree or "") == fe


async def test_a_cold_worktree_for_a_job_whose_branch_the_warm_one_holds_takes_it_over(
    office: Office_,
) -> None:
    """A crash retry in a new cold session (the warm one still restarting): the pool's
    worktree for the job cannot check out the branch the warm worktree holds; it starts
    detached, and entering it takes the branch and what the warm worktree had."""
    job = await office.job()
    warm = await office.worktree("FE", "warm-fe")
    await office.workspace.enter(job.id, "FE", warm)
    (warm / "half.txt").write_text("attempt 1\n")
    cold = await office.worktree("FE", f"job-{job.id}")
    assert git(cold, "branch", "--show-current").strip() == ""
    await office.workspace.enter(job.id, "FE", cold)
    assert git(cold, "branch", "--show-current").strip() == f"semo/FE/job-{job.id}"
    assert (cold / "half.txt").read_text() == "attempt 1\n"
    assert git(warm, "status", "--porcelain") == ""
    end = await office.workspace.finish(job.id)
    assert git(office.repo, "show", f"{job.branch}:half.txt") == "attempt 1\n"
    assert end.conflict is None
