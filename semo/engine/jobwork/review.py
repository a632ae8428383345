"""A job's work for review: its branch, base, commits, diffstat, roles' worktrees, and its diff.

    review = await job_review(store, job_id)          # JobReview (the console, the CLI, the API)
    diff = await job_diff(store, job_id, role="BE")   # JobDiff: one FileDiff (patch) per file

The repository is the office's (``offices.repository``) unless one is given. What is compared:
the job's base commit with the head of the job branch (the roles' work combined when the job
ended), or with the head of one role's branch (``role``). Every git command goes through
semo/engine/gitrun.py (the repository's config untrusted); diffs are made with ``--no-ext-diff
--no-textconv --no-color``, so what is shown is the files' own text.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, Field

from semo.engine.gitrun import GitError, git_ok, run_git
from semo.engine.jobwork.gitwork import current_branch, is_dirty, resolve_commit
from semo.engine.jobwork.model import Conflict, JobWork, RoleWork
from semo.engine.jobwork.settings import GitSection
from semo.engine.store.base import Store
from semo.engine.store.models import Job

__all__ = [
    "CommitInfo",
    "FileDiff",
    "FileStat",
    "JobDiff",
    "JobReview",
    "RoleReview",
    "job_diff",
    "job_review",
]

#: What a diff shows: the files' own text, never a program's.
DIFF_OPTIONS = ("--no-ext-diff", "--no-textconv", "--no-color", "--no-renames")


class CommitInfo(BaseModel):
    """One commit of the job branch (or a role's branch) since the base."""

    sha: str
    short: str
    subject: str
    author: str
    #: the role whose identity wrote it ([git] author_name), when one of the job's roles did
    role: str | None = None
    at: datetime


class FileStat(BaseModel):
    """Lines added and removed in one file (None for a binary file)."""

    path: str
    added: int | None
    removed: int | None


class RoleReview(BaseModel):
    """A role that worked on the job: its branch, its worktree (where it is now, and whether
    it holds uncommitted changes; None when the worktree is gone or on another branch), its
    head and how many commits it is ahead of the job's base."""

    branch: str
    worktree: str | None
    head: str | None
    commits: int
    dirty: bool | None


class JobReview(BaseModel):
    """Everything to review a job's work (``semo job show``, ``GET .../jobs/{id}/work``)."""

    job: Job
    branch: str | None
    base_branch: str | None
    base_commit: str | None
    head: str | None
    commits: list[CommitInfo] = Field(default_factory=list)
    files: list[FileStat] = Field(default_factory=list)
    insertions: int = 0
    deletions: int = 0
    roles: dict[str, RoleReview] = Field(default_factory=dict)
    conflict: Conflict | None = None
    #: why the git side is missing (no repository, no branch yet), when it is
    note: str | None = None


class FileDiff(BaseModel):
    """One file's change: its status (A added, M modified, D deleted, T type changed), the
    lines added and removed (None: binary), and its unified diff as git prints it."""

    path: str
    status: str
    added: int | None
    removed: int | None
    patch: str


class JobDiff(BaseModel):
    """The diff of a job's work (or one role's), file by file."""

    job_id: str
    role: str | None
    base: str
    head: str
    files: list[FileDiff] = Field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(f.patch for f in self.files)


async def _repository(store: Store, job: Job, repository: Path | None) -> Path | None:
    if repository is not None:
        return Path(repository)
    office = await store.get_office(job.office_id)
    return Path(office.repository) if office.repository else None


async def job_review(
    store: Store,
    job_id: str,
    *,
    repository: Path | None = None,
    settings: GitSection | None = None,
) -> JobReview:
    """The review of job `job_id` (NotFound for an unknown job). A job without a branch yet,
    or whose repository cannot be read, gets a review without the git side and a `note`."""
    job = await store.get_job(job_id)
    work = JobWork.of(job)
    review = JobReview(
        job=job,
        branch=job.branch,
        base_branch=job.base_branch,
        base_commit=job.base_commit,
        head=None,
        conflict=work.conflict,
    )
    repo = await _repository(store, job, repository)
    if repo is None or not job.branch or not job.base_commit:
        review.note = "the job has no branch yet" if repo else "the office has no repository"
        return review
    try:
        review.head = await resolve_commit(repo, f"refs/heads/{job.branch}")
        if review.head is None:
            review.note = f"the branch {job.branch} is not in {repo} (deleted?)"
        else:
            names = _identities(work, settings or GitSection())
            review.commits = await _commits(repo, job.base_commit, review.head, names)
            review.files = await _numstat(repo, job.base_commit, review.head)
            review.insertions = sum(f.added or 0 for f in review.files)
            review.deletions = sum(f.removed or 0 for f in review.files)
        for role, role_work in work.roles.items():
            review.roles[role] = await _role(repo, job.base_commit, role_work.branch, role_work)
    except (GitError, OSError) as error:
        review.note = f"cannot read {repo}: {error}"
    return review


async def job_diff(
    store: Store,
    job_id: str,
    *,
    role: str | None = None,
    repository: Path | None = None,
) -> JobDiff:
    """The diff of job `job_id`'s work since its base: the job branch, or `role`'s branch.
    ValueError (with what to do) when there is nothing to diff."""
    job = await store.get_job(job_id)
    repo = await _repository(store, job, repository)
    if repo is None:
        raise ValueError(f"job {job_id}: the office has no repository")
    if not job.branch or not job.base_commit:
        raise ValueError(f"job {job_id} has no branch yet (no engine has started it)")
    if role is None:
        ref = f"refs/heads/{job.branch}"
    else:
        roles = JobWork.of(job).roles
        if role not in roles:
            known = ", ".join(roles) or "none"
            raise ValueError(f"role {role!r} did not work on job {job_id} (roles: {known})")
        ref = f"refs/heads/{roles[role].branch}"
    head = await resolve_commit(repo, ref)
    if head is None:
        raise ValueError(f"{ref.removeprefix('refs/heads/')} is not in {repo} (deleted?)")
    base = job.base_commit
    stats = await _numstat(repo, base, head)
    status = await git_ok(
        repo, "diff", *DIFF_OPTIONS, "--name-status", "-z", base, head, "--", what="the diff"
    )
    fields = [f for f in status.split("\0") if f]
    kinds = dict(zip(fields[1::2], fields[0::2], strict=False))
    text = await git_ok(repo, "diff", *DIFF_OPTIONS, base, head, "--", what="the diff")
    patches = _split(text)
    files = [
        FileDiff(
            path=stat.path,
            status=kinds.get(stat.path, "M")[:1],
            added=stat.added,
            removed=stat.removed,
            patch=patch,
        )
        for stat, patch in zip(stats, patches, strict=False)
    ]
    return JobDiff(job_id=job.id, role=role, base=base, head=head, files=files)


def _split(text: str) -> list[str]:
    """A unified diff cut into its files (each starts with ``diff --git``)."""
    parts: list[str] = []
    for line in text.splitlines(keepends=True):
        if line.startswith("diff --git ") or not parts:
            parts.append(line)
        else:
            parts[-1] += line
    return parts


def _identities(work: JobWork, settings: GitSection) -> dict[str, str]:
    """Author name -> role, for the roles of the job."""
    return {settings.identity(role)["GIT_AUTHOR_NAME"]: role for role in work.roles}


async def _commits(repo: Path, base: str, head: str, names: dict[str, str]) -> list[CommitInfo]:
    out = await git_ok(
        repo,
        "log",
        "--reverse",
        "-z",
        "--format=%H%x1f%h%x1f%an%x1f%aI%x1f%s",
        f"{base}..{head}",
        "--",
        what="the commits",
    )
    commits = []
    for record in out.split("\0"):
        parts = record.strip("\n").split("\x1f")
        if len(parts) != 5:
            continue
        sha, short, author, at, subject = parts
        commits.append(
            CommitInfo(
                sha=sha,
                short=short,
                subject=subject,
                author=author,
                role=names.get(author),
                at=datetime.fromisoformat(at),
            )
        )
    return commits


async def _numstat(repo: Path, base: str, head: str) -> list[FileStat]:
    out = await git_ok(
        repo, "diff", *DIFF_OPTIONS, "--numstat", "-z", base, head, "--", what="the diffstat"
    )
    stats = []
    for record in out.split("\0"):
        added, _, rest = record.partition("\t")
        removed, _, path = rest.partition("\t")
        if not path:
            continue
        binary = added == "-"
        stats.append(
            FileStat(
                path=path,
                added=None if binary else int(added),
                removed=None if binary else int(removed),
            )
        )
    return stats


def _folder(path: str | None) -> Path | None:
    return Path(path) if path and Path(path).is_dir() else None


async def _role(repo: Path, base: str, branch: str, role_work: RoleWork) -> RoleReview:
    head = await resolve_commit(repo, f"refs/heads/{branch}")
    ahead = 0
    if head is not None:
        count = await run_git(repo, "rev-list", "--count", f"{base}..{head}")
        ahead = int(count.stdout.strip() or 0) if count.returncode == 0 else 0
    folder = _folder(role_work.worktree)
    dirty: bool | None = None
    if folder is not None and await current_branch(folder) == branch:
        dirty = await is_dirty(folder)
    return RoleReview(
        branch=branch, worktree=role_work.worktree, head=head, commits=ahead, dirty=dirty
    )
