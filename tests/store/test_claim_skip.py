"""Claims that skip command types (`claim_next_command(skip_types=...)`; postgres and supabase:
`semo_claim_next(..., p_skip_types)`, migrations 0008 and 0009), on every backend: the skipped
commands stay pending in their place and are claimed, oldest first, once they are no longer
skipped; what a claim fails at once (a command for an ended session) is still failed when
other types are skipped."""

from __future__ import annotations

from semo.engine.store.base import Store
from semo.engine.store.models import AgentSession, Office


async def test_skipped_types_stay_pending_in_their_place(store: Store) -> None:
    office = await store.create_office(Office(name="o"))
    ended = await store.upsert_session(
        AgentSession(office_id=office.id, agent_id="a", engine_id="e1", status="ready")
    )
    await store.set_session_status(ended.session_id, "terminated", reason="gone")
    job = await store.insert_command(office.id, "run_job", {"job_id": "j1"})
    stale = await store.insert_command(
        office.id, "send_prompt", {"prompt": "hi"}, session_id=ended.session_id
    )
    live = await store.upsert_session(
        AgentSession(office_id=office.id, agent_id="a", engine_id="e1", status="ready")
    )
    cancel = await store.insert_command(office.id, "cancel", {}, session_id=live.session_id)
    job2 = await store.insert_command(office.id, "run_job", {"job_id": "j2"})

    claimed = await store.claim_next_command(office.id, "e1", skip_types=["run_job"])
    assert claimed is not None and claimed.id == cancel.id  # past the job, the ended one failed
    failed = await store.get_result(stale.id)
    assert failed is not None and not failed.success and "has ended" in (failed.error or "")
    assert await store.claim_next_command(office.id, "e1", skip_types=["run_job"]) is None
    assert (await store.get_command(job.id)).status == "pending"
    # not skipped any more: the jobs, oldest first
    others = ["create_session", "send_prompt", "send_text", "send_keys", "get_output", "cancel"]
    first = await store.claim_next_command(office.id, "e1", skip_types=others)
    second = await store.claim_next_command(office.id, "e1")
    assert [c.id if c else None for c in (first, second)] == [job.id, job2.id]
    assert await store.claim_next_command(office.id, "e1") is None
