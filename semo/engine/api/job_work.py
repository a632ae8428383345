"""The routes of a job's work, over semo/engine/jobwork (docs/API.md, docs/JOBS.md).

The routes:

    GET  /api/offices/{office}/jobs/{job_id}/work                    JobReview
    GET  /api/offices/{office}/jobs/{job_id}/diff[?role=R][&stat=true]   JobDiff
    POST /api/offices/{office}/jobs/{job_id}/resolve {"role", "prompt"} | {"done": true}

404 for another office's job; 409 for a diff that cannot be made (no branch yet, a role that
did not work on the job) and for a resolve of a job that does not need review.
"""

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from semo.engine.api.deps import _AUTH, _BODY, PREFIX, OfficeDep, _errors
from semo.engine.api.errors import ApiError
from semo.engine.api.jobs import JobId, _job
from semo.engine.jobwork.resolve import MAX_PROMPT_CHARS, combine_again, hand_conflict
from semo.engine.jobwork.review import JobDiff, JobReview, job_diff, job_review
from semo.engine.jobwork.settings import GitSection
from semo.engine.store.base import Store
from semo.engine.store.models import Job


class ResolveBody(BaseModel):
    """Hand the conflict to `role` with `prompt`, or (`done`) combine again after a fix by
    hand."""

    role: str | None = Field(default=None, min_length=1, max_length=64)
    prompt: str | None = Field(default=None, max_length=MAX_PROMPT_CHARS)
    done: bool = False


def build_job_work_router(store: Store, settings: GitSection) -> APIRouter:
    """The job-work routes for the app over `store` (semo/engine/api/app.py includes them)."""
    router = APIRouter(tags=["jobs"])

    @router.get(
        f"{PREFIX}/jobs/{{job_id}}/work", response_model=JobReview, responses=_errors(*_AUTH)
    )
    async def work(office: OfficeDep, job_id: JobId) -> JobReview:
        """The job's branch, base, commits, diffstat, its roles' branches and worktrees, and a
        conflict, as `semo job show` prints them."""
        await _job(store, office.id, job_id)
        return await job_review(store, job_id, settings=settings)

    @router.get(
        f"{PREFIX}/jobs/{{job_id}}/diff", response_model=JobDiff, responses=_errors(*_AUTH, 409)
    )
    async def diff(
        office: OfficeDep,
        job_id: JobId,
        role: Annotated[str | None, Query(max_length=64)] = None,
        stat: bool = False,
    ) -> JobDiff:
        """The diff of the job's work since its base, file by file (`role`: one role's branch;
        `stat`: without the patches), as `semo job diff`."""
        await _job(store, office.id, job_id)
        try:
            made = await job_diff(store, job_id, role=role)
        except ValueError as error:
            raise ApiError(409, str(error), code="no_diff") from None
        if stat:
            made.files = [f.model_copy(update={"patch": ""}) for f in made.files]
        return made

    @router.post(
        f"{PREFIX}/jobs/{{job_id}}/resolve",
        response_model=Job,
        responses=_errors(*_AUTH, 409, *_BODY),
    )
    async def resolve(office: OfficeDep, job_id: JobId, body: ResolveBody) -> Job:
        """Go on with a job that needs review: hand its conflict to an agent (the job is
        pending again), or with `done` combine its work again after a fix by hand."""
        await _job(store, office.id, job_id)
        try:
            if body.done:
                if not office.repository:
                    raise ValueError(f"office {office.name} has no repository")
                return await combine_again(store, job_id, Path(office.repository), settings)
            job, _ = await hand_conflict(store, job_id, role=body.role, prompt=body.prompt)
        except ValueError as error:
            raise ApiError(409, str(error), code="not_resolvable") from None
        return job

    return router
