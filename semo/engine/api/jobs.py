"""The jobs routes of the REST API (docs/API.md, docs/JOBS.md), over semo/engine/office/job_ops.py:

    POST /api/offices/{office}/jobs                 create a job (201): the row and its command
    GET  /api/offices/{office}/jobs[?all=true]      pending, running, needs_review jobs (all: all)
    GET  /api/offices/{office}/jobs/{job_id}        the job and its timeline
    POST /api/offices/{office}/jobs/{job_id}/cancel cancel it

Creating a job does not wait for it: an engine of the office runs it (its `run_job` command);
follow it with GET .../jobs/{job_id} (the timeline grows as the engine records its steps).
"""

from typing import Annotated

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, Field

from semo.engine.api.deps import _AUTH, _BODY, PREFIX, OfficeDep, _errors
from semo.engine.api.errors import ApiError
from semo.engine.office.job_ops import (
    JobRequest,
    JobTimeline,
    JobView,
    agents_of,
    cancel_job,
    create_job,
    job_timeline,
    list_jobs,
    view,
)
from semo.engine.store.base import NotFound, Store
from semo.engine.store.models import Job

JobId = Annotated[str, Path(min_length=1, max_length=200, description="the job's id")]


class JobCreated(BaseModel):
    job: JobView
    #: the run_job command an engine runs the job with
    command_id: str


class CancelJob(BaseModel):
    model_config = {"extra": "forbid"}

    reason: str = Field(
        default="cancelled by an operator (API)",
        min_length=1,
        max_length=2000,
        description="why; recorded on the job",
    )


def build_jobs_router(store: Store) -> APIRouter:
    """The jobs routes for the app over `store` (semo/engine/api/app.py includes them)."""
    router = APIRouter(tags=["jobs"])

    @router.post(
        f"{PREFIX}/jobs",
        status_code=201,
        response_model=JobCreated,
        responses=_errors(*_AUTH, *_BODY),
    )
    async def create(office: OfficeDep, body: JobRequest) -> JobCreated:
        """Create a job for the office's agent of `role`; an engine of the office runs it."""
        try:
            job, command = await create_job(
                store, office.id, role=body.role, task=body.task, context=body.context
            )
        except NotFound as error:  # a well-formed reference to no agent, as for sessions
            raise ApiError(404, str(error), code="unknown_role") from None
        except ValueError as error:
            raise ApiError(422, str(error)) from None
        return JobCreated(job=view(job, await agents_of(store, office.id)), command_id=command.id)

    @router.get(f"{PREFIX}/jobs", response_model=list[JobView], responses=_errors(*_AUTH))
    async def jobs(
        office: OfficeDep,
        all: Annotated[bool, Query(description="include jobs that have ended")] = False,
    ) -> list[JobView]:
        """The office's jobs, oldest first (pending, running and needs_review ones unless `all`)."""
        return await list_jobs(store, office.id, include_ended=all)

    @router.get(f"{PREFIX}/jobs/{{job_id}}", response_model=JobTimeline, responses=_errors(*_AUTH))
    async def show(office: OfficeDep, job_id: JobId) -> JobTimeline:
        """The job, its timeline (attempts, prompts, questions and answers, invocations and
        results, outcome) and the invocations, results and questions it caused."""
        await _job(store, office.id, job_id)
        return await job_timeline(store, job_id, office.id)

    @router.post(
        f"{PREFIX}/jobs/{{job_id}}/cancel",
        response_model=JobView,
        responses=_errors(*_AUTH, 409, *_BODY),
    )
    async def cancel(office: OfficeDep, job_id: JobId, body: CancelJob | None = None) -> JobView:
        """Cancel the job: a pending one fails at once, a running one is ended by its engine
        (409 when it has ended or is being cancelled already)."""
        await _job(store, office.id, job_id)
        reason = (body or CancelJob()).reason
        job = await cancel_job(store, job_id, reason, office.id)
        return view(job, await agents_of(store, office.id))

    return router


async def _job(store: Store, office_id: str, job_id: str) -> Job:
    """The office's job `job_id`: 404 otherwise (another office's job is not shown)."""
    try:
        job = None if "\0" in job_id else await store.get_job(job_id)
    except NotFound:
        job = None
    if job is None or job.office_id != office_id:
        raise ApiError(404, f"no job {job_id!r} in this office")
    return job
