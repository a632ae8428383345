"""One git worktree per task, on a branch of its own (seed 004).

How it works: docs/SESSIONS.md, "Worktrees".
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import re
import stat
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from semo.engine.gitrun import GitError, GitResult, run_git

__all__ = [
    "ROLE_PATTERN",
    "TASK_ID_PATTERN",
    "Worktree",
    "WorktreeError",
    "WorktreeManager",
    "branch_name",
    "directory_disk_usage",
    "validate_role",
    "validate_task_id",
]

log = logging.getLogger("semo.worktrees")

ROLE_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}")
TASK_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")

#: Folder under the workspace root that holds every agent's worktrees (seed 004).
AGENT_DIR = "agent"
#: Prefix of the branch each task gets.
BRANCH_PREFIX = "semo"
#: Seconds one git command may take (a worktree checkout of a large repository is slow).
DEFAULT_GIT_TIMEOUT = 300.0


class WorktreeError(Exception):
    """A worktree cannot be created, found or removed; the message says why."""


@dataclass(frozen=True)
class Worktree:
    """A task's worktree. ``path`` is resolved; ``branch`` is the checked-out branch (short
    name) or None when detached; ``head`` the commit, when git reported one."""

    role: str
    task_id: str
    path: Path
    branch: str | None
    head: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.role, self.task_id)


#: common git dir -> the lock adds to that repository take in this process.
_ADD_LOCKS: dict[str, asyncio.Lock] = {}


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def validate_role(role: object) -> str:
    """Return ``role`` if it is a valid role name, else raise :class:`WorktreeError`."""
    if not isinstance(role, str) or not ROLE_PATTERN.fullmatch(role):
        raise WorktreeError(
            f"invalid role {_shown(role)}: a role is a letter then up to 31 letters, digits, "
            "'_' or '-' (no paths, spaces or other characters)"
        )
    return role


def validate_task_id(task_id: object) -> str:
    """Return ``task_id`` if it is a valid task id, else raise :class:`WorktreeError`."""
    if not isinstance(task_id, str) or not TASK_ID_PATTERN.fullmatch(task_id):
        raise WorktreeError(
            f"invalid task id {_shown(task_id)}: a task id is a letter or digit then up to 63 "
            "letters, digits, '.', '_' or '-' (no paths, spaces or other characters)"
        )
    if ".." in task_id or task_id.endswith((".", ".lock")):
        raise WorktreeError(
            f"invalid task id {_shown(task_id)}: it must not contain '..' or end in '.' or "
            "'.lock' (it becomes part of a git branch name)"
        )
    return task_id


def branch_name(role: str, task_id: str) -> str:
    """The branch a task's worktree gets: ``semo/{role}/{task_id}``."""
    return f"{BRANCH_PREFIX}/{validate_role(role)}/{validate_task_id(task_id)}"


def _validate_base(base: object) -> str:
    if (
        not isinstance(base, str)
        or not base
        or base.startswith("-")
        or any(c in base for c in "\0\n\r")
    ):
        raise WorktreeError(f"invalid base {_shown(base)}: give a commit, branch or tag name")
    return base


def _realpath(path: os.PathLike[str] | str) -> Path:
    return Path(os.path.realpath(path))


def _is_within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def directory_disk_usage(path: Path) -> int:
    """Bytes allocated on disk under ``path`` (like ``du -sb`` with allocated sizes: blocks x
    512 where the OS reports blocks, else the size). Symlinks are counted, never followed; a file
    with several hard links is counted once; entries that vanish or cannot be read are skipped.
    A missing ``path`` is 0."""
    seen: set[tuple[int, int]] = set()
    total = 0
    try:
        st = os.lstat(path)
    except OSError:
        return 0
    total += _allocated(st)
    if not stat.S_ISDIR(st.st_mode):
        return total
    stack = [os.fspath(path)]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
                ident = (st.st_dev, st.st_ino)
                if ident in seen:
                    continue
                seen.add(ident)
            total += _allocated(st)
            if stat.S_ISDIR(st.st_mode):
                stack.append(entry.path)
    return total


def _allocated(st: os.stat_result) -> int:
    blocks = getattr(st, "st_blocks", None)
    return blocks * 512 if blocks is not None else st.st_size


