"""The worktrees semo made, and where their work is: `semo worktrees [prune]`.

    listing = await list_worktrees(store, office)        # WorktreeListing: worktrees, saved refs
    results = await prune_worktrees(store, office, force=False)

How it works: docs/JOBS.md, "Listing worktrees".
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from semo.engine.gitrun import git_ok, run_git
from semo.engine.jobwork.gitwork import is_dirty, resolve_commit, save_leftovers
from semo.engine.jobwork.model import SAVED_PREFIX
from semo.engine.jobwork.settings import GitSection
from semo.engine.jobwork.workspace import base_of
from semo.engine.sessions.worktrees import Worktree, WorktreeError, WorktreeManager
from semo.engine.store.base import Store
from semo.engine.store.models import Office

__all__ = [
    "PruneResult",
    "SavedWork",
    "WorktreeInfo",
    "WorktreeListing",
    "list_worktrees",
    "prune_worktrees",
]

State = Literal["missing", "dirty", "merged", "shipped", "combined", "unmerged"]
#: States whose work exists elsewhere: prune removes them.
PRUNABLE: frozenset[str] = frozenset({"missing", "merged", "shipped"})


class WorktreeInfo(BaseModel):
    """One worktree semo made."""

    role: str
    task_id: str
    path: str
    branch: str | None
    head: str | None
    #: the job it last worked on (its role's branch for the job), when one did
    job_id: str | None = None
    dirty: bool | None = None
    #: commits on it that are not on the base branch
    ahead: int | None = None
    #: seconds since the folder last changed
    age_seconds: float | None = None
    in_use: bool = False
    state: State


class SavedWork(BaseModel):
    """An earlier job's leftovers, saved before the next job started in the worktree."""

    ref: str
    commit: str
    subject: str
    age_seconds: float | None = None


class WorktreeListing(BaseModel):
    base_branch: str
    worktrees: list[WorktreeInfo] = Field(default_factory=list)
    saved: list[SavedWork] = Field(default_factory=list)


class PruneResult(BaseModel):
    path: str
    removed: bool
    why: str
    saved: str | None = None


def _manager(office: Office) -> WorktreeManager:
    if not office.repository:
        raise ValueError(f"office {office.name} has no repository")
    from semo.engine.config import default_workspace_root

    root = office.workspace_root or str(default_workspace_root())
    return WorktreeManager(Path(office.repository), Path(root))


def _age(path: Path) -> float | None:
    try:
        return max(0.0, time.time() - path.stat().st_mtime)
    except OSError:
        return None


async def _contained(repo: Path, commit: str, refs: str) -> bool:
    out = await run_git(repo, "for-each-ref", "--count=1", f"--contains={commit}", refs)
    return out.returncode == 0 and bool(out.stdout.strip())


async def _state(repo: Path, worktree: Worktree, base: str, dirty: bool | None) -> State:
    if dirty is None:
        return "missing"
    if dirty:
        return "dirty"
    head = worktree.head
    if head is None:
        return "merged"
    ancestor = await run_git(repo, "merge-base", "--is-ancestor", head, f"refs/heads/{base}")
    if ancestor.returncode == 0:
        return "merged"
    if await _contained(repo, head, "refs/remotes"):
        return "shipped"
    if await _contained(repo, head, "refs/heads/semo/job"):
        return "combined"
    return "unmerged"


