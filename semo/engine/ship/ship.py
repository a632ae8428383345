"""`semo job ship`: push a job's branch, open its pull request, merge it, each on its timeline.

    report = await ship_job(store, job_id, ShipRequest(pr=True), settings, target)

How it works: docs/JOBS.md, "Shipping a job".
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from semo.engine.gitrun import GitError
from semo.engine.office.job_ops import JobTimeline, agents_of, job_timeline
from semo.engine.ship.github import GitHubError, PullRequest, open_pull_request, repo_slug
from semo.engine.ship.gitops import diffstat, merge_branch, push_branch, remote_url
from semo.engine.ship.pr_text import pr_body, pr_title
from semo.engine.ship.settings import ShipSection
from semo.engine.store.base import Store
from semo.engine.store.models import JobEntry

__all__ = [
    "PR_STEPS",
    "ShipError",
    "ShipReport",
    "ShipRequest",
    "ShipTarget",
    "ship_job",
    "ship_stored_job",
    "target_of",
]

#: The timeline steps that name a job's pull request.
PR_STEPS = ("pr_opened", "pr_created")
#: What the environment gives a push beyond gitsafe's minimum (an ssh agent).
PUSH_ENV = ("SSH_AUTH_SOCK",)


class ShipError(Exception):
    """A step could not be done; the message says which and why (nothing was lost)."""


class ShipRequest(BaseModel):
    """Which steps to run (at least one; the schema says so, for the API's clients)."""

    model_config = {
        "extra": "forbid",
        "json_schema_extra": {
            "anyOf": [
                {"required": [step], "properties": {step: {"const": True}}}
                for step in ("push", "pr", "merge")
            ]
        },
    }

    push: bool = False
    pr: bool = False
    merge: bool = False

    def steps(self) -> list[str]:
        return [name for name in ("push", "pr", "merge") if getattr(self, name)]


@dataclass(frozen=True)
class ShipTarget:
    """Where a job's work is: the repository, the job's branch, the base branch it left."""

    repository: Path
    branch: str
    base: str


class ShipReport(BaseModel):
    """What shipping did."""

    job_id: str
    branch: str
    base: str
    pushed: str | None = None
    """the commit pushed"""
    remote: str | None = None
    pr: PullRequest | None = None
    pr_existed: bool = False
    merged: str | None = None
    """the base's new commit"""
    merge_kind: str | None = None


def existing_pr(entries: list[JobEntry]) -> PullRequest | None:
    """The pull request the timeline records, if any (semo's or the agent's own)."""
    for entry in entries:
        if entry.step in PR_STEPS and entry.ref_id and entry.ref_id.startswith("#"):
            number = entry.ref_id[1:]
            if number.isdigit():  # an agent's line without an address: no url
                url = entry.detail if entry.detail.startswith(("https://", "http://")) else ""
                return PullRequest(number=int(number), url=url)
    return None


async def ship_job(
    store: Store,
    job_id: str,
    request: ShipRequest,
    settings: ShipSection,
    target: ShipTarget,
    *,
    env: Mapping[str, str] | None = None,
) -> ShipReport:
    """Run the requested steps in order (push, pr, merge); see the module docstring."""
    env = os.environ if env is None else env
    timeline = await job_timeline(store, job_id)
    job = timeline.job
    if job.status == "needs_review":
        raise ShipError(
            f"job {job.id} needs review: its roles' work conflicts; resolve it first "
            "(docs/JOBS.md), then ship"
        )
    if job.status != "done":
        raise ShipError(f"job {job.id} is {job.status}: only a job that is done can be shipped")
    if not request.steps():
        raise ShipError("nothing to do: ask for --push, --pr or --merge")
    report = ShipReport(job_id=job.id, branch=target.branch, base=target.base)

    async def record(step: str, detail: str, ref_id: str | None = None) -> None:
        await store.add_job_entry(
            JobEntry(
                job_id=job.id,
                office_id=job.office_id,
                step=step,
                status=job.status,
                attempts=job.attempts,
                detail=detail,
                ref_id=ref_id,
            )
        )

    repo, remote = target.repository, settings.remote
    try:
        if request.push or request.pr:
            pushed_env = {k: env[k] for k in PUSH_ENV if env.get(k)}
            report.pushed = await push_branch(repo, remote, target.branch, env=pushed_env)
            report.remote = remote
            await record("pushed", f"{target.branch} to {remote} at {report.pushed[:12]}")
        if request.pr:
            known = existing_pr(timeline.entries)
            if known is not None:
                report.pr, report.pr_existed = known, True
            else:
                report.pr = await _open_pr(store, timeline, settings, target, env)
                await record("pr_opened", report.pr.url, f"#{report.pr.number}")
        if request.merge:
            merged = await merge_branch(
                repo,
                target.branch,
                target.base,
                message=f"Merge job {job.id[:8]} ({target.branch})",
            )
            report.merged, report.merge_kind = merged.commit, merged.kind
            await record(
                "merged",
                f"{target.branch} into {target.base}: {merged.kind} to {merged.commit[:12]}",
            )
    except (GitError, GitHubError) as error:
        await record("ship_failed", str(error))
        raise ShipError(str(error)) from None
    return report


async def _open_pr(
    store: Store,
    timeline: JobTimeline,
    settings: ShipSection,
    target: ShipTarget,
    env: Mapping[str, str],
) -> PullRequest:
    token = settings.token(env)
    secrets = [token] if token else []
    slug = settings.github_repo or repo_slug(await remote_url(target.repository, settings.remote))
    agents = await agents_of(store, timeline.job.office_id)
    stat = await diffstat(target.repository, target.base, target.branch)
    return await open_pull_request(
        slug=slug,
        head=target.branch,
        base=target.base,
        title=pr_title(timeline, secrets),
        body=pr_body(
            timeline, stat, roles={a.id: a.role for a in agents.values()}, secrets=secrets
        ),
        api_url=settings.github_api_url,
        token=token,
        tool=settings.pr_tool,
    )


async def target_of(store: Store, job_id: str) -> ShipTarget:
    """Where the job's work is: its office's repository, its branch and base (the job's row)."""
    job = await store.get_job(job_id)
    office = await store.get_office(job.office_id)
    branch, base = job.branch, job.base_branch
    if not branch or not base:
        raise ShipError(f"job {job.id} has no branch: it made no changes semo recorded")
    if not office.repository:
        raise ShipError(f"office {office.name} has no repository")
    return ShipTarget(Path(office.repository), branch, base)


async def ship_stored_job(
    store: Store,
    job_id: str,
    request: ShipRequest,
    settings: ShipSection,
    *,
    env: Mapping[str, str] | None = None,
) -> ShipReport:
    """:func:`ship_job` on the job's own branch and base, in its office's repository."""
    return await ship_job(store, job_id, request, settings, await target_of(store, job_id), env=env)
