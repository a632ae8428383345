"""`POST /api/offices/{office}/jobs/{job_id}/ship`: ship a done job's work.

As `semo job ship` does, with the API's `[ship]` (docs/API.md, docs/JOBS.md "Shipping a job's
work").

Body `{"push": bool, "pr": bool, "merge": bool}` (at least one true); 200 the ShipReport (what
was pushed, the pull request, the merge); 404 another office's job; 409 a step failed (the
message says which and why: a job not done, a conflicting merge, GitHub's refusal).
"""

from fastapi import APIRouter

from semo.engine.api.deps import _AUTH, _BODY, PREFIX, OfficeDep, _errors
from semo.engine.api.errors import ApiError
from semo.engine.api.jobs import JobId, _job
from semo.engine.ship.settings import ShipSection
from semo.engine.ship.ship import ShipError, ShipReport, ShipRequest, ship_stored_job
from semo.engine.store.base import Store


def build_ship_router(store: Store, settings: ShipSection) -> APIRouter:
    """The ship route for the app over `store` (semo/engine/api/app.py includes it)."""
    router = APIRouter(tags=["jobs"])

    @router.post(
        f"{PREFIX}/jobs/{{job_id}}/ship",
        response_model=ShipReport,
        responses=_errors(*_AUTH, 409, *_BODY),
    )
    async def ship(office: OfficeDep, job_id: JobId, body: ShipRequest) -> ShipReport:
        """Push the job's branch, open its pull request (pushes first), merge it into its base
        branch: the steps asked for, in that order; each goes on the job's timeline."""
        await _job(store, office.id, job_id)
        if not body.steps():
            raise ApiError(422, "say what to do: push, pr and/or merge")
        try:
            return await ship_stored_job(store, job_id, body, settings)
        except ShipError as error:
            raise ApiError(409, str(error), code="not_shipped") from None

    return router
