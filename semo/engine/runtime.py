"""This user's runtime folder, whether a process lives (and whose child), a socket probe.

Standard library only: the hook server (semo/engine/protocol/hooks.py), the control socket's paths
(semo/engine/control/paths.py) and the engine's liveness checks share it, and the `semo hook` path
must stay light.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import tempfile
from pathlib import Path


class RuntimeDirError(OSError):
    """A runtime folder that is not a folder, not ours, or cannot be made private (an OSError:
    every start-up that handles an unusable folder or socket handles it, in one line)."""


#: what to do when the runtime folder is not usable, appended to the error
RUNTIME_HINT = (
    "semo keeps its sockets only in a private folder of yours: set XDG_RUNTIME_DIR to one "
    "(your login session's /run/user/{uid}) in the shells you run semo from, or have {path} "
    "removed"
)


def runtime_dir() -> Path:
    """`$XDG_RUNTIME_DIR/semo` when XDG_RUNTIME_DIR is a folder, else `<tmp>/semo-<uid>`."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isdir(xdg):
        return Path(xdg) / "semo"
    return Path(tempfile.gettempdir()) / f"semo-{os.getuid()}"


def private_dir(path: Path, error: type[Exception] = RuntimeDirError) -> Path:
    """Create `path` 0700, or check that the existing one is a folder of ours and make it
    private; `error` (a RuntimeDirError by default) otherwise: another user's folder, or a
    link planted in its place, is never used."""
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700, parents=True)
    info = os.lstat(path)
    hint = RUNTIME_HINT.format(uid=os.getuid(), path=path)
    if not stat.S_ISDIR(info.st_mode):
        raise error(f"{path} exists and is not a folder (a link or file planted there?); {hint}")
    if info.st_uid != os.getuid():
        raise error(
            f"{path} belongs to uid {info.st_uid}, not to you (uid {os.getuid()}): another "
            f"user made it first; {hint}"
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(path, 0o700)
        if stat.S_IMODE(os.lstat(path).st_mode) & 0o077:
            raise error(f"{path} cannot be made private (mode 0700); {hint}")
    return path


def own_folder(path: Path) -> bool:
    """Whether `path` is a folder (not a link) of this uid that no one else may write: what
    may be read as this user's runtime state (info files) without creating anything."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == os.getuid()
        and not stat.S_IMODE(info.st_mode) & 0o022
    )


def pid_alive(pid: int) -> bool:
    """Whether process `pid` exists and has not exited (a zombie waiting for its parent to
    reap it has exited; a process of another user that we may not signal exists)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    fields = stat_fields(pid)
    return not fields or fields[0] not in EXITED


#: /proc states of a process that has exited (a zombie, or dead)
EXITED = (b"Z", b"X")


def stat_fields(pid: int | str) -> list[bytes] | None:
    """/proc/PID/stat's fields after the command name (state, ppid, pgrp, session, ... :
    field N of proc(5) is index N - 3), or None when the process is gone or /proc does not
    tell."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            fields = stat_file.read().rpartition(b")")[2].split()
    except OSError:
        return None
    return fields or None


def start_ticks(pid: int, *, running: bool = False) -> int | None:
    """When process `pid` started (clock ticks since boot, proc(5) field 22), or None when it
    is gone (with `running`, also when it has exited and is a zombie) or /proc does not tell:
    a pid reused by another process changes it."""
    fields = stat_fields(pid)
    if not fields or (running and fields[0] in EXITED):
        return None
    try:
        return int(fields[19])
    except (ValueError, IndexError):
        return None


def process_parent(pid: int) -> tuple[int, int] | None:
    """(parent pid, start ticks) of a live process, None when it is gone, a zombie, or /proc
    does not tell."""
    fields = stat_fields(pid)
    if not fields or fields[0] in EXITED:
        return None
    try:
        return int(fields[1]), int(fields[19])
    except (ValueError, IndexError):
        return None


def descends_from(pid: int, ancestor: int) -> bool | None:
    """Whether `ancestor` is among `pid`'s parents: True, False, or None when that cannot be
    told (a process of the chain is gone or its pid was reused while walking). No depth limit."""
    here = process_parent(pid)
    if here is None:
        return None
    seen = {pid}
    while True:
        parent, started = here
        if parent == ancestor:
            return True
        if parent <= 0 or parent in seen:
            return False  # the root of the tree (pid 1 has parent 0), or a pid loop
        seen.add(parent)
        up = process_parent(parent)
        if up is None or up[1] > started:
            return None  # gone, or a newer process took the parent's pid
        here = up


def socket_answers(path: os.PathLike[str] | str, timeout: float = 1.0) -> bool:
    """Whether something accepts connections on the Unix socket at `path`."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(timeout)
    try:
        probe.connect(os.fspath(path))
    except OSError:
        return False
    finally:
        probe.close()
    return True