async def list_worktrees(
    store: Store, office: Office, settings: GitSection | None = None
) -> WorktreeListing:
    """Every worktree semo made for the office's repository, and the saved leftovers."""
    manager = _manager(office)
    repo = manager.repository
    base, _ = await base_of(repo, (settings or GitSection()).base_branch)
    busy = {
        s.worktree_id
        for s in await store.list_sessions(office.id)
        if s.worktree_id and s.status != "terminated"
    }
    jobs = {}
    for job in await store.list_jobs(office.id):
        for role, work in (job.work or {}).get("roles", {}).items():
            jobs[(role, work.get("branch"))] = job.id
    listing = WorktreeListing(base_branch=base)
    for worktree in await manager.list():
        folder = worktree.path if worktree.path.is_dir() else None
        dirty = await is_dirty(folder) if folder is not None else None
        ahead = None
        if worktree.head:
            count = await run_git(
                repo, "rev-list", "--count", f"refs/heads/{base}..{worktree.head}"
            )
            ahead = int(count.stdout.strip() or 0) if count.returncode == 0 else None
        listing.worktrees.append(
            WorktreeInfo(
                role=worktree.role,
                task_id=worktree.task_id,
                path=str(worktree.path),
                branch=worktree.branch,
                head=worktree.head,
                job_id=jobs.get((worktree.role, worktree.branch)),
                dirty=dirty,
                ahead=ahead,
                age_seconds=_age(worktree.path),
                in_use=str(worktree.path) in busy,
                state=await _state(repo, worktree, base, dirty),
            )
        )
    out = await git_ok(
        repo,
        "for-each-ref",
        "--format=%(refname:short)%00%(objectname)%00%(committerdate:unix)%00%(subject)",
        f"refs/heads/{SAVED_PREFIX}",
        what="the saved leftovers",
    )
    now = time.time()
    for line in out.splitlines():
        ref, commit, when, subject = [*line.split("\0"), "", "", ""][:4]
        age = now - int(when) if when.isdigit() else None
        listing.saved.append(SavedWork(ref=ref, commit=commit, subject=subject, age_seconds=age))
    return listing


async def prune_worktrees(
    store: Store, office: Office, *, force: bool = False, settings: GitSection | None = None
) -> list[PruneResult]:
    """Remove the worktrees whose work exists elsewhere (see the module's docstring)."""
    settings = settings or GitSection()
    manager = _manager(office)
    listing = await list_worktrees(store, office, settings)
    found = {str(w.path): w for w in await manager.list()}
    results = []
    for info in listing.worktrees:
        worktree = found.get(info.path)
        if worktree is None:
            continue
        if info.in_use:
            results.append(PruneResult(path=info.path, removed=False, why="a session works in it"))
            continue
        if info.state not in PRUNABLE and not force:
            why = {
                "dirty": "uncommitted changes (--force saves them on a branch, then removes it)",
                "combined": "its work is on a job branch that is not merged or shipped",
                "unmerged": "its commits are only on its branch",
            }[info.state]
            results.append(PruneResult(path=info.path, removed=False, why=f"kept: {why}"))
            continue
        saved = None
        if info.state == "dirty":
            stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
            saved = f"{SAVED_PREFIX}/{info.role}/pruned-{info.task_id}-{stamp}"
            await save_leftovers(
                Path(info.path),
                saved,
                f"semo: what {info.branch or 'a detached HEAD'} left uncommitted in "
                f"{info.task_id}\n\nSaved by semo worktrees prune --force.",
                settings.identity(info.role),
            )
        elsewhere = info.state in PRUNABLE
        try:
            await manager.remove(worktree)
            if elsewhere and info.branch and info.state != "missing":
                await _delete_branch(manager.repository, info.branch, info.head)
        except WorktreeError as error:
            results.append(PruneResult(path=info.path, removed=False, why=str(error), saved=saved))
            continue
        reasons = {"missing": "its folder was gone", "merged": "merged", "shipped": "shipped"}
        results.append(
            PruneResult(
                path=info.path,
                removed=True,
                why=reasons.get(info.state, f"--force ({info.state}; its branch is kept)"),
                saved=saved,
            )
        )
    return results


async def _delete_branch(repo: Path, branch: str, head: str | None) -> None:
    """Delete semo's `branch` if it still points at `head` (its work is merged or shipped)."""
    if not branch.startswith("semo/") or head is None:
        return
    if await resolve_commit(repo, f"refs/heads/{branch}") != head:
        return
    await run_git(repo, "update-ref", "-d", f"refs/heads/{branch}", head)
