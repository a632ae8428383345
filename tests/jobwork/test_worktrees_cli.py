"""`semo worktrees [--json]` and `semo worktrees prune [--force]` (the real semo program) over a
real repository with a bare origin: every state a worktree's work can be in, prune removing
only what is merged or shipped (never a worktree a live session uses), --force saving
uncommitted changes on a branch first and keeping unmerged branches."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from semo.engine.store.models import AgentSession
from tests.jobwork.conftest import Office_, config_for
from tests.support.git_repo import AUTHOR, git
from tests.support.semo_process import run_semo


def commit(path: Path, name: str, text: str) -> str:
    (path / name).write_text(text)
    git(path, "add", name)
    git(path, *AUTHOR, "commit", "-q", "-m", f"add {name}")
    return git(path, "rev-parse", "HEAD").strip()


async def test_worktrees_are_listed_with_where_their_work_is_and_pruned_safely(
    office: Office_, tmp_path: Path
) -> None:
    repo = office.repo
    job = await office.job()
    shipped = await office.worktree("FE", "warm-fe")
    (shipped / "leftover.txt").write_text("an earlier job's\n")
    await office.workspace.enter(job.id, "FE", shipped)  # saves the leftover
    commit(shipped, "login.html", "<form/>\n")
    await office.workspace.finish(job.id)
    git(repo, "push", "-q", "origin", f"semo/job/{job.id}")
    merged = await office.worktree("BE", "task-merged")
    git(repo, "update-ref", "refs/heads/main", commit(merged, "api.py", "api\n"))
    dirty = await office.worktree("BE", "task-dirty")
    (dirty / "draft.txt").write_text("a draft nobody committed\n")
    unmerged = await office.worktree("QA", "task-unmerged")
    commit(unmerged, "tests.txt", "only here\n")
    missing = await office.worktree("QA", "task-missing")
    shutil.rmtree(missing)
    busy = await office.worktree("FE", "task-busy")  # merged (at main), but a session runs there
    await office.store.upsert_session(
        AgentSession(
            office_id=office.office.id,
            agent_id=office.fe.id,
            worktree_id=str(busy),
            status="ready",
        )
    )
    config = config_for(office, tmp_path)

    listed = await run_semo("worktrees", "--json", "--config", config)
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    states = {
        Path(w["path"]).name: (w["state"], w["dirty"], w["in_use"]) for w in data["worktrees"]
    }
    assert states == {
        "warm-fe": ("shipped", False, False),
        "task-merged": ("merged", False, False),
        "task-dirty": ("dirty", True, False),
        "task-unmerged": ("unmerged", False, False),
        "task-missing": ("missing", None, False),
        "task-busy": ("merged", False, True),
    }
    fe = next(w for w in data["worktrees"] if w["task_id"] == "warm-fe")
    assert fe["job_id"] == job.id and fe["ahead"] == 1 and fe["branch"] == f"semo/FE/job-{job.id}"
    [saved] = data["saved"]
    assert saved["ref"].startswith("semo/saved/FE/") and "warm-fe" in saved["subject"]
    text = await run_semo("worktrees", "--config", config)
    assert "base branch: main" in text.stdout and "semo/saved/FE/" in text.stdout
    assert "shipped" in text.stdout and "merged, in use" in text.stdout

    pruned = await run_semo("worktrees", "prune", "--config", config)
    assert pruned.returncode == 0, pruned.stderr
    assert not shipped.exists() and not merged.exists()
    assert dirty.is_dir() and unmerged.is_dir() and busy.is_dir()
    assert (dirty / "draft.txt").read_text() == "a draft nobody committed\n"
    assert "kept" in pruned.stdout and "uncommitted changes" in pruned.stdout
    branches = git(repo, "branch", "--list", "semo/*", "--format=%(refname:short)").split()
    assert f"semo/FE/job-{job.id}" not in branches and "semo/BE/task-merged" not in branches
    assert "semo/QA/task-unmerged" in branches and f"semo/job/{job.id}" in branches
    assert saved["ref"] in branches  # saved leftovers are never pruned

    forced = await run_semo("worktrees", "prune", "--force", "--json", "--config", config)
    assert forced.returncode == 0, forced.stderr
    results = {Path(r["path"]).name: r for r in json.loads(forced.stdout)}
    assert results["task-dirty"]["removed"] and results["task-unmerged"]["removed"]
    assert not results["task-busy"]["removed"]
    keep = results["task-dirty"]["saved"]
    assert git(repo, "show", f"{keep}:draft.txt") == "a draft nobody committed\n"
    assert git(repo, "show", "semo/QA/task-unmerged:tests.txt") == "only here\n"
    assert not dirty.exists() and not unmerged.exists() and busy.is_dir()
