"""The `ship_job` command: ship one job of the engine's office from a store row.

The row is in `agent_commands` (e.g. from Supabase); `ship_stored_job` ships it, and its
report is the command's result (docs/JOBS.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from semo.engine.office import job_ops
from semo.engine.ship.settings import ShipSection
from semo.engine.ship.ship import ShipError, ShipRequest, ship_stored_job
from semo.engine.store.base import NotFound, Store
from semo.engine.store.models import ShipJobPayload


async def ship_command(
    store: Store,
    office_id: str,
    payload: ShipJobPayload,
    settings: ShipSection,
    *,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Ship the job `payload` names if it is `office_id`'s; ShipError says why not."""
    try:
        await job_ops.get_job(store, payload.job_id, office_id)
    except NotFound:
        raise ShipError(f"no job {payload.job_id} in this office: nothing was shipped") from None
    request = ShipRequest(push=payload.push, pr=payload.pr, merge=payload.merge)
    report = await ship_stored_job(store, payload.job_id, request, settings, env=env)
    return report.model_dump(mode="json")
