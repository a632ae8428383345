"""WorktreeManager on real git repositories: create/reuse/list/remove, names that try to escape
the workspace, symlinks planted inside it, git's own errors, disk use."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from semo.engine.sessions.worktrees import (
    Worktree,
    WorktreeError,
    WorktreeManager,
    branch_name,
    directory_disk_usage,
)
from tests.support.git_repo import git as repo_git
from tests.support.git_repo import make_repo as new_repo


def git(cwd: Path, *args: str) -> str:
    return repo_git(cwd, *args).strip()


def make_repo(path: Path) -> Path:
    return new_repo(path, {"README": "hello\n"}, author_in_config=True)


def commit_file(cwd: Path, name: str, text: str) -> str:
    (cwd / name).write_text(text)
    git(cwd, "add", name)
    git(cwd, "commit", "-q", "-m", f"add {name}")
    return git(cwd, "rev-parse", "HEAD")


def tree(path: Path) -> list[str]:
    """Every entry under ``path`` (relative), without following symlinks."""
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return tmp_path / "workspace"


@pytest.fixture
def manager(repo: Path, workspace: Path) -> WorktreeManager:
    return WorktreeManager(repo, workspace)


async def test_create_places_worktree_on_its_own_branch(
    manager: WorktreeManager, repo: Path, workspace: Path
) -> None:
    wt = await manager.create("FE", "task-1")
    assert wt.path == (workspace / "agent" / "FE" / "task-1").resolve()
    assert (wt.role, wt.task_id, wt.branch) == ("FE", "task-1", "semo/FE/task-1")
    assert wt.head == git(repo, "rev-parse", "HEAD")
    assert (wt.path / "README").read_text() == "hello\n"
    assert git(wt.path, "branch", "--show-current") == "semo/FE/task-1"
    assert str(wt.path) in git(repo, "worktree", "list")
    assert git(wt.path, "status", "--porcelain") == ""


async def test_create_is_idempotent(manager: WorktreeManager) -> None:
    first = await manager.create("BE", "t1")
    (first.path / "work.txt").write_text("in progress\n")
    again = await manager.create("BE", "t1")
    assert again == first
    assert (again.path / "work.txt").read_text() == "in progress\n"
    assert [w.key for w in await manager.list()] == [("BE", "t1")]


async def test_concurrent_creates_of_one_task_make_one_worktree(
    manager: WorktreeManager,
) -> None:
    results = await asyncio.gather(*(manager.create("QA", "same") for _ in range(5)))
    assert len(set(results)) == 1
    assert len(await manager.list()) == 1


async def test_concurrent_creates_of_many_tasks_all_succeed(
    manager: WorktreeManager, repo: Path, tmp_path: Path
) -> None:
    """Adds to one repository are one at a time (git reads every worktree's admin folder, and a
    half-made one fails the other add); two managers of the same repository in one process (two
    engines) and same-named tasks of different roles queue too."""
    other = WorktreeManager(repo, manager.workspace_root)
    made = await asyncio.gather(
        *(manager.create(role, task) for role in ("FE", "BE", "QA") for task in ("warm", "t1")),
        *(other.create("OPS", f"t{n}") for n in range(3)),
    )
    assert len({w.path for w in made}) == 9
    assert len(await manager.list()) == 9


async def test_create_from_a_base(manager: WorktreeManager, repo: Path) -> None:
    first = git(repo, "rev-parse", "HEAD")
    commit_file(repo, "later.txt", "later\n")
    wt = await manager.create("FE", "old", base=first)
    assert wt.head == first
    assert not (wt.path / "later.txt").exists()
    git(repo, "branch", "feature", first)
    wt2 = await manager.create("FE", "from-branch", base="feature")
    assert wt2.head == first


async def test_list_shows_only_task_worktrees(
    manager: WorktreeManager, repo: Path, tmp_path: Path
) -> None:
    git(repo, "worktree", "add", "-q", "-b", "elsewhere", str(tmp_path / "elsewhere"))
    await manager.create("QA", "b")
    await manager.create("FE", "a")
    await manager.create("FE", "b")
    assert [w.key for w in await manager.list()] == [("FE", "a"), ("FE", "b"), ("QA", "b")]
    assert await manager.get("FE", "a") is not None
    assert await manager.get("FE", "zzz") is None


async def test_remove_deletes_worktree_and_merged_branch(
    manager: WorktreeManager, repo: Path, workspace: Path
) -> None:
    wt = await manager.create("FE", "t1")
    assert await manager.remove(wt) is True  # no commits of its own: merged
    assert not wt.path.exists()
    assert not (workspace / "agent" / "FE").exists()  # the emptied role folder goes too
    assert git(repo, "branch", "--list", "semo/FE/t1") == ""
    assert await manager.list() == []
    assert await manager.remove(wt) is False  # twice: nothing left to do, no error


async def test_remove_keeps_unmerged_branch_unless_asked(
    manager: WorktreeManager, repo: Path
) -> None:
    wt = await manager.create("BE", "t1")
    head = commit_file(wt.path, "api.py", "print('hi')\n")
    (wt.path / "scratch.txt").write_text("uncommitted\n")
    with pytest.raises(WorktreeError, match="untracked files"):
        await manager.remove(wt)  # uncommitted work is never removed unless forced
    assert (wt.path / "scratch.txt").read_text() == "uncommitted\n"
    assert await manager.remove(wt, force=True) is False
    assert not wt.path.exists()
    assert git(repo, "rev-parse", "semo/BE/t1") == head

    # the task resumes: the existing branch is checked out again, with its commit
    again = await manager.create("BE", "t1")
    assert again.head == head and (again.path / "api.py").exists()
    assert not (again.path / "scratch.txt").exists()
    assert await manager.remove(again, delete_branch=True) is True
    assert git(repo, "branch", "--list", "semo/BE/t1") == ""


async def test_remove_tolerates_a_folder_already_gone(manager: WorktreeManager, repo: Path) -> None:
    wt = await manager.create("FE", "gone")
    shutil.rmtree(wt.path)
    assert await manager.remove(wt) is True
    assert "gone" not in git(repo, "worktree", "list")
    assert await manager.list() == []


async def test_create_after_folder_deleted_outside_semo(manager: WorktreeManager) -> None:
    wt = await manager.create("FE", "again")
    shutil.rmtree(wt.path)
    recreated = await manager.create("FE", "again")
    assert recreated.path == wt.path and (recreated.path / "README").exists()


async def test_remove_refuses_foreign_paths(manager: WorktreeManager, repo: Path) -> None:
    wt = await manager.create("FE", "t1")
    forged = Worktree("FE", "t1", repo, "main")
    with pytest.raises(WorktreeError, match="semo removes only the worktrees it placed"):
        await manager.remove(forged)
    assert (repo / "README").exists() and wt.path.exists()


async def test_existing_non_worktree_folder_is_not_taken_over(
    manager: WorktreeManager, workspace: Path
) -> None:
    squatter = workspace / "agent" / "FE" / "t1"
    squatter.mkdir(parents=True)
    (squatter / "notes.txt").write_text("mine\n")
    with pytest.raises(WorktreeError, match="is not a worktree"):
        await manager.create("FE", "t1")
    with pytest.raises(WorktreeError, match="semo leaves it alone"):
        await manager.remove(Worktree("FE", "t1", squatter, None))
    assert (squatter / "notes.txt").read_text() == "mine\n"


async def test_empty_existing_folder_is_used(manager: WorktreeManager, workspace: Path) -> None:
    (workspace / "agent" / "FE" / "t1").mkdir(parents=True)
    wt = await manager.create("FE", "t1")
    assert (wt.path / "README").exists()


async def test_git_errors_carry_gits_message(manager: WorktreeManager, repo: Path) -> None:
    with pytest.raises(
        WorktreeError,
        match=r"cannot create the worktree .*git says: fatal: not a valid object name",
    ):
        await manager.create("FE", "t1", base="no-such-branch")
    assert not (repo.parent / "workspace" / "agent" / "FE").exists()  # nothing left behind
    assert git(repo, "branch", "--list", "semo/*") == ""
    # the branch is checked out in the main worktree: git refuses a second checkout
    git(repo, "branch", "semo/FE/busy")
    git(repo, "checkout", "-q", "semo/FE/busy")
    with pytest.raises(WorktreeError, match=r"git says: .*already checked out"):
        await manager.create("FE", "busy")


async def test_not_a_repository(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(WorktreeError, match="is not a git repository"):
        await WorktreeManager(plain, tmp_path / "ws").create("FE", "t1")
    with pytest.raises(WorktreeError, match="does not exist"):
        await WorktreeManager(tmp_path / "missing", tmp_path / "ws").list()
    assert not (tmp_path / "ws").exists()


async def test_git_location_variables_are_ignored(
    manager: WorktreeManager, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = make_repo(tmp_path / "other")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    wt = await manager.create("FE", "t1")
    monkeypatch.delenv("GIT_DIR")
    monkeypatch.delenv("GIT_WORK_TREE")
    assert str(wt.path) in git(repo, "worktree", "list")
    assert str(wt.path) not in git(other, "worktree", "list")


# -- names that try to escape ------------------------------------------------------------------

BAD_ROLES = [
    "../x",
    "..",
    ".",
    "/abs",
    "a/b",
    "a\\b",
    "x\0",
    "x\n",
    "",
    " FE",
    "FE ",
    "-FE",
    "1FE",
    "역할",
    "ＦＥ",  # fullwidth letters
    "Fé",
    "F" * 33,
    "F" * 200,
    "FE:1",
    "~",
    "$HOME",
]
BAD_TASKS = [
    "../x",
    "..",
    ".",
    "a..b",
    "/abs",
    "/etc/passwd",
    "a/b",
    "a\\b",
    "x\0",
    "x\0/../../y",
    "x\n",
    "",
    ".hidden",
    "-rf",
    "task.",
    "task.lock",
    "tâche",
    "任务",
    "t" * 65,
    "t" * 200,
    "a b",
    "a:b",
    "a*b",
    "a?b",
    "a[b]",
    "a~1",
    "a^b",
    "a@{b}",
]


@pytest.mark.parametrize("role", BAD_ROLES, ids=repr)
async def test_bad_roles_are_rejected(
    manager: WorktreeManager, role: str, tmp_path: Path, repo: Path
) -> None:
    before = tree(tmp_path)
    with pytest.raises(WorktreeError, match="invalid role"):
        await manager.create(role, "t1")
    with pytest.raises(WorktreeError, match="invalid role"):
        manager.path_for(role, "t1")
    assert tree(tmp_path) == before
    assert git(repo, "branch", "--list", "semo/*") == ""


@pytest.mark.parametrize("task_id", BAD_TASKS, ids=repr)
async def test_bad_task_ids_are_rejected(
    manager: WorktreeManager, task_id: str, tmp_path: Path, repo: Path
) -> None:
    before = tree(tmp_path)
    with pytest.raises(WorktreeError, match="invalid task id"):
        await manager.create("FE", task_id)
    assert tree(tmp_path) == before
    assert git(repo, "branch", "--list", "semo/*") == ""


@pytest.mark.parametrize("base", ["", "-b", "--orphan", "x\ny", "x\0"], ids=repr)
async def test_bad_base_is_rejected(manager: WorktreeManager, base: str, tmp_path: Path) -> None:
    before = tree(tmp_path)
    with pytest.raises(WorktreeError, match="invalid base"):
        await manager.create("FE", "t1", base=base)
    assert tree(tmp_path) == before


async def test_longest_valid_names_work(manager: WorktreeManager) -> None:
    role, task = "R" + "r" * 31, "t" + "x._-" * 15 + "end"
    wt = await manager.create(role, task)
    assert wt.branch == branch_name(role, task) == f"semo/{role}/{task}"


def test_non_string_names_are_rejected(manager: WorktreeManager) -> None:
    with pytest.raises(WorktreeError, match="invalid role"):
        manager.path_for(None, "t1")  # type: ignore[arg-type]
    with pytest.raises(WorktreeError, match="invalid task id"):
        manager.path_for("FE", 7)  # type: ignore[arg-type]


# -- symlinks planted in the workspace ----------------------------------------------------------


@pytest.mark.parametrize("link_at", ["agent", "agent/FE", "agent/FE/t1"])
async def test_symlink_inside_workspace_pointing_outside_is_rejected(
    manager: WorktreeManager, workspace: Path, tmp_path: Path, repo: Path, link_at: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    link = workspace / link_at
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside, target_is_directory=True)
    with pytest.raises(WorktreeError, match="is a symlink"):
        await manager.create("FE", "t1")
    assert list(outside.iterdir()) == []
    assert git(repo, "branch", "--list", "semo/*") == ""
    assert "outside" not in git(repo, "worktree", "list")


async def test_symlink_pointing_inside_is_rejected_too(
    manager: WorktreeManager, workspace: Path
) -> None:
    (workspace / "agent" / "BE").mkdir(parents=True)
    (workspace / "agent" / "FE").symlink_to(workspace / "agent" / "BE")
    with pytest.raises(WorktreeError, match="is a symlink"):
        await manager.create("FE", "t1")


async def test_file_in_the_way_is_an_error(manager: WorktreeManager, workspace: Path) -> None:
    (workspace / "agent").mkdir(parents=True)
    (workspace / "agent" / "FE").write_text("not a folder")
    with pytest.raises(WorktreeError, match="is not a folder"):
        await manager.create("FE", "t1")


async def test_workspace_root_may_itself_be_a_symlink(repo: Path, tmp_path: Path) -> None:
    real = tmp_path / "real-ws"
    real.mkdir()
    (tmp_path / "ws-link").symlink_to(real)
    manager = WorktreeManager(repo, tmp_path / "ws-link")
    wt = await manager.create("FE", "t1")
    assert wt.path == real.resolve() / "agent" / "FE" / "t1"
    assert [w.key for w in await manager.list()] == [("FE", "t1")]
    assert await manager.remove(wt) is True


# -- disk use ---------------------------------------------------------------------------------


async def test_disk_usage_counts_files_not_symlink_targets(
    manager: WorktreeManager, tmp_path: Path
) -> None:
    wt = await manager.create("FE", "du")
    before = await manager.disk_usage(wt)
    assert before > 0
    (wt.path / "blob.bin").write_bytes(os.urandom(256 * 1024))
    grown = await manager.disk_usage(wt)
    assert grown - before >= 256 * 1024

    big_outside = tmp_path / "big.bin"
    big_outside.write_bytes(os.urandom(1024 * 1024))
    (wt.path / "link-to-big").symlink_to(big_outside)
    os.link(wt.path / "blob.bin", wt.path / "blob-hardlink.bin")
    after = await manager.disk_usage(wt)
    assert after - grown < 64 * 1024  # the link itself, not 1 MiB; the hard link counted once


def test_directory_disk_usage_of_missing_and_plain_files(tmp_path: Path) -> None:
    assert directory_disk_usage(tmp_path / "missing") == 0
    f = tmp_path / "f"
    f.write_bytes(b"x" * 10000)
    assert directory_disk_usage(f) >= 10000
