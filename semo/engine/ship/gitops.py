"""The git side of shipping: push a branch to a remote, merge it into the base branch.

    ref = await push_branch(repo, "origin", "semo/job-1a2b3c4d")
    merged = await merge_branch(repo, "semo/job-1a2b3c4d", "main")   # Merged(kind, commit, ...)

How it works: docs/JOBS.md, "Shipping's git steps".
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from semo.engine.gitrun import GitError, git_ok, run_git

__all__ = [
    "MergeConflict",
    "Merged",
    "diffstat",
    "merge_branch",
    "push_branch",
    "push_url",
    "remote_url",
]

#: -c settings of every push (see the module's docstring).
PUSH_CONFIG = (
    "core.sshCommand=ssh",
    "core.askPass=",
    "core.gitProxy=",
    "credential.helper=",
    "protocol.ext.allow=never",
    "protocol.fd.allow=never",
    "push.gpgSign=false",
    "push.recurseSubmodules=no",
)
#: git's scp-like remote syntax (``host:path``): no slash before the first colon.
_SCP = re.compile(r"^[^/:]+:")
#: Used for a merge commit when git has no identity for the user.
FALLBACK_IDENTITY = {
    "GIT_AUTHOR_NAME": "semo",
    "GIT_AUTHOR_EMAIL": "semo@localhost",
    "GIT_COMMITTER_NAME": "semo",
    "GIT_COMMITTER_EMAIL": "semo@localhost",
}


class MergeConflict(GitError):
    """The branch does not merge cleanly into the base; ``files`` are the conflicted paths."""

    def __init__(self, branch: str, base: str, files: list[str]) -> None:
        self.files = files
        shown = ", ".join(files[:10]) + (f" and {len(files) - 10} more" if len(files) > 10 else "")
        super().__init__(
            f"{branch} does not merge cleanly into {base}: conflicts in {shown}. Nothing was "
            f"changed; resolve them on {branch} (or rebase it onto {base}) and ship again"
        )


@dataclass(frozen=True)
class Merged:
    """What a merge did: ``kind`` fast-forward / merge (a merge commit) / up-to-date."""

    kind: Literal["fast-forward", "merge", "up-to-date"]
    base: str
    commit: str
    previous: str


async def _global_helpers(repo: Path) -> list[str]:
    """The user's own credential helpers (``--global``: not the repository's config)."""
    result = await run_git(repo, "config", "--global", "--get-all", "credential.helper")
    return [line for line in result.stdout.splitlines() if line.strip()]


async def remote_url(repo: Path, remote: str) -> str:
    """The URL ``remote`` names (a URL or a path is returned as it is)."""
    if "/" in remote or ":" in remote:
        return remote
    return (await git_ok(repo, "remote", "get-url", remote, what=f"remote {remote!r}")).strip()


async def push_url(repo: Path, remote: str, *, what: str = "") -> str:
    """The URL a push to ``remote`` goes to (its ``pushurl`` when it has one)."""
    if "/" in remote or ":" in remote:
        return remote
    what = what or f"remote {remote!r}"
    return (await git_ok(repo, "remote", "get-url", "--push", remote, what=what)).strip()


def _local_path(url: str) -> bool:
    """Whether git takes ``url`` for a path (no ``scheme://``, not ``host:path``)."""
    return "://" not in url and not _SCP.match(url)


async def push_branch(
    repo: Path, remote: str, branch: str, *, env: dict[str, str] | None = None
) -> str:
    """Push ``branch`` to the same name on ``remote`` (never forced); returns the pushed commit.
    ``env`` adds e.g. ``SSH_AUTH_SOCK`` to the push's environment."""
    commit = (
        await git_ok(
            repo,
            "rev-parse",
            "--verify",
            f"refs/heads/{branch}^{{commit}}",
            what=f"branch {branch}",
        )
    ).strip()
    url = await push_url(repo, remote, what=f"pushing {branch} to {remote}")
    if _local_path(url):
        url = str((repo / url).absolute())  # git reads a path from the repository's folder
    objects = Path(
        (
            await git_ok(
                repo,
                "rev-parse",
                "--path-format=absolute",
                "--git-common-dir",
                what="the repository's git folder",
            )
        ).strip(),
        "objects",
    )
    config = [*PUSH_CONFIG, *(f"credential.helper={h}" for h in await _global_helpers(repo))]
    with tempfile.TemporaryDirectory(prefix="semo-push-") as folder:
        shim = Path(folder, "push.git")
        await git_ok(folder, "init", "-q", "--bare", str(shim), what="a folder to push from")
        (shim / "objects" / "info" / "alternates").write_text(f"{objects}\n")
        await git_ok(
            shim,
            "push",
            "--porcelain",
            "--receive-pack=git-receive-pack",
            url,
            f"{commit}:refs/heads/{branch}",
            what=f"pushing {branch} to {remote}",
            config=config,
            env=env or {},
        )
    if not ("/" in remote or ":" in remote):  # a named remote: its tracking branch, as git's
        await git_ok(
            repo,
            "update-ref",
            f"refs/remotes/{remote}/{branch}",
            commit,
            what=f"recording the push of {branch} (refs/remotes/{remote}/{branch})",
        )
    return commit


async def _commit(repo: Path, ref: str) -> str:
    return (await git_ok(repo, "rev-parse", "--verify", f"{ref}^{{commit}}", what=f"{ref}")).strip()


async def _is_ancestor(repo: Path, older: str, newer: str) -> bool:
    result = await run_git(repo, "merge-base", "--is-ancestor", older, newer)
    if result.returncode not in (0, 1):
        raise GitError(f"comparing {older} and {newer}: git says: {result.message}")
    return result.returncode == 0


async def _checked_out(repo: Path, base: str) -> Path | None:
    """The worktree that has ``base`` checked out, if any."""
    listing = await git_ok(repo, "worktree", "list", "--porcelain", what="listing worktrees")
    path: str | None = None
    for line in listing.splitlines():
        if line.startswith("worktree "):
            path = line.removeprefix("worktree ")
        elif line == f"branch refs/heads/{base}" and path is not None:
            return Path(path)
    return None


async def _identity(repo: Path) -> dict[str, str]:
    result = await run_git(repo, "var", "GIT_COMMITTER_IDENT")
    return {} if result.returncode == 0 else dict(FALLBACK_IDENTITY)


async def merge_branch(repo: Path, branch: str, base: str, *, message: str | None = None) -> Merged:
    """Merge ``branch`` into ``base``: a fast-forward when it can, else a merge commit;
    :class:`MergeConflict` (nothing changed) when the two conflict."""
    head = await _commit(repo, f"refs/heads/{branch}")
    old = await _commit(repo, f"refs/heads/{base}")
    if await _is_ancestor(repo, head, old):
        return Merged("up-to-date", base, old, old)
    if await _is_ancestor(repo, old, head):
        kind: Literal["fast-forward", "merge"] = "fast-forward"
        new = head
    else:
        kind = "merge"
        result = await run_git(
            repo, "merge-tree", "--write-tree", "--name-only", "--no-messages", old, head
        )
        lines = result.stdout.splitlines()
        if result.returncode == 1:
            raise MergeConflict(branch, base, sorted(set(lines[1:])))
        if result.returncode != 0 or not lines:
            raise GitError(f"merging {branch} into {base}: git says: {result.message}")
        text = message or f"Merge {branch} into {base}"
        new = (
            await git_ok(
                repo,
                "commit-tree",
                lines[0],
                "-p",
                old,
                "-p",
                head,
                "-m",
                text,
                what="the merge commit",
                env=await _identity(repo),
            )
        ).strip()
    checkout = await _checked_out(repo, base)
    if checkout is not None:
        await git_ok(
            checkout,
            "merge",
            "--ff-only",
            "--no-edit",
            new,
            what=f"updating the checkout of {base} at {checkout} (its local changes are kept; "
            "commit or stash them and ship again)",
        )
    else:
        await git_ok(
            repo,
            "update-ref",
            f"refs/heads/{base}",
            new,
            old,
            what=f"moving {base} (it moved meanwhile?)",
        )
    return Merged(kind, base, new, old)


async def diffstat(repo: Path, base: str, branch: str) -> str:
    """``git diff --stat`` of what ``branch`` adds since it left ``base``."""
    return await git_ok(
        repo,
        "diff",
        "--stat",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        f"{base}...{branch}",
        what="the diffstat",
    )
