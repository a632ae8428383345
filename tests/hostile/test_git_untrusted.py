"""A hostile agent owns the repository's config (it writes it through its worktree): hooks
(core.hooksPath and .git/hooks), core.fsmonitor, filter / diff / merge drivers named by a
committed .gitattributes, signing with its own gpg.program, and an includeIf that pulls more of
the same from a file of its own. Every git command semo runs as the engine (a worktree add, the
checkout and leftover-saving of a job's start, committing and combining at its end, a conflict's
merge, review and diff, a push, pruning) runs none of them, and each still works."""

from __future__ import annotations

import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from semo.engine.jobwork.review import job_diff, job_review
from semo.engine.jobwork.worktree_list import prune_worktrees
from semo.engine.ship.gitops import push_branch
from tests.jobwork.conftest import Office_, office_at
from tests.support.git_repo import AUTHOR, git

HOOKS = (
    "pre-commit",
    "commit-msg",
    "post-commit",
    "post-checkout",
    "post-merge",
    "pre-merge-commit",
    "pre-push",
    "reference-transaction",
    "post-index-change",
    "post-rewrite",
    "pre-auto-gc",
)


def script(path: Path, marker: Path, name: str, tail: str = "") -> str:
    """An executable that records that `name` ran (then does `tail`)."""
    path.write_text(f"#!/bin/sh\necho {name} >> {marker}\n{tail}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def plant(office: Office_, worktree: Path, tmp: Path) -> Path:
    """Everything a hostile agent can plant; the file every planted program appends to."""
    marker = tmp / "ran.log"
    evil = tmp / "evil"
    evil.mkdir()
    for hook in HOOKS:
        script(evil / hook, marker, f"hook {hook}")
        script(office.repo / ".git" / "hooks" / hook, marker, f"git-dir hook {hook}")
    cat = "exec cat"
    set_config = [
        ("core.hooksPath", str(evil)),
        ("core.fsmonitor", script(tmp / "fsmonitor", marker, "fsmonitor")),
        ("filter.evil.clean", script(tmp / "clean", marker, "clean", cat)),
        ("filter.evil.smudge", script(tmp / "smudge", marker, "smudge", cat)),
        ("filter.evil.process", script(tmp / "process", marker, "process", "exit 1")),
        ("filter.evil.required", "true"),
        ("diff.evil.textconv", script(tmp / "textconv", marker, "textconv", cat)),
        ("diff.evil.command", script(tmp / "diffcmd", marker, "diff command")),
        ("merge.evil.driver", script(tmp / "merge", marker, "merge driver", "exit 1")),
        ("diff.external", script(tmp / "extdiff", marker, "external diff")),
        ("commit.gpgSign", "true"),
        ("gpg.program", script(tmp / "gpg", marker, "gpg", "exit 1")),
        ("core.pager", script(tmp / "pager", marker, "pager")),
        ("core.editor", script(tmp / "editor", marker, "editor")),
        ("core.alternateRefsCommand", script(tmp / "altrefs", marker, "alternate refs")),
    ]
    for key, value in set_config:
        git(worktree, "config", key, value)
    included = tmp / "included.cfg"
    inc_clean = script(tmp / "inc-clean", marker, "included clean", cat)
    inc_hooks = tmp / "inc-hooks"
    inc_hooks.mkdir()
    script(inc_hooks / "post-checkout", marker, "included hook")
    included.write_text(
        f'[filter "inc"]\n\tclean = {inc_clean}\n\tsmudge = {inc_clean}\n'
        f"[core]\n\thooksPath = {inc_hooks}\n"
    )
    git(worktree, "config", f"includeIf.gitdir:{office.repo}/.git.path", str(included))
    git(worktree, "config", "include.path", str(included))
    return marker


@pytest.fixture
async def hostile(tmp_path: Path) -> AsyncIterator[Office_]:
    async with office_at(tmp_path / "office") as made:
        yield made


async def test_nothing_an_agent_plants_in_the_config_runs_as_the_engine(
    hostile: Office_, tmp_path: Path
) -> None:
    office = hostile
    repo = office.repo
    fe = await office.worktree("FE", "warm-fe")
    # a committed .gitattributes names the drivers for every file
    (fe / ".gitattributes").write_text("* filter=evil diff=evil merge=evil\n*.txt filter=inc\n")
    git(fe, "add", ".gitattributes")
    git(fe, *AUTHOR, "commit", "-q", "-m", "attributes")
    git(repo, "update-ref", "refs/heads/main", git(fe, "rev-parse", "HEAD").strip())
    marker = plant(office, fe, tmp_path)
    git_env_marker = marker.exists()  # planting itself ran git: hooks fired for the test's git
    if git_env_marker:
        marker.unlink()

    job = await office.job()
    be = await office.worktree("BE", "warm-be")  # a worktree add: checkout, smudge
    (fe / "leftover.txt").write_text("an earlier job's\n")
    await office.workspace.enter(job.id, "FE", fe)  # save leftovers, reset, clean, checkout
    await office.workspace.enter(job.id, "BE", be)
    (fe / "app.py").write_text("x = 'fe'\n")
    (fe / "notes.txt").write_text("fe notes\n")
    (be / "app.py").write_text("x = 'be'\n")
    end = await office.workspace.finish(job.id)  # add -A, commit, merge-tree, commit-tree
    assert end.conflict is not None and end.conflict.files == ["app.py"]
    files = await office.workspace.prepare_resolve(job.id, "BE", be)  # a real merge
    assert files == ["app.py"]
    assert "<<<<<<<" in (be / "app.py").read_text()  # git's own markers, not the driver's
    (be / "app.py").write_text("x = 'both'\n")
    again = await office.workspace.finish(job.id)
    assert again.conflict is None
    assert git(repo, "show", f"{job.branch}:app.py") == "x = 'both'\n"
    assert git(repo, "show", f"{job.branch}:notes.txt") == "fe notes\n"
    review = await job_review(office.store, job.id)
    assert review.note is None and review.files
    diff = await job_diff(office.store, job.id)
    assert "+x = 'both'" in diff.text
    await push_branch(repo, "origin", job.branch or "")
    assert git(office.origin, "rev-parse", job.branch or "") == git(
        repo, "rev-parse", job.branch or ""
    )
    await prune_worktrees(office.store, office.office, force=True)

    ran = marker.read_text() if marker.exists() else ""
    assert ran == "", f"programs the agent planted ran as the engine:\n{ran}"
    assert not be.exists() and not fe.exists()


async def test_a_driver_with_an_odd_name_is_defanged_too(tmp_path: Path) -> None:
    """Driver names may hold `=` and dots (git's config subsections): the overrides go through
    GIT_CONFIG_COUNT, where no name can break them (`-c filter.we=ird.name.clean=cat` would)."""
    from semo.engine.gitrun import git_ok
    from tests.support.git_repo import make_repo

    repo = make_repo(tmp_path / "repo")
    marker = tmp_path / "ran.log"
    name = "we=ird.name"
    (repo / ".gitattributes").write_text(f"* filter={name}\n")
    git(repo, "config", f"filter.{name}.clean", script(tmp_path / "clean", marker, "clean", "cat"))
    git(repo, "config", f"filter.{name}.required", "true")
    assert git(repo, "check-attr", "filter", "README") == f"README: filter: {name}\n"
    (repo / "README").write_text("changed\n")
    await git_ok(repo, "add", "-A", what="add")
    await git_ok(repo, *AUTHOR, "commit", "-q", "-m", "x", what="commit")
    assert not marker.exists(), marker.read_text()
    assert git(repo, "show", "HEAD:README") == "changed\n"