class WorktreeManager:
    """Creates, lists and removes task worktrees of ``repository`` under ``workspace_root``.

    Safe to share in one event loop: operations on the same role/task are serialised.
    """

    def __init__(
        self,
        repository: Path,
        workspace_root: Path,
        *,
        git: str = "git",
        git_timeout: float = DEFAULT_GIT_TIMEOUT,
    ) -> None:
        self.repository = Path(repository).expanduser()
        self.workspace_root = Path(workspace_root).expanduser()
        self.git = git
        self.git_timeout = git_timeout
        self._common_dir: Path | None = None
        self._checking: asyncio.Future[Path] | None = None
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    # -- git ---------------------------------------------------------------------------------

    async def _run_git(self, *args: str) -> GitResult:
        try:
            return await run_git(self.repository, *args, git=self.git, timeout=self.git_timeout)
        except GitError as exc:
            raise WorktreeError(str(exc)) from exc

    async def _git_ok(self, *args: str, what: str) -> GitResult:
        result = await self._run_git(*args)
        if result.returncode != 0:
            raise WorktreeError(f"{what}: git says: {result.message}")
        return result

    async def check_repository(self) -> Path:
        """The repository's common git directory; :class:`WorktreeError` if it is not a git
        repository (checked once, then remembered; callers that come while the check runs, as
        the warm roles' creates at engine start do, wait for it instead of running their own)."""
        if self._common_dir is not None:
            return self._common_dir
        if self._checking is None or self._checking.done():
            self._checking = asyncio.ensure_future(self._check_repository())
        return await asyncio.shield(self._checking)

    async def _check_repository(self) -> Path:
        if not self.repository.is_dir():
            raise WorktreeError(f"repository {self.repository} does not exist or is not a folder")
        result = await self._run_git("rev-parse", "--path-format=absolute", "--git-common-dir")
        if result.returncode != 0:
            raise WorktreeError(
                f"{self.repository} is not a git repository (git says: {result.message})"
            )
        self._common_dir = Path(result.stdout.strip())
        return self._common_dir

    # -- paths -------------------------------------------------------------------------------

    def _root(self) -> str:
        return os.path.realpath(self.workspace_root)

    def path_for(self, role: str, task_id: str) -> Path:
        """Where the worktree of ``role``/``task_id`` lives (validated; symlinks refused)."""
        validate_role(role)
        validate_task_id(task_id)
        root = self._root()
        current = root
        for part in (AGENT_DIR, role, task_id):
            current = os.path.join(current, part)
            try:
                st = os.lstat(current)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise WorktreeError(f"cannot inspect {current}: {exc}") from exc
            if stat.S_ISLNK(st.st_mode):
                raise WorktreeError(
                    f"{current} is a symlink; semo refuses to place a worktree through it "
                    f"(it must be a real folder under {root})"
                )
            if not stat.S_ISDIR(st.st_mode):
                raise WorktreeError(f"{current} exists and is not a folder")
        resolved = os.path.realpath(current)
        if not _is_within(resolved, root) or resolved == root:
            raise WorktreeError(f"{current} resolves to {resolved}, outside the workspace {root}")
        return Path(resolved)

    def _lock(self, key: tuple[str, str]) -> asyncio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    # -- listing -----------------------------------------------------------------------------

    async def _registered(self) -> list[dict[str, str]]:
        """Every worktree git knows for the repository, as porcelain records."""
        result = await self._git_ok(
            "worktree", "list", "--porcelain", "-z", what="cannot list worktrees"
        )
        records: list[dict[str, str]] = []
        record: dict[str, str] = {}
        for field in result.stdout.split("\0"):
            if not field:
                if record:
                    records.append(record)
                    record = {}
                continue
            name, _, value = field.partition(" ")
            record[name] = value
        if record:
            records.append(record)
        return records

    def _as_worktree(self, record: dict[str, str], root: str) -> Worktree | None:
        path = record.get("worktree")
        if not path:
            return None
        resolved = os.path.realpath(path) if os.path.exists(path) else os.path.normpath(path)
        if not _is_within(resolved, root):
            return None
        parts = Path(os.path.relpath(resolved, root)).parts
        if len(parts) != 3 or parts[0] != AGENT_DIR:
            return None
        role, task_id = parts[1], parts[2]
        if not ROLE_PATTERN.fullmatch(role) or not TASK_ID_PATTERN.fullmatch(task_id):
            return None
        branch = record.get("branch")
        if branch is not None and branch.startswith("refs/heads/"):
            branch = branch[len("refs/heads/") :]
        return Worktree(role, task_id, Path(resolved), branch, record.get("HEAD"))

    async def list(self) -> list[Worktree]:
        """The task worktrees of this repository under the workspace (also those whose folder
        has gone, until :meth:`prune`), sorted by role then task id."""
        await self.check_repository()
        root = self._root()
        found = [self._as_worktree(r, root) for r in await self._registered()]
        return sorted((w for w in found if w is not None), key=lambda w: w.key)

    async def get(self, role: str, task_id: str) -> Worktree | None:
        """The registered worktree of ``role``/``task_id``, if any."""
        path = self.path_for(role, task_id)
        for worktree in await self.list():
            if worktree.path == path:
                return worktree
        return None

    async def prune(self) -> None:
        """Forget worktrees whose folders were deleted (``git worktree prune``)."""
        await self.check_repository()
        await self._git_ok("worktree", "prune", what="cannot prune worktrees")

    # -- create / remove ---------------------------------------------------------------------

    async def create(self, role: str, task_id: str, *, base: str = "HEAD") -> Worktree:
        """Create (or return the existing) worktree of ``role``/``task_id``.

        New: ``git worktree add -b semo/{role}/{task_id} <path> <base>``. If that branch already
        exists (a task resumed after its worktree was removed), it is checked out as it is and
        ``base`` is not used; when another worktree of semo's has it checked out (a retry while the
        role's warm worktree holds the job's branch), the new worktree starts detached at its
        commit (semo/engine/jobwork takes the branch over). If the worktree exists, it is returned
        unchanged (whatever branch it is on now).
        """
        validate_role(role)
        validate_task_id(task_id)
        _validate_base(base)
        await self.check_repository()
        async with self._lock((role, task_id)):
            path = self.path_for(role, task_id)
            branch = branch_name(role, task_id)
            existing, exists = await asyncio.gather(  # two git reads at once, not one by one
                self._find(path),
                self._run_git(
                    "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}"
                ),
            )
            if existing is not None:
                if existing.path.is_dir():
                    return existing
                log.info("worktree %s was deleted outside semo; pruning and recreating", path)
                await self.prune()
            if path.exists() and any(path.iterdir()):
                raise WorktreeError(
                    f"{path} exists and is not a worktree of {self.repository}; "
                    "move it away or remove it"
                )
            path.parent.mkdir(parents=True, exist_ok=True)
            path = self.path_for(role, task_id)  # again, now that the parents exist
            what = f"cannot create the worktree {path}"
            if exists.returncode == 0:
                holder = await self._holder(branch)
                if holder is None:
                    log.info("branch %s exists; checking it out in %s (base ignored)", branch, path)
                    await self._add_worktree(path, ["--", str(path), branch], what)
                else:  # a branch is checked out once: this one starts at its commit, detached
                    log.info(
                        "branch %s is checked out in %s; %s starts detached", branch, holder, path
                    )
                    await self._add_worktree(path, ["--detach", "--", str(path), branch], what)
            else:
                await self._add_worktree(path, ["-b", branch, "--", str(path), base], what)
            created = await self._find(path)
            if created is None:  # pragma: no cover - git said it worked
                raise WorktreeError(f"git created {path} but does not list it as a worktree")
            log.info("created worktree %s on %s", created.path, created.branch)
            return created

    async def _add_worktree(self, path: Path, args: Sequence[str], what: str) -> None:
        try:
            async with self._adding():
                await self._git_ok("worktree", "add", "--quiet", *args, what=what)
        except BaseException:
            for folder in (path, path.parent):  # what this call created, if git left it empty
                with contextlib.suppress(OSError):
                    folder.rmdir()
            raise

    @contextlib.asynccontextmanager
    async def _adding(self) -> AsyncIterator[None]:
        """One `git worktree add` at a time per repository, across processes too: git names a
        new worktree's admin folder after the path's last part, taking `name1`, `name2`... when
        it exists, and two adds at once race for the same name ("failed to read
        .git/worktrees/warm1/commondir"); an add also reads every other worktree's admin folder,
        so even differently named adds fail on one another's half-made folder. In this process
        waiters queue on an asyncio lock (each starts the moment the previous add ends); across
        processes an flock on a file in the common git directory, polled (cancelling stays
        clean)."""
        common = await self.check_repository()
        async with _ADD_LOCKS.setdefault(str(common), asyncio.Lock()):
            fd = os.open(
                common / "semo-worktree-add.lock", os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600
            )
            try:
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        await asyncio.sleep(0.02)
                yield
            finally:
                os.close(fd)  # releases the lock

    async def _holder(self, branch: str) -> Path | None:
        """The worktree of semo's that has `branch` checked out, if one does (a checkout of
        the operator's is left to git, which refuses a second checkout)."""
        root = self._root()
        for record in await self._registered():
            if record.get("branch") == f"refs/heads/{branch}":
                worktree = self._as_worktree(record, root)
                return worktree.path if worktree is not None else None
        return None

    async def _find(self, path: Path) -> Worktree | None:
        root = self._root()
        for record in await self._registered():
            worktree = self._as_worktree(record, root)
            if worktree is not None and worktree.path == path:
                return worktree
        return None

    async def remove(
        self, worktree: Worktree, *, delete_branch: bool = False, force: bool = False
    ) -> bool:
        """Remove the worktree (``git worktree remove``: git refuses, a :class:`WorktreeError`,
        when the worktree has modified or untracked files, and nothing is removed; with
        ``force=True``, ``--force``: uncommitted changes in it are lost) and then its branch:
        deleted when merged (``git branch -d``), or in any case with ``delete_branch=True``
        (``git branch -D``). Only semo's own branch
        (``semo/{role}/{task_id}``) is ever deleted. A folder already gone is pruned instead, and
        removing twice is not an error; a non-empty folder at that place that git does not know
        as a worktree is left alone (an error). Returns whether the branch was deleted."""
        role, task_id = validate_role(worktree.role), validate_task_id(worktree.task_id)
        await self.check_repository()
        async with self._lock((role, task_id)):
            path = self.path_for(role, task_id)
            given = _realpath(worktree.path)
            if given != path:
                raise WorktreeError(
                    f"{worktree.path} is not where the worktree of {role}/{task_id} lives "
                    f"({path}); semo removes only the worktrees it placed"
                )
            registered = await self._find(path)
            if registered is not None and path.is_dir():
                await self._git_ok(
                    "worktree", "remove", *(["--force"] if force else []), "--", str(path),
                    what=f"cannot remove the worktree {path}",
                )  # fmt: skip
            elif registered is not None:
                await self.prune()
            elif path.is_dir() and any(path.iterdir()):
                raise WorktreeError(
                    f"{path} is not a worktree of {self.repository}; semo leaves it alone"
                )
            elif path.is_dir():
                path.rmdir()
            with contextlib.suppress(OSError):
                path.parent.rmdir()  # the role's folder, once empty
            deleted = await self._delete_branch(branch_name(role, task_id), force=delete_branch)
            log.info("removed worktree %s (branch deleted: %s)", path, deleted)
            return deleted

    async def _delete_branch(self, branch: str, *, force: bool) -> bool:
        exists = await self._run_git("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}")
        if exists.returncode != 0:
            return False
        result = await self._run_git("branch", "-D" if force else "-d", "--", branch)
        if result.returncode == 0:
            return True
        if force:
            raise WorktreeError(f"cannot delete branch {branch}: git says: {result.message}")
        log.info("kept branch %s: %s", branch, result.message)
        return False

    # -- disk use ----------------------------------------------------------------------------

    async def disk_usage(self, worktree: Worktree) -> int:
        """Bytes the worktree's folder takes on disk (see :func:`directory_disk_usage`; git's
        per-worktree data inside the repository's ``.git`` is not included)."""
        path = self.path_for(worktree.role, worktree.task_id)
        return await asyncio.to_thread(directory_disk_usage, path)
