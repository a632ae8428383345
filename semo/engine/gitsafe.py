"""How semo runs git on a repository its agents can write to.

How it works: docs/SECURITY.md, "git on a repository agents can write to".
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

__all__ = [
    "SAFE_CONFIG",
    "config_environment",
    "driver_overrides",
    "git_argv",
    "git_environment",
]

#: ``-c`` settings given to every git command semo runs: nothing in the repository's config
#: that runs a program applies.
SAFE_CONFIG = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.pager=cat",
    "core.editor=:",
    "sequence.editor=:",
    "core.alternateRefsCommand=",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "push.gpgSign=false",
    "protocol.ext.allow=never",
    "submodule.recurse=false",
    "gc.auto=0",
    "maintenance.auto=false",
)

#: What each driver setting becomes (section -> variable -> value).
_DEFANGED = {
    "filter": {"clean": "cat", "smudge": "cat", "process": "", "required": "false"},
    "diff": {"textconv": "cat", "command": "true"},
    "merge": {"driver": "git merge-file --marker-size=%L %A %O %B"},
}

#: What a git command inherits from the engine's environment.
_INHERITED = ("PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "XDG_CONFIG_HOME")


def git_environment(source: Mapping[str, str] | None = None, /, **extra: str) -> dict[str, str]:
    """The environment of a git command semo runs: the few variables of :data:`_INHERITED`
    from ``source`` (default: the engine's), prompts off, C locale, plus ``extra``."""
    source = os.environ if source is None else source
    env = {k: source[k] for k in _INHERITED if k in source}
    env.setdefault("PATH", os.defpath)
    env |= {"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0"}
    return env | extra


def git_argv(git: str, cwd: os.PathLike[str] | str, *args: str) -> list[str]:
    """``git -C cwd -c core.hooksPath=/dev/null -c core.fsmonitor=false ... <args>``."""
    argv = [git, "-C", os.fspath(cwd)]
    for setting in SAFE_CONFIG:
        argv += ["-c", setting]
    return [*argv, *args]


def driver_overrides(names: Iterable[str]) -> list[tuple[str, str]]:
    """(key, value) settings that defang every filter, diff and merge driver among the config
    key names ``names`` (``git config --list --name-only``): each driver that appears gets all
    of its program settings replaced, whichever of them the config sets."""
    drivers: set[tuple[str, str]] = set()
    for name in names:
        section, dot, rest = name.partition(".")
        subsection, dot2, _variable = rest.rpartition(".")
        section = section.lower()
        if dot and dot2 and subsection and section in _DEFANGED:
            drivers.add((section, subsection))
    return [
        (f"{section}.{subsection}.{variable}", value)
        for section, subsection in sorted(drivers)
        for variable, value in _DEFANGED[section].items()
    ]


def config_environment(settings: Iterable[tuple[str, str]]) -> dict[str, str]:
    """``settings`` as command-line-scope config in the environment (``GIT_CONFIG_COUNT``,
    ``GIT_CONFIG_KEY_<n>``, ``GIT_CONFIG_VALUE_<n>``): no quoting problem for any name."""
    env: dict[str, str] = {}
    count = 0
    for count, (key, value) in enumerate(settings, start=1):
        env[f"GIT_CONFIG_KEY_{count - 1}"] = key
        env[f"GIT_CONFIG_VALUE_{count - 1}"] = value
    if count:
        env["GIT_CONFIG_COUNT"] = str(count)
    return env
