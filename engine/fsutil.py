"""Small filesystem helpers shared by the engine's parts."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path


def default_file_mode(path: Path) -> int:
    """The mode of the existing file, or what a new file would get under the current umask."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def atomic_write(
    path: Path,
    text: str,
    *,
    mode: int | None = None,
    still_current: Callable[[], bool] | None = None,
) -> bool:
    """Write `text` to `path` through a temporary file in the same directory, fsync, rename.

    Readers see the old or the new content, never a half-written file. `mode` defaults to the
    existing file's mode. If `still_current` is given and returns False just before the rename
    (the file changed under us), nothing is replaced and the result is False.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.semo-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fchmod(f.fileno(), default_file_mode(path) if mode is None else mode)
            os.fsync(f.fileno())
        if still_current is not None and not still_current():
            os.unlink(tmp)
            return False
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return True
