"""One git command as an asyncio subprocess, run the way semo/engine/gitsafe.py says.

    result = await run_git(repo, "rev-parse", "HEAD")       # GitResult(returncode, stdout, ...)
    out = await git_ok(repo, "merge-base", a, b, what="the merge base")  # GitError otherwise

Never blocks the loop; a command that outlives ``timeout`` is killed and reported; a cancelled
caller kills it too. ``config`` adds ``-c`` settings after gitsafe's own (they win over every
config file), ``env`` adds variables to gitsafe's minimal environment.

Before each command the repository's config is read (``git config --list --name-only``, with
its includes) and every filter, diff and merge driver it defines is defanged for that command
(`semo.engine.gitsafe.driver_overrides`): the config is the agents' to write.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from semo.engine.gitsafe import config_environment, driver_overrides, git_argv, git_environment

__all__ = ["GitError", "GitResult", "git_ok", "run_git"]

#: Seconds one git command may take unless the caller says otherwise.
DEFAULT_TIMEOUT = 300.0


class GitError(Exception):
    """A git command could not run or failed; the message says what and git's own words."""


@dataclass(frozen=True)
class GitResult:
    """What a git command returned (stdout and stderr decoded, undecodable bytes kept)."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def message(self) -> str:
        """git's error lines (`fatal:`/`error:`), else its output, on one line."""
        lines = [line.strip() for line in (self.stderr or self.stdout).splitlines()]
        lines = [line for line in lines if line]
        errors = [line for line in lines if line.startswith(("fatal:", "error:"))]
        return " / ".join(errors or lines) or f"exit status {self.returncode}"


async def run_git(
    cwd: os.PathLike[str] | str,
    *args: str,
    git: str = "git",
    config: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> GitResult:
    """Run ``git -C cwd <gitsafe settings> [-c config...] args``; never raises for git's exit
    status (see :func:`git_ok`), raises :class:`GitError` when git cannot run or times out."""
    extra: list[str] = []
    for setting in config:
        extra += ["-c", setting]
    names = await _run(git, cwd, ["config", "--null", "--name-only", "--list"], {}, None, timeout)
    defanged = driver_overrides(names.stdout.split("\0")) if names.returncode == 0 else []
    return await _run(
        git, cwd, [*extra, *args], {**config_environment(defanged), **(env or {})}, stdin, timeout
    )


async def _run(
    git: str,
    cwd: os.PathLike[str] | str,
    args: Sequence[str],
    env: Mapping[str, str],
    stdin: bytes | None,
    timeout: float,
) -> GitResult:
    try:
        proc = await asyncio.create_subprocess_exec(
            *git_argv(git, cwd, *args),
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=git_environment(**env),
        )
    except OSError as exc:
        raise GitError(f"cannot run {git!r}: {exc}") from exc
    try:
        async with asyncio.timeout(timeout):
            out, err = await proc.communicate(stdin)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise GitError(
            f"git {' '.join(args[:2])} took longer than {timeout:g}s; stopped it"
        ) from None
    except asyncio.CancelledError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        raise
    assert proc.returncode is not None
    return GitResult(
        proc.returncode,
        out.decode("utf-8", "surrogateescape"),
        err.decode("utf-8", "surrogateescape"),
    )


async def git_ok(
    cwd: os.PathLike[str] | str,
    *args: str,
    what: str,
    git: str = "git",
    config: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> str:
    """:func:`run_git`, its stdout when it succeeded, else :class:`GitError` "<what>: git says
    ..."."""
    result = await run_git(
        cwd, *args, git=git, config=config, env=env, stdin=stdin, timeout=timeout
    )
    if result.returncode != 0:
        raise GitError(f"{what}: git says: {result.message}")
    return result.stdout
