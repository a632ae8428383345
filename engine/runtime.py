"""This user's runtime folder (sockets, locks, an engine's pid) and whether a process lives.

Standard library only: the hook server (engine/protocol/hooks.py), the control socket's paths
(engine/control/paths.py) and the engine's liveness checks share it, and the `semo hook` path
must stay light.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path


class RuntimeDirError(Exception):
    """A runtime folder that is not a folder, not ours, or cannot be made private."""


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
    if not stat.S_ISDIR(info.st_mode):
        raise error(f"{path} exists and is not a folder")
    if info.st_uid != os.getuid():
        raise error(f"{path} belongs to uid {info.st_uid}, not to us")
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(path, 0o700)
    return path


def pid_alive(pid: int) -> bool:
    """Whether process `pid` exists and has not exited (a zombie waiting for its parent to
    reap it has exited; a process of another user that we may not signal exists)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as status:
            state = status.read().rpartition(b")")[2].split()[0]
    except (OSError, IndexError):
        return True
    return state not in (b"Z", b"X")
