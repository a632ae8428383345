"""Current sqlite store files turned back into older schema versions, for migration tests."""

from __future__ import annotations

import sqlite3
from pathlib import Path


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


def downgrade_to_5(path: Path) -> None:
    """Turn a current sqlite file back into what schema version 5 had."""
    downgrade_to_6(path)
    conn = sqlite3.connect(path)
    try:
        conn.executescript(
            "DROP INDEX user_questions_undelivered_idx;"
            "ALTER TABLE user_questions DROP COLUMN answer_delivered_at;"
            "PRAGMA user_version = 5;"
        )
    finally:
        conn.close()


def downgrade_to_4(path: Path) -> None:
    """Turn a current file back into what schema version 4 had (the tables as they were)."""
    downgrade_to_5(path)
    conn = sqlite3.connect(path)
    try:
        conn.executescript(
            """
            BEGIN;
            CREATE TABLE inv_old AS SELECT id, office_id, caller_agent_id, caller_session_id,
                target_agent_id, task, context, status, error, created_at, updated_at
                FROM agent_invocations;
            DROP TABLE agent_invocations;
            CREATE TABLE agent_invocations (
                id TEXT PRIMARY KEY, office_id TEXT NOT NULL, caller_agent_id TEXT NOT NULL,
                caller_session_id TEXT, target_agent_id TEXT NOT NULL, task TEXT NOT NULL,
                context TEXT, status TEXT NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'running', 'delivered', 'failed')),
                error TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
            CREATE INDEX agent_invocations_office_id_idx
                ON agent_invocations (office_id, created_at);
            INSERT INTO agent_invocations SELECT * FROM inv_old;
            DROP TABLE inv_old;
            CREATE TABLE res_old AS SELECT id, office_id, invocation_id, sender_agent_id,
                recipient_agent_id, summary, payload, status, created_at, delivered_at
                FROM agent_results;
            DROP TABLE agent_results;
            CREATE TABLE agent_results (
                id TEXT PRIMARY KEY, office_id TEXT NOT NULL, invocation_id TEXT,
                sender_agent_id TEXT NOT NULL, recipient_agent_id TEXT NOT NULL,
                summary TEXT NOT NULL DEFAULT '', payload TEXT,
                status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered')),
                created_at TEXT NOT NULL, delivered_at TEXT);
            CREATE INDEX agent_results_office_id_idx
                ON agent_results (office_id, status, created_at);
            INSERT INTO agent_results SELECT * FROM res_old;
            DROP TABLE res_old;
            DROP TABLE job_events;
            ALTER TABLE jobs DROP COLUMN cancel_reason;
            PRAGMA user_version = 4;
            COMMIT;
            """
        )
    finally:
        conn.close()
