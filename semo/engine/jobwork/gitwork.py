"""Git in one agent's worktree: is it dirty, commit what is left, save leftovers, switch branch.

    if await is_dirty(path):
        saved = await save_leftovers(path, "semo/saved/FE/20260101-120000", "...", identity)
    await switch_branch(path, "semo/FE/job-1", start="<base commit>")
    sha = await commit_all(path, "Login page (FE, job 1)", identity)

Every command goes through semo/engine/gitrun.py (the repository's config untrusted: no hook, no
filter, diff or merge driver of the agents' runs). Untracked files count as work (``status
--untracked-files=all`` on the command line, whatever the config says); ignored files do not
(build output, semo's own ``.claude`` files). Nothing here deletes work: leftovers are committed
to a ref before a worktree is cleaned.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from semo.engine.gitrun import GitError, git_ok, run_git

__all__ = [
    "branch_exists",
    "checked_out_in",
    "commit_all",
    "current_branch",
    "is_dirty",
    "resolve_commit",
    "save_leftovers",
    "switch_branch",
]


async def current_branch(path: Path) -> str | None:
    """The branch checked out in `path` (short name), None when detached."""
    result = await run_git(path, "symbolic-ref", "--short", "-q", "HEAD")
    return result.stdout.strip() or None if result.returncode == 0 else None


async def resolve_commit(path: Path, ref: str) -> str | None:
    """The commit `ref` names, None when it names none."""
    result = await run_git(path, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    return result.stdout.strip() or None if result.returncode == 0 else None


async def branch_exists(path: Path, branch: str) -> bool:
    return await resolve_commit(path, f"refs/heads/{branch}") is not None


async def is_dirty(path: Path) -> bool:
    """Whether `path` has changes no commit holds: staged, unstaged or untracked files, or a
    merge in progress."""
    status = await git_ok(
        path,
        "status",
        "--porcelain=v1",
        "-z",
        "--untracked-files=all",
        "--ignore-submodules=none",
        what=f"the status of {path}",
    )
    if status.strip("\0"):
        return True
    merging = await run_git(path, "rev-parse", "-q", "--verify", "MERGE_HEAD")
    return merging.returncode == 0


async def commit_all(path: Path, message: str, identity: Mapping[str, str]) -> str | None:
    """Commit everything uncommitted in `path` (``add -A``) on its branch; the new commit, or
    None when there was nothing to commit. A merge in progress is concluded by the commit."""
    if not await is_dirty(path):
        return None
    await git_ok(path, "add", "-A", what=f"staging the changes in {path}")
    await git_ok(
        path,
        "commit",
        "--no-verify",
        "--allow-empty",
        "-q",
        "-m",
        message,
        what=f"committing the changes in {path}",
        env=dict(identity),
    )
    return await resolve_commit(path, "HEAD")


async def save_leftovers(
    path: Path, ref: str, message: str, identity: Mapping[str, str]
) -> str | None:
    """Keep what `path` has uncommitted as a commit on branch `ref` (its parent the worktree's
    HEAD; the worktree's branch does not move), then clean the worktree back to its HEAD. The
    saved commit, or None when nothing was uncommitted. The worktree is cleaned only once the
    ref holds the commit."""
    if not await is_dirty(path):
        return None
    await run_git(path, "merge", "--quit")  # a merge in progress: its state, not its files
    await git_ok(path, "add", "-A", what=f"staging the leftovers in {path}")
    tree = (await git_ok(path, "write-tree", what="the leftovers' tree")).strip()
    head = await resolve_commit(path, "HEAD")
    parents = ["-p", head] if head else []
    commit = (
        await git_ok(
            path,
            "commit-tree",
            tree,
            *parents,
            "-m",
            message,
            what="the leftovers' commit",
            env=dict(identity),
        )
    ).strip()
    await git_ok(
        path, "update-ref", f"refs/heads/{ref}", commit, "", what=f"saving the leftovers as {ref}"
    )
    if await resolve_commit(path, f"refs/heads/{ref}") != commit:  # pragma: no cover - git said so
        raise GitError(f"saving the leftovers of {path}: {ref} does not hold them")
    await git_ok(path, "reset", "-q", "--hard", what=f"cleaning {path}")
    await git_ok(path, "clean", "-q", "-f", "-d", what=f"cleaning {path}")
    return commit


async def checked_out_in(repo: Path, branch: str) -> Path | None:
    """The worktree of `repo` that has `branch` checked out, if any."""
    listing = await git_ok(repo, "worktree", "list", "--porcelain", "-z", what="the worktrees")
    path: str | None = None
    for field in listing.split("\0"):
        if field.startswith("worktree "):
            path = field.removeprefix("worktree ")
        elif field == f"branch refs/heads/{branch}" and path is not None:
            return Path(path)
    return None


async def switch_branch(path: Path, branch: str, *, start: str) -> None:
    """Check out `branch` in the (clean) worktree `path`; a new branch starts at `start`."""
    if await branch_exists(path, branch):
        await git_ok(path, "checkout", "-q", branch, "--", what=f"checking out {branch}")
    else:
        await git_ok(path, "checkout", "-q", "-b", branch, start, "--", what=f"creating {branch}")
