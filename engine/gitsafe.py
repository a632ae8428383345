"""How semo runs git on a repository its agents can write to.

Agents share the repository's ``.git`` (every worktree points into it), so an agent can plant a
hook (``.git/hooks/post-checkout``, ``reference-transaction``, ``post-index-change``) or a
config setting that runs a program (``core.fsmonitor``, ``core.hooksPath``) and wait for the
engine's next ``git worktree add``. Every git command semo runs therefore:

- disables hooks and the file-system monitor on the command line, which wins over any config
  file: ``-c core.hooksPath=/dev/null -c core.fsmonitor=false``;
- gets a minimal environment (:func:`git_environment`): PATH, HOME, USER, LOGNAME, TMPDIR,
  XDG_CONFIG_HOME and nothing else from the engine (no store credentials, no token, no
  ``GIT_*`` variable that would point git elsewhere or run a program: GIT_DIR, GIT_SSH_COMMAND,
  GIT_EXTERNAL_DIFF, GIT_CONFIG_PARAMETERS, ...), never prompts, and speaks C.

What is left (docs/SECURITY.md, "What is not defended"): a filter driver an agent defines in
``.git/config`` for paths a committed ``.gitattributes`` names still runs at checkout; it runs
as the same user with that minimal environment, so it gains nothing the agent did not have.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["SAFE_CONFIG", "git_argv", "git_environment"]

#: ``-c`` settings given to every git command semo runs.
SAFE_CONFIG = ("core.hooksPath=/dev/null", "core.fsmonitor=false")

#: What a git command inherits from the engine's environment.
_INHERITED = ("PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "XDG_CONFIG_HOME")


def git_environment(source: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
    """The environment of a git command semo runs: the few variables of :data:`_INHERITED`
    from ``source`` (default: the engine's), prompts off, C locale, plus ``extra``."""
    source = os.environ if source is None else source
    env = {k: source[k] for k in _INHERITED if k in source}
    env.setdefault("PATH", os.defpath)
    env |= {"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0"}
    return env | extra


def git_argv(git: str, cwd: os.PathLike[str] | str, *args: str) -> list[str]:
    """``git -C cwd -c core.hooksPath=/dev/null -c core.fsmonitor=false <args>``."""
    argv = [git, "-C", os.fspath(cwd)]
    for setting in SAFE_CONFIG:
        argv += ["-c", setting]
    return [*argv, *args]
