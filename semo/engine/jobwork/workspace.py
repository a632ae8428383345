"""The engine's side of a job's branch: start it, put worktrees on it, combine the work.

How it works: docs/JOBS.md, "A job's workspace".
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from semo.engine.gitrun import GitError, git_ok, run_git
from semo.engine.jobwork.gitwork import (
    checked_out_in,
    commit_all,
    current_branch,
    is_dirty,
    resolve_commit,
    save_leftovers,
    switch_branch,
)
from semo.engine.jobwork.model import (
    SAVED_PREFIX,
    Conflict,
    JobWork,
    RoleWork,
    job_branch,
    role_branch,
)
from semo.engine.jobwork.settings import GitSection
from semo.engine.sessions.worktrees import WorktreeManager
from semo.engine.ship.gitops import MergeConflict, merge_branch
from semo.engine.store.base import Store
from semo.engine.store.models import Job

__all__ = ["Entered", "JobEnd", "JobWorkspace", "base_of"]

log = logging.getLogger("semo.jobwork")


@dataclass(frozen=True)
class Entered:
    """What `enter` did: the role's branch, and the ref its worktree's leftovers went to."""

    role: str
    branch: str
    worktree: Path
    saved: str | None = None
    switched: bool = False


@dataclass
class JobEnd:
    """What `finish` recorded: commits made of leftovers (role -> commit), the job branch's
    commits since the base (``sha subject``), its diffstat, and a conflict."""

    committed: dict[str, str] = field(default_factory=dict)
    commits: list[str] = field(default_factory=list)
    diffstat: str = ""
    conflict: Conflict | None = None
    work: JobWork = field(default_factory=JobWork)


async def base_of(repository: Path, configured: str = "") -> tuple[str, str]:
    """The office's base branch (`configured`, else the repository's checked-out branch) and
    its commit now; :class:`GitError` when there is none."""
    branch = configured or await current_branch(repository)
    if not branch:
        raise GitError(
            f"{repository} has no branch checked out; set [git] base_branch in semo.toml"
        )
    commit = await resolve_commit(repository, f"refs/heads/{branch}")
    if commit is None:
        raise GitError(f"the base branch {branch!r} does not exist in {repository}")
    return branch, commit


def _same(a: Path, b: Path) -> bool:
    return a.resolve() == b.resolve()


def _real(folder: Path | str) -> Path:
    return Path(folder).resolve()


class JobWorkspace:
    """Jobs' branches in the office's repository (one per engine)."""

    def __init__(
        self,
        store: Store,
        repository: Path,
        *,
        settings: GitSection | None = None,
        worktrees: WorktreeManager | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.repository = Path(repository)
        #: the pool's worktrees: only a session running in one of them has its work recorded
        self.worktrees = worktrees
        self.settings = settings or GitSection()
        self.clock = clock
        self._locks: dict[str, asyncio.Lock] = {}

    def _lock(self, job_id: str) -> asyncio.Lock:
        return self._locks.setdefault(job_id, asyncio.Lock())

    # -- start ---------------------------------------------------------------------------------

    async def start(self, job: Job) -> Job:
        """Give `job` its branch at the office's base branch as it is now (a job that has one,
        retried, keeps it and its base)."""
        async with self._lock(job.id):
            job = await self.store.get_job(job.id)
            if job.branch and job.base_commit:
                if await resolve_commit(self.repository, f"refs/heads/{job.branch}") is None:
                    await self._create_ref(job.branch, job.base_commit)
                return job
            base, commit = await base_of(self.repository, self.settings.base_branch)
            branch = job_branch(job.id)
            if await resolve_commit(self.repository, f"refs/heads/{branch}") is None:
                await self._create_ref(branch, commit)
            return await self.store.update_job(
                job.id, branch=branch, base_branch=base, base_commit=commit
            )

    async def _create_ref(self, branch: str, commit: str) -> None:
        await git_ok(
            self.repository,
            "update-ref",
            f"refs/heads/{branch}",
            commit,
            "",
            what=f"creating the branch {branch}",
        )

    # -- a role's worktree ---------------------------------------------------------------------

    async def worktree_of(self, folder: Path | str | None) -> Path | None:
        """`folder` when it is one of the worktrees semo made (a session's working folder),
        else None: a folder an operator gave an agent is never switched or cleaned."""
        if folder is None or self.worktrees is None:
            return None
        wanted = _real(folder)
        for worktree in await self.worktrees.list():
            if worktree.path == wanted:
                return worktree.path
        return None

    async def enter(self, job_id: str, role: str, worktree: Path) -> Entered:
        """Put `worktree` on `role`'s branch for the job (see the module's docstring) and
        record it in the job's work."""
        async with self._lock(job_id):
            job = await self.store.get_job(job_id)
            if not job.base_commit:
                raise GitError(f"job {job_id} has no base commit (it was not started here)")
            branch = role_branch(role, job.id)
            identity = self.settings.identity(role)
            saved: str | None = None
            switched = False
            if await current_branch(worktree) != branch:
                if await is_dirty(worktree):
                    saved = await self._save(worktree, role, job, identity)
                holder = await checked_out_in(self.repository, branch)
                if holder is not None and not _same(holder, worktree):
                    await self._free(holder, branch, role, job, identity)
                await switch_branch(worktree, branch, start=job.base_commit)
                switched = True
            work = JobWork.of(job)
            entry = RoleWork(branch=branch, worktree=str(worktree))
            if work.roles.get(role) != entry:
                work.roles[role] = entry
                await self.store.update_job(job.id, work=work.dump())
            return Entered(role, branch, worktree, saved, switched)

    async def _save(self, worktree: Path, role: str, job: Job, identity: dict[str, str]) -> str:
        was = await current_branch(worktree) or "a detached HEAD"
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(self.clock()))
        ref = f"{SAVED_PREFIX}/{role}/{stamp}"
        n = 1
        while await resolve_commit(worktree, f"refs/heads/{ref}") is not None:
            n += 1
            ref = f"{SAVED_PREFIX}/{role}/{stamp}-{n}"
        message = (
            f"semo: what {was} left uncommitted in {worktree.name}\n\n"
            f"Saved before job {job.id} started there, so that it starts clean."
        )
        await save_leftovers(worktree, ref, message, identity)
        log.info("saved the leftovers of %s (%s) as %s", worktree, was, ref)
        return ref

    async def _free(
        self, holder: Path, branch: str, role: str, job: Job, identity: dict[str, str]
    ) -> None:
        """`branch` is checked out in `holder` (an earlier attempt's worktree): its leftovers
        are committed there, then it lets go of the branch."""
        await commit_all(holder, self._message(job, role, "an earlier attempt"), identity)
        await git_ok(holder, "checkout", "-q", "--detach", what=f"detaching {holder}")

    def _message(self, job: Job, role: str, what: str = "") -> str:
        first = (job.task.strip().splitlines() or [""])[0][:60] or "job"
        body = f"What {role} left uncommitted" + (f" ({what})" if what else "")
        return f"{first} ({role}, job {job.id[:8]})\n\n{body} on job {job.id}, committed by semo."

    # -- the end ---------------------------------------------------------------------------------

    async def finish(self, job_id: str) -> JobEnd:
        """Commit what each role left, combine the roles' branches on the job branch."""
        async with self._lock(job_id):
            job = await self.store.get_job(job_id)
            work = JobWork.of(job)
            end = JobEnd(work=work)
            if not job.branch or not job.base_commit:
                return end
            for role, role_work in work.roles.items():
                path = Path(role_work.worktree) if role_work.worktree else None
                if path is None or not path.is_dir():
                    continue
                if await current_branch(path) != role_work.branch:
                    continue
                sha = await commit_all(path, self._message(job, role), self.settings.identity(role))
                if sha is not None:
                    end.committed[role] = sha
            conflict = Conflict()
            for role, role_work in work.roles.items():
                if await resolve_commit(self.repository, f"refs/heads/{role_work.branch}") is None:
                    continue
                try:
                    await merge_branch(
                        self.repository,
                        role_work.branch,
                        job.branch,
                        message=f"Combine {role}'s work on job {job.id}",
                    )
                except MergeConflict as error:
                    conflict.roles.append(role)
                    conflict.files.extend(f for f in error.files if f not in conflict.files)
            if conflict.roles:
                conflict.detail = (
                    f"the work of {', '.join(conflict.roles)} conflicts with the job branch "
                    f"in {', '.join(conflict.files) or 'some files'}"
                )
                end.conflict = conflict
            work.conflict = end.conflict
            work.resolve = None
            end.commits = await self.commits(job)
            end.diffstat = await self.shortstat(job)
            await self.store.update_job(job.id, work=work.dump())
            return end

    async def commits(self, job: Job) -> list[str]:
        """``<short sha> <subject>`` of the job branch's commits since its base, oldest first."""
        if not job.branch or not job.base_commit:
            return []
        out = await git_ok(
            self.repository,
            "log",
            "--reverse",
            "--format=%h %s",
            f"{job.base_commit}..refs/heads/{job.branch}",
            "--",
            what="the job's commits",
        )
        return [line for line in out.splitlines() if line]

    async def shortstat(self, job: Job) -> str:
        if not job.branch or not job.base_commit:
            return ""
        out = await git_ok(
            self.repository,
            "diff",
            "--shortstat",
            "--no-ext-diff",
            "--no-textconv",
            job.base_commit,
            f"refs/heads/{job.branch}",
            "--",
            what="the job's diffstat",
        )
        return out.strip()

    # -- conflicts -------------------------------------------------------------------------------

    async def prepare_resolve(self, job_id: str, role: str, worktree: Path) -> list[str]:
        """Merge the job branch into `role`'s branch in `worktree` (which `enter` put on it),
        leaving conflict markers for the agent; the files that conflict."""
        job = await self.store.get_job(job_id)
        if not job.branch:
            return []
        if await is_dirty(worktree):
            await commit_all(worktree, self._message(job, role), self.settings.identity(role))
        result = await run_git(
            worktree,
            "merge",
            "--no-ff",
            "--no-commit",
            "-m",
            f"Resolve the conflict of {role}'s work with job {job.id}",
            f"refs/heads/{job.branch}",
            env=self.settings.identity(role),
        )
        if result.returncode == 0:
            return []
        files = await git_ok(
            worktree, "diff", "--name-only", "--diff-filter=U", "-z", what="the conflicted files"
        )
        return [f for f in files.split("\0") if f]
