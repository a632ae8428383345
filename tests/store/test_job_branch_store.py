"""A job's branch, base and work, and the status `needs_review` (migration 0014), on every store;
a schema-6 sqlite file upgraded with its jobs and timelines."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from semo.engine.store.base import Store, StoreError
from semo.engine.store.models import Job, JobEntry, Office
from semo.engine.store.sqlite import SCHEMA_VERSION, SqliteStore
from tests.support.sqlite_downgrades import downgrade_to_6

WORK = {
    "roles": {"FE": {"branch": "semo/FE/job-1", "worktree": "/w/agent/FE/warm-fe"}},
    "conflict": {"roles": ["BE"], "files": ["app/로그인.py"], "detail": "content"},
}


async def test_a_job_keeps_its_branch_base_and_work(store: Store) -> None:
    office = await store.create_office(Office(name="branches"))
    job = await store.create_job(Job(office_id=office.id, agent_id="a", task="t"))
    assert (job.branch, job.base_branch, job.base_commit, job.work) == (None, None, None, None)
    started = await store.update_job(
        job.id, status="running", branch="semo/job/x", base_branch="main", base_commit="ab" * 20
    )
    assert (started.branch, started.base_branch, started.base_commit) == (
        "semo/job/x",
        "main",
        "ab" * 20,
    )
    entry = JobEntry(job_id=job.id, office_id=office.id, step="needs_review", detail="a.py")
    review = await store.update_job(job.id, status="needs_review", work=WORK, entry=entry)
    assert review.status == "needs_review" and review.work == WORK
    assert await store.get_job(job.id) == review
    [row] = await store.list_jobs(office.id, status="needs_review")
    assert row == review
    steps = await store.list_job_entries(job.id)
    assert [(e.step, e.status) for e in steps] == [("needs_review", "needs_review")]
    done = await store.update_job(job.id, status="done", work={**WORK, "conflict": None})
    assert done.work == {**WORK, "conflict": None} and done.branch == "semo/job/x"
    with pytest.raises(StoreError, match="status"):
        await store.update_job(job.id, status="reviewing")


async def test_a_version_6_file_is_upgraded_with_its_jobs_and_timelines(tmp_path: Path) -> None:
    path = tmp_path / "semo.db"
    async with SqliteStore(path) as store:
        office = await store.create_office(Office(name="o"))
        job = await store.create_job(Job(office_id=office.id, agent_id="a", task="t"))
        job = await store.update_job(
            job.id,
            status="failed",
            failure_reason="x",
            entry=JobEntry(job_id=job.id, office_id=office.id, step="failed", detail="x"),
        )
    downgrade_to_6(path)
    async with SqliteStore(path) as upgraded:
        assert await upgraded.get_job(job.id) == job
        [entry] = await upgraded.list_job_entries(job.id)
        assert (entry.step, entry.status, entry.detail) == ("failed", "failed", "x")
        review = await upgraded.update_job(
            job.id,
            status="needs_review",
            branch="semo/job/y",
            work=WORK,
            entry=JobEntry(job_id=job.id, office_id=office.id, step="needs_review"),
        )
        assert (review.status, review.branch, review.work) == ("needs_review", "semo/job/y", WORK)
        assert len(await upgraded.list_job_entries(job.id)) == 2
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 10
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert {"jobs_v6", "job_events_v6"}.isdisjoint(names)
        assert {"jobs_office_id_idx", "job_events_job_idx", "jobs_running_engine_idx"} <= names
        refs = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'job_events'").fetchone()
        assert "REFERENCES jobs (id)" in refs[0]
    finally:
        conn.close()
