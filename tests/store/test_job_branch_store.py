"""A job's branch, base and work, and the status `needs_review` (migration 0014), on every store;
a schema-6 sqlite file upgraded with its jobs and timelines."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from semo.engine.store.base import Store, StoreError
from semo.engine.store.models import Job, JobEntry, Office
from semo.engine.store.sqlite import SCHEMA_VERSION, SqliteStore

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


def downgrade_to_6(path: Path) -> None:
    """Turn a current sqlite file back into what schema version 6 had (jobs and job_events
    without the branch columns and the status needs_review)."""
    conn = sqlite3.connect(path)
    try:
        conn.executescript(
            """
            BEGIN;
            PRAGMA legacy_alter_table = ON;
            DROP INDEX jobs_office_id_idx;
            DROP INDEX jobs_running_engine_idx;
            DROP INDEX job_events_job_idx;
            ALTER TABLE jobs RENAME TO j7;
            ALTER TABLE job_events RENAME TO e7;
            CREATE TABLE jobs (
                id TEXT PRIMARY KEY,
                office_id TEXT NOT NULL REFERENCES offices (id) ON DELETE CASCADE,
                agent_id TEXT NOT NULL, task TEXT NOT NULL, context TEXT,
                status TEXT NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'running', 'done', 'failed')),
                session_id TEXT, attempts INTEGER NOT NULL DEFAULT 0, failure_reason TEXT,
                needs_human INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL, engine_id TEXT, cancel_reason TEXT);
            INSERT INTO jobs SELECT id, office_id, agent_id, task, context, status, session_id,
                attempts, failure_reason, needs_human, created_at, updated_at, engine_id,
                cancel_reason FROM j7;
            CREATE TABLE job_events (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
                office_id TEXT NOT NULL REFERENCES offices (id) ON DELETE CASCADE,
                step TEXT NOT NULL CHECK (length(step) BETWEEN 1 AND 64),
                status TEXT CHECK (status IN ('pending', 'running', 'done', 'failed')),
                attempts INTEGER NOT NULL DEFAULT 0, session_id TEXT, agent_id TEXT,
                ref_id TEXT, detail TEXT NOT NULL DEFAULT '', at TEXT NOT NULL);
            INSERT INTO job_events SELECT * FROM e7;
            DROP TABLE e7;
            DROP TABLE j7;
            CREATE INDEX jobs_office_id_idx ON jobs (office_id, status, created_at);
            CREATE INDEX jobs_running_engine_idx
                ON jobs (office_id, engine_id) WHERE status = 'running';
            CREATE INDEX job_events_job_idx ON job_events (job_id, id);
            PRAGMA legacy_alter_table = OFF;
            PRAGMA user_version = 6;
            COMMIT;
            """
        )
    finally:
        conn.close()


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
