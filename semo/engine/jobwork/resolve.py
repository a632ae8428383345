"""A job that needs review goes on: handed to an agent, or combined again after a hand fix.

How it works: docs/JOBS.md, "Resolving a job that needs review".
"""

from __future__ import annotations

from pathlib import Path

from semo.engine.jobwork.model import JobWork, ResolveRequest
from semo.engine.jobwork.settings import GitSection
from semo.engine.jobwork.workspace import JobWorkspace
from semo.engine.store.base import Store
from semo.engine.store.models import AgentCommand, Job, JobEntry

__all__ = ["combine_again", "default_prompt", "hand_conflict"]

#: The longest prompt an operator can hand over (it is typed into a terminal).
MAX_PROMPT_CHARS = 20_000


def default_prompt(files: list[str]) -> str:
    shown = ", ".join(files[:20]) or "the conflicted files"
    return f"Resolve the merge conflict in {shown}."


def _needs_review(job: Job) -> JobWork:
    if job.status != "needs_review":
        raise ValueError(
            f"job {job.id} is {job.status}; only a job that needs review (its roles' work "
            "conflicts) can be resolved"
        )
    return JobWork.of(job)


async def hand_conflict(
    store: Store, job_id: str, *, role: str | None = None, prompt: str | None = None
) -> tuple[Job, AgentCommand]:
    """Hand job `job_id`'s conflict to `role` (default: the first role whose work conflicts)
    with `prompt` (default: which files); the job, pending again, and its run_job command.
    ValueError when the job does not need review or the role did not work on it."""
    job = await store.get_job(job_id)
    work = _needs_review(job)
    conflict = work.conflict
    role = role or (conflict.roles[0] if conflict and conflict.roles else None)
    if role is None or role not in work.roles:
        known = ", ".join(work.roles) or "none"
        raise ValueError(f"role {role!r} did not work on job {job_id}; give --role ({known})")
    text = (prompt or "").strip() or default_prompt(conflict.files if conflict else [])
    if len(text) > MAX_PROMPT_CHARS:
        raise ValueError(f"the prompt is longer than {MAX_PROMPT_CHARS} characters")
    work.resolve = ResolveRequest(role=role, prompt=text)
    entry = JobEntry(
        job_id=job.id, office_id=job.office_id, step="resolve_requested", detail=f"{role}: {text}"
    )
    job = await store.update_job(
        job.id,
        status="pending",
        work=work.dump(),
        failure_reason=None,
        needs_human=False,
        engine_id=None,
        entry=entry,
    )
    command = await store.insert_command(job.office_id, "run_job", {"job_id": job.id})
    return job, command


async def combine_again(
    store: Store, job_id: str, repository: Path, settings: GitSection | None = None
) -> Job:
    """Run the job's end again after a resolution by hand: done, or needs review again."""
    job = await store.get_job(job_id)
    _needs_review(job)
    end = await JobWorkspace(store, repository, settings=settings).finish(job_id)
    parts = [f"{role}: {sha[:10]}" for role, sha in end.committed.items()]
    detail = f"{job.branch}: {len(end.commits)} commit(s), {end.diffstat or 'no changes'}"
    if parts:
        detail += f" (committed {', '.join(parts)})"
    await store.add_job_entry(
        JobEntry(job_id=job.id, office_id=job.office_id, step="combined", detail=detail)
    )
    if end.conflict is not None:
        why = end.conflict.detail
        return await store.update_job(
            job.id,
            failure_reason=why,
            entry=JobEntry(job_id=job.id, office_id=job.office_id, step="needs_review", detail=why),
        )
    done = "resolved by hand and combined"
    return await store.update_job(
        job.id,
        status="done",
        failure_reason=None,
        needs_human=False,
        entry=JobEntry(job_id=job.id, office_id=job.office_id, step="done", detail=done),
    )
