"""Small filesystem helpers shared by the engine's parts."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import tempfile
from collections.abc import Callable, Iterator
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


# -- writing inside a folder an agent controls ---------------------------------------------------


class UnsafePathError(OSError):
    """A path leads out of the folder it must stay in (a symlink), or is not a regular file."""


#: Largest file :func:`read_text_in` reads (settings and persona files are a few KB).
MAX_READ_BYTES = 16 * 1024 * 1024


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def contained_path(root: Path, rel: Path | str, *, where: str = "the worktree") -> Path:
    """``root/rel`` with symlinks resolved, if that stays inside ``root`` (resolved too);
    :class:`UnsafePathError` otherwise. A symlink that stays inside is fine (a project's
    ``.claude/CLAUDE.md -> ../AGENTS.md``)."""
    real_root = os.path.realpath(root)
    if Path(rel).is_absolute():
        raise UnsafePathError(f"{rel}: not a path relative to {root}")
    given = os.path.join(real_root, rel)
    resolved = os.path.realpath(given)
    if not _within(resolved, real_root) or resolved == real_root:
        raise UnsafePathError(
            f"{os.path.join(root, rel)} leads to {resolved}, outside {where} {real_root} "
            "(a symlink); semo will not write there"
        )
    return Path(resolved)


@contextlib.contextmanager
def _open_folder(folder: Path, *, create_under: str | None) -> Iterator[int]:
    """A descriptor of the absolute ``folder``, opened one component at a time from ``/``
    without following any symlink (so a component swapped for a symlink after
    :func:`contained_path` resolved it is refused, not followed). Missing components below
    ``create_under`` are created."""
    # O_PATH: a folder on the way may be searchable (x) without being readable (r)
    flags = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open("/", flags)
    current = "/"
    try:
        for part in folder.parts[1:]:
            current = os.path.join(current, part)
            try:
                child = os.open(part, flags, dir_fd=fd)
            except FileNotFoundError:
                if create_under is None or not _within(current, create_under):
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
                child = os.open(part, flags, dir_fd=fd)
            except OSError as error:
                if error.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise UnsafePathError(
                        f"{current} is a symlink or not a folder (it changed while semo was "
                        "using it); semo will not write through it"
                    ) from None
                raise
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def _check_regular(st: os.stat_result, shown: Path) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePathError(f"{shown} is a symlink (it changed while semo was using it)")
    if not stat.S_ISREG(st.st_mode):
        raise UnsafePathError(f"{shown} exists and is not a regular file; semo leaves it alone")


def read_text_in(
    root: Path, rel: Path | str, *, max_bytes: int = MAX_READ_BYTES, where: str = "the worktree"
) -> str | None:
    """The text (UTF-8, line ends kept) of ``root/rel``, None when there is no such file.

    Never follows a symlink out of ``root``, never opens a FIFO or device (no blocking), and
    refuses a file over ``max_bytes``: :class:`UnsafePathError`. A file that is not UTF-8
    raises UnicodeDecodeError."""
    path = contained_path(root, rel, where=where)
    try:
        with _open_folder(path.parent, create_under=None) as folder:
            fd = os.open(
                path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder
            )
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise UnsafePathError(f"{path} became a symlink while semo was reading it") from None
        raise
    with os.fdopen(fd, "rb") as file:
        st = os.fstat(file.fileno())
        _check_regular(st, path)
        if st.st_size > max_bytes:
            raise UnsafePathError(f"{path} is {st.st_size} bytes, more than semo reads")
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UnsafePathError(f"{path} is more than {max_bytes} bytes, more than semo reads")
    return data.decode("utf-8")


def write_text_in(
    root: Path,
    rel: Path | str,
    text: str,
    *,
    mode: int | None = None,
    still_current: Callable[[], bool] | None = None,
    where: str = "the worktree",
) -> Path:
    """:func:`atomic_write` of ``root/rel`` that never writes outside ``root``: symlinks are
    resolved and must stay inside (:func:`contained_path`), then every folder on the way is
    opened without following symlinks, missing folders under ``root`` are created, and the file
    is replaced by a rename inside its opened folder. An existing target that is not a regular
    file is refused. Returns the path written (symlinks resolved);
    :class:`UnsafePathError` when it would leave ``root``. ``mode``: the existing file's, else
    0666 minus the umask. ``still_current``: as for :func:`atomic_write` (False: nothing
    written, :class:`FileExistsError`)."""
    path = contained_path(root, rel, where=where)
    with _open_folder(path.parent, create_under=os.path.realpath(root)) as folder:
        try:
            st: os.stat_result | None = os.stat(path.name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if st is not None:
            _check_regular(st, path)
        if mode is None:
            mode = stat.S_IMODE(st.st_mode) if st is not None else default_file_mode(path)
        tmp = f".{path.name}.semo-{secrets.token_hex(6)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(tmp, flags, 0o600, dir_fd=folder)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(text.encode("utf-8"))
                file.flush()
                os.fchmod(file.fileno(), mode)
                os.fsync(file.fileno())
            if still_current is not None and not still_current():
                raise FileExistsError(f"{path} changed while semo was writing it")
            os.replace(tmp, path.name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=folder)
            raise
    return path


def unlink_in(root: Path, rel: Path | str) -> bool:
    """Remove the file ``root/rel`` (never outside ``root``, never through a symlink); False
    when there was none."""
    path = contained_path(root, rel)
    try:
        with _open_folder(path.parent, create_under=None) as folder:
            st = os.stat(path.name, dir_fd=folder, follow_symlinks=False)
            _check_regular(st, path)
            os.unlink(path.name, dir_fd=folder)
    except FileNotFoundError:
        return False
    return True


# -- private files and folders -------------------------------------------------------------------


def private_dir(path: Path) -> Path:
    """``path`` as a folder only its owner can use: created 0700 (with missing parents), or an
    existing folder of ours with group/other bits made 0700. Another user's folder is left as
    it is (PermissionError from chmod is not raised: the caller's next step reports it)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.stat()
    if st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & 0o077:
        with contextlib.suppress(PermissionError):
            os.chmod(path, 0o700)
    return path


def private_file(path: Path) -> Path:
    """``path`` as a regular file only its owner can read and write: created empty 0600 (a
    missing folder is created 0700), or an existing file of ours made 0600. For databases, logs
    and configuration that hold or reveal secrets."""
    if not path.parent.exists():
        private_dir(path.parent)
    # An existing file is never opened here: closing any descriptor of a file drops the
    # process's POSIX locks on it, and SQLite holds such locks on its database.
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    except FileExistsError:
        st = os.stat(path)
        if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and st.st_mode & 0o077:
            os.chmod(path, 0o600)
    return path
