"""Pre-accept Claude Code's onboarding and a worktree's trust dialog in the user's config.

How it works: docs/SESSIONS.md, "Claude Code's config: onboarding and trust".
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import hashlib
import json
import logging
import math
import os
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from semo.engine import safe_json
from semo.engine.agents.errors import AgentSetupError
from semo.engine.fsutil import atomic_write

__all__ = [
    "ClaudeConfigBusy",
    "ClaudeConfigError",
    "claude_config_path",
    "ensure_trusted",
    "ensure_trusted_async",
    "forget",
    "forget_async",
    "owned_projects",
    "project_key",
]

log = logging.getLogger("semo.claude_config")

#: top-level flags of the config that keep a first-run screen away from a new session: the
#: onboarding walk-through, and the offer to make auto mode the default permission mode
SETTLED_AHEAD = ("hasCompletedOnboarding", "hasSeenAutoDefaultNudge")

CONFIG_NAME = ".claude.json"
#: Claude Code's lock is stale when its mtime is older than this (proper-lockfile's default).
CLI_LOCK_STALE_SECONDS = 10.0
#: How long to wait for a CLI that holds its lock before giving up.
DEFAULT_LOCK_TIMEOUT = 15.0
#: How often a read-modify-write starts over because someone wrote meanwhile.
MAX_ATTEMPTS = 20
#: Reads of a file that is not valid JSON are retried this often (a writer that does not write
#: atomically may be half-way), then it is an error.
MALFORMED_RETRIES = 3
_RETRY_PAUSE = 0.05


class ClaudeConfigError(AgentSetupError):
    """The config file cannot be changed safely (malformed, unreadable, unexpected shape)."""


class ClaudeConfigBusy(ClaudeConfigError):
    """Claude Code held its config lock longer than we were willing to wait."""


def claude_config_path(home: Path | None = None, env: Mapping[str, str] | None = None) -> Path:
    """The global config file the CLI reads, as Claude Code 2.1.328 picks it.

    ``home`` given: that home's ``.claude.json`` (what a CLI started with ``HOME=home`` and no
    ``CLAUDE_CONFIG_DIR`` reads). Else ``$CLAUDE_CONFIG_DIR/.claude.json`` when that variable is
    set, else ``~/.claude.json``. A legacy ``<config dir>/.config.json`` (config dir:
    ``$CLAUDE_CONFIG_DIR`` or ``~/.claude``) that is not empty is used instead while the
    ``.claude.json`` is missing or empty, as the CLI does.
    """
    env = os.environ if env is None else env
    if home is not None:
        base = Path(home)
        config_dir = base / ".claude"
    elif env.get("CLAUDE_CONFIG_DIR"):
        base = config_dir = Path(env["CLAUDE_CONFIG_DIR"])
    else:
        base = Path.home()
        config_dir = base / ".claude"
    main = base / CONFIG_NAME
    legacy = config_dir / ".config.json"
    with contextlib.suppress(OSError):
        if legacy.is_file() and legacy.stat().st_size > 0:
            try:
                main_size = main.stat().st_size
            except FileNotFoundError:
                return legacy
            if main_size == 0:
                return legacy
    return main


def project_key(worktree: Path) -> str:
    """The ``projects`` key Claude Code looks up for a session started in ``worktree``: its
    resolved absolute path (the CLI's working directory)."""
    return os.path.realpath(worktree)


# -- locks ----------------------------------------------------------------------------------


@contextlib.contextmanager
def _semo_lock(config: Path) -> Iterator[None]:
    """semo's writers, one at a time (flock on a sidecar; released if the process dies)."""
    lock_path = config.with_name(config.name + ".semo-lock")
    config.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@dataclass
class _CliLock:
    path: Path
    inode: tuple[int, int] | None = None

    def touch(self) -> None:
        """Refresh the mtime so the CLI does not take our lock for stale."""
        with contextlib.suppress(OSError):
            os.utime(self.path)


@contextlib.contextmanager
def _cli_lock(config: Path, timeout: float) -> Iterator[_CliLock]:
    """Claude Code's own config lock: the directory ``<config>.lock`` (see module docstring)."""
    lock = _CliLock(config.with_name(config.name + ".lock"))
    deadline = time.monotonic() + timeout
    pause = 0.005
    while True:
        try:
            os.mkdir(lock.path, 0o700)
        except FileExistsError:
            try:
                st = os.stat(lock.path)
            except FileNotFoundError:
                continue  # released between mkdir and stat
            if st.st_mtime < time.time() - CLI_LOCK_STALE_SECONDS:
                log.warning("removing a stale Claude Code config lock %s", lock.path)
                with contextlib.suppress(OSError):
                    os.rmdir(lock.path)
                continue
            if time.monotonic() >= deadline:
                raise ClaudeConfigBusy(
                    f"{lock.path} is held (a running claude is saving {config}); waited "
                    f"{timeout:g}s. Try again, or remove it if no claude is running."
                ) from None
            time.sleep(pause)
            pause = min(pause * 2, 0.1)
            continue
        st = os.stat(lock.path)
        lock.inode = (st.st_dev, st.st_ino)
        break
    try:
        yield lock
    finally:
        try:
            st = os.stat(lock.path)
            if (st.st_dev, st.st_ino) == lock.inode:  # still ours, not taken over as stale
                os.rmdir(lock.path)
        except OSError:
            pass


# -- reading and writing --------------------------------------------------------------------


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number out of range: {text}")
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


@dataclass(frozen=True)
class _Snapshot:
    exists: bool
    digest: bytes
    size: int
    mtime_ns: int
    mode: int
    text: str


def _snapshot(path: Path) -> _Snapshot:
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            data = f.read()
    except FileNotFoundError:
        return _Snapshot(False, b"", 0, 0, 0o600, "")
    except OSError as exc:
        raise ClaudeConfigError(f"cannot read {path}: {exc}; semo left it unchanged") from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ClaudeConfigError(
            f"{path} is not UTF-8 ({exc}); fix or remove it, semo will not overwrite it"
        ) from exc
    return _Snapshot(
        True,
        hashlib.sha256(data).digest(),
        len(data),
        st.st_mtime_ns,
        stat.S_IMODE(st.st_mode),
        text,
    )


def _parse(path: Path, snap: _Snapshot) -> dict[str, Any]:
    if not snap.exists:
        return {}
    if not snap.text.strip():
        raise ClaudeConfigError(
            f"{path} is empty; remove it (Claude Code creates a new one) or restore it, "
            "semo will not overwrite it"
        )
    try:
        safe_json.check_depth(snap.text)  # agents can write it: no RecursionError
        value = json.loads(snap.text, parse_float=_finite, parse_constant=_reject_constant)
    except (json.JSONDecodeError, ValueError) as exc:
        raise ClaudeConfigError(
            f"{path} is not valid JSON ({exc}); fix or remove it, semo will not overwrite it"
        ) from exc
    if not isinstance(value, dict):
        raise ClaudeConfigError(
            f"{path}: expected a JSON object, found {type(value).__name__}; "
            "fix or remove it, semo will not overwrite it"
        )
    return value


def _read_config(path: Path) -> tuple[_Snapshot, dict[str, Any]]:
    for attempt in range(MALFORMED_RETRIES + 1):
        snap = _snapshot(path)
        try:
            return snap, _parse(path, snap)
        except ClaudeConfigError:
            if attempt == MALFORMED_RETRIES:
                raise
            time.sleep(_RETRY_PAUSE)
    raise AssertionError("unreachable")  # pragma: no cover


def _dump(config: dict[str, Any], like: _Snapshot) -> str:
    text = json.dumps(config, indent=2, ensure_ascii=False, allow_nan=False)
    if like.exists and like.text.endswith("\n"):
        text += "\n"
    return text


def _same(a: _Snapshot, b: _Snapshot) -> bool:
    return (a.exists, a.digest, a.size, a.mtime_ns) == (b.exists, b.digest, b.size, b.mtime_ns)


Update = Callable[[dict[str, Any]], bool]


def _update_config(path: Path, update: Update, *, lock_timeout: float) -> bool:
    """Apply ``update`` (mutates the dict, returns whether it changed anything) under both
    locks, atomically, starting over if the file changed under us. Returns whether it wrote."""
    target = Path(os.path.realpath(path))  # a symlinked config (dotfiles) stays a symlink
    with _cli_lock(path, lock_timeout) as lock:
        for _attempt in range(MAX_ATTEMPTS):
            lock.touch()
            snap, config = _read_config(target)
            if not update(config):
                return False
            text = _dump(config, snap)
            unchanged = functools.partial(_unchanged, target, snap)
            if not atomic_write(target, text, mode=snap.mode, still_current=unchanged):
                log.info("%s changed while semo was writing it; starting over", target)
                continue
            _fsync_dir(target.parent)
            return True
    raise ClaudeConfigError(
        f"{target} kept changing while semo tried to update it ({MAX_ATTEMPTS} attempts)"
    )


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# -- what semo created ----------------------------------------------------------------------


def _owned_path(config: Path) -> Path:
    return config.with_name(config.name + ".semo-owned.json")


def _read_owned(config: Path) -> list[str]:
    path = _owned_path(config)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        log.warning("ignoring unreadable %s (%s): no entry counts as semo's", path, exc)
        return []
    projects = data.get("projects") if isinstance(data, dict) else None
    if not isinstance(projects, list):
        return []
    return [p for p in projects if isinstance(p, str)]


def _unchanged(target: Path, snap: _Snapshot) -> bool:
    return _same(_snapshot(target), snap)


def _write_owned(config: Path, projects: list[str]) -> None:
    path = _owned_path(config)
    if not projects:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    body = json.dumps(
        {"config": str(config), "projects": sorted(set(projects))}, indent=2, ensure_ascii=False
    )
    atomic_write(path, body + "\n", mode=0o600)


def owned_projects(*, home: Path | None = None) -> list[str]:
    """The ``projects`` entries semo created (and has not forgotten) in the config file."""
    return sorted(_read_owned(claude_config_path(home)))


# -- the API --------------------------------------------------------------------------------


def _projects(config: dict[str, Any], path: Path) -> dict[str, Any]:
    projects = config.setdefault("projects", {})
    if not isinstance(projects, dict):
        raise ClaudeConfigError(
            f'{path}: "projects" is a {type(projects).__name__}, not an object; semo will not '
            "overwrite it"
        )
    return projects


def ensure_trusted(
    worktree: Path, *, home: Path | None = None, lock_timeout: float = DEFAULT_LOCK_TIMEOUT
) -> bool:
    """Mark onboarding done and ``worktree`` trusted for Claude Code; True if the file changed.

    Only ``hasCompletedOnboarding``, ``hasSeenAutoDefaultNudge`` and
    ``projects[<resolved worktree>].hasTrustDialogAccepted`` are set (a missing project entry is
    created holding just that key, and recorded as semo's). ``hasSeenAutoDefaultNudge``: Claude
    Code 2.1.328, when the user's settings ask for the classic "ask" mode, opens a new session
    with an offer to make auto mode the default; answered in an agent's pane it would change the
    operator's own settings, and a prompt typed then would land in it (docs/CONSOLE.md).
    Raises :class:`ClaudeConfigError` (file malformed, or of an unexpected shape) or
    :class:`ClaudeConfigBusy`.
    """
    path = claude_config_path(home)
    key = project_key(worktree)
    created = False

    def update(config: dict[str, Any]) -> bool:
        nonlocal created
        changed = False
        for flag in SETTLED_AHEAD:
            if config.get(flag) is not True:
                config[flag] = True
                changed = True
        projects = _projects(config, path)
        entry = projects.get(key)
        created = entry is None
        if entry is None:
            projects[key] = {"hasTrustDialogAccepted": True}
            changed = True
        elif not isinstance(entry, dict):
            raise ClaudeConfigError(
                f'{path}: "projects[{key}]" is not an object; semo will not overwrite it'
            )
        elif entry.get("hasTrustDialogAccepted") is not True:
            entry["hasTrustDialogAccepted"] = True
            changed = True
        return changed

    with _semo_lock(path):
        changed = _update_config(path, update, lock_timeout=lock_timeout)
        if changed and created:
            owned = _read_owned(path)
            if key not in owned:
                _write_owned(path, [*owned, key])
    if changed:
        log.info("Claude Code: onboarding done and %s trusted in %s", key, path)
    return changed


def forget(
    worktree: Path, *, home: Path | None = None, lock_timeout: float = DEFAULT_LOCK_TIMEOUT
) -> bool:
    """Remove ``worktree``'s ``projects`` entry if semo created it (see :func:`ensure_trusted`);
    an entry semo did not create is left alone. True if the file changed."""
    path = claude_config_path(home)
    key = project_key(worktree)

    def update(config: dict[str, Any]) -> bool:
        projects = config.get("projects")
        if not isinstance(projects, dict) or key not in projects:
            return False
        del projects[key]
        return True

    with _semo_lock(path):
        owned = _read_owned(path)
        if key not in owned:
            return False
        changed = _update_config(path, update, lock_timeout=lock_timeout)
        _write_owned(path, [p for p in owned if p != key])
    return changed


async def ensure_trusted_async(worktree: Path, *, home: Path | None = None) -> bool:
    """:func:`ensure_trusted` in a worker thread."""
    return await asyncio.to_thread(ensure_trusted, worktree, home=home)


async def forget_async(worktree: Path, *, home: Path | None = None) -> bool:
    """:func:`forget` in a worker thread."""
    return await asyncio.to_thread(forget, worktree, home=home)
