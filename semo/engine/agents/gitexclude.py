"""Keep a file semo writes into a worktree out of commits: the repository's ``info/exclude``."""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

from semo.engine.fsutil import read_text_in, write_text_in
from semo.engine.gitsafe import git_argv, git_environment

__all__ = ["ensure_git_exclude"]

log = logging.getLogger("semo.hooks")


def _git(worktree: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(
            git_argv("git", worktree, *args),  # hooks off, no secrets: semo/engine/gitsafe.py
            capture_output=True,
            text=True,
            timeout=10,
            env=git_environment(),
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout.strip()


#: the comment above the first pattern semo adds (the hooks were the first such file)
NOTE = "# Claude Code hooks installed by semo (per-machine, never committed)"


def ensure_git_exclude(worktree: Path, relpath: Path) -> Path | None:
    """List ``worktree/relpath`` in the repository's ``info/exclude`` (found with
    ``git rev-parse --git-path info/exclude``, so linked worktrees share their repository's file).

    Returns the exclude file's path, or None when ``worktree`` is not in a git repository (or
    git is not installed). Idempotent; the pattern is anchored at the repository's top level.
    """
    worktree = Path(worktree)
    top = _git(worktree, "rev-parse", "--show-toplevel")
    git_path = _git(worktree, "rev-parse", "--git-path", "info/exclude")
    if not top or not git_path:
        return None
    exclude = Path(git_path)
    if not exclude.is_absolute():
        exclude = worktree / exclude
    target = Path(os.path.realpath(worktree / relpath))
    try:
        rel = target.relative_to(os.path.realpath(top))
    except ValueError:
        return None  # the file is outside the repository (a symlink out of it)
    pattern = "/" + rel.as_posix()
    git_dir = exclude.parent.parent  # agents can write it too: never through a symlink out
    where = "the repository's git folder"
    existing = read_text_in(git_dir, "info/exclude", where=where) or ""
    if pattern in (line.strip() for line in existing.splitlines()):
        return exclude
    if existing and not existing.endswith("\n"):
        existing += "\n"
    body = existing + NOTE + "\n"
    write_text_in(git_dir, "info/exclude", body + pattern + "\n", mode=0o644, where=where)
    if _git(Path(top), "ls-files", "--error-unmatch", "--", rel.as_posix()) is not None:
        log.warning("%s is tracked by git; info/exclude does not hide changes to it", target)
    return exclude
