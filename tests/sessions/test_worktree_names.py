"""Warm worktrees have unique names, and `git worktree add`s running at once cannot collide
(git names a worktree's admin folder after the path's last part and takes `name1`, `name2`...
when it exists: two adds at once raced for the same name, "failed to read
.git/worktrees/warm1/commondir", 2 of ~34 engine starts)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from semo.engine.sessions.pool import warm_place, warm_task_id
from semo.engine.sessions.worktrees import WorktreeManager
from tests.support.git_repo import make_repo

ROLES = [f"R{i}" for i in range(8)]


def make_office_repo(folder: Path) -> Path:
    return make_repo(folder / "repo", {"README": "x\n"})


def test_warm_task_ids_differ_per_role() -> None:
    assert warm_task_id("FE") == "warm-fe"
    assert len({warm_task_id(role) for role in ["FE", "BE", "QA", *ROLES]}) == 11


async def test_engines_sharing_a_repository_get_warm_branches_of_their_own(
    tmp_path: Path,
) -> None:
    """Two engines (or two offices) on one repository, each its workspace: the warm worktree
    of one role is created by both, on two branches (it was `semo/A/warm-a` for both: the
    second failed); the same engine restarted gets the same name back."""
    repo = make_office_repo(tmp_path)
    places = [warm_place("office-1", tmp_path / "one"), warm_place("office-1", tmp_path / "two")]
    places.append(warm_place("office-2", tmp_path / "one"))
    managers = [
        WorktreeManager(repo, tmp_path / "one"),
        WorktreeManager(repo, tmp_path / "two"),
        WorktreeManager(repo, tmp_path / "three"),
    ]
    created = await asyncio.gather(
        *(m.create("A", warm_task_id("A", p)) for m, p in zip(managers, places, strict=True))
    )
    assert len({w.branch for w in created}) == 3
    assert warm_task_id("A", warm_place("office-1", tmp_path / "one")) == created[0].task_id
    assert created[0].task_id.startswith("warm-a-")


async def test_many_adds_of_one_name_at_once_all_succeed(tmp_path: Path) -> None:
    repo = make_office_repo(tmp_path)
    # two managers (as two engines of two offices on one repository), one last name: "warm"
    first = WorktreeManager(repo, tmp_path / "one")
    second = WorktreeManager(repo, tmp_path / "two")
    plan = [(first, role) for role in ROLES] + [(second, "S" + role) for role in ROLES]
    for _round in range(3):
        created = await asyncio.gather(*(manager.create(role, "warm") for manager, role in plan))
        assert len({w.path for w in created}) == len(plan)
        for worktree in created:
            assert (worktree.path / "README").read_text() == "x\n"
        removals = zip(plan, created, strict=True)
        await asyncio.gather(*(m.remove(w, delete_branch=True) for (m, _), w in removals))
    assert await first.list() == [] and await second.list() == []
