"""A shell in a job's worktree, for the operator (`s` in the jobs view).

Inside tmux it is a new tmux window in that folder (the console keeps running beside it);
elsewhere the console steps aside (Textual's suspend), runs `$SHELL` there, and comes back
when the shell exits. The shell is the operator's own: their environment, their `$SHELL`.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import App

if TYPE_CHECKING:
    from semo.engine.store.models import Job

__all__ = ["job_worktree", "open_shell", "shell_argv"]


def job_worktree(job: Job) -> Path | None:
    """The worktree the job's own role last worked in (`jobs.work`), else any of its roles'."""
    roles = (job.work or {}).get("roles") or {}
    if not isinstance(roles, dict):
        return None
    ordered = [roles.get(job_role(job)), *roles.values()]
    for work in ordered:
        if isinstance(work, dict) and isinstance(work.get("worktree"), str):
            return Path(work["worktree"])
    return None


def job_role(job: Job) -> str | None:
    return getattr(job, "role", None)


def shell_argv(folder: Path, env: Mapping[str, str]) -> list[str]:
    """The command that opens the shell: `tmux new-window -c FOLDER SHELL` inside tmux, else
    the shell alone (run in FOLDER)."""
    shell = env.get("SHELL") or "/bin/sh"
    if env.get("TMUX"):
        return ["tmux", "new-window", "-n", "semo-job", "-c", str(folder), shell]
    return [shell]


def open_shell(app: App[object], folder: Path, env: Mapping[str, str] | None = None) -> str:
    """Open the shell (see the module); returns what happened, for a notification."""
    env = os.environ if env is None else env
    if not folder.is_dir():
        raise FileNotFoundError(f"the worktree {folder} is not there any more")
    argv = shell_argv(folder, env)
    if env.get("TMUX"):
        done = subprocess.run(argv, env=dict(env), capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise OSError(f"tmux new-window failed: {done.stderr.strip()[:200]}")
        return f"a shell in {folder} (tmux window semo-job)"
    with app.suspend():
        subprocess.run(argv, cwd=folder, env=dict(env), check=False)
    return f"back from the shell in {folder}"
