"""The default store: one SQLite file, zero set-up, one machine.

How it works: docs/STORE.md, "The sqlite backend".
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import json
import os
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from semo.engine.fsutil import private_dir, private_file
from semo.engine.store._shared import (
    LEGACY_GRACE_SECONDS,
    MAX_ATTEMPTS,
    already_ended,
    cancel_step,
    check_dead_for,
    check_heartbeat,
    check_lease,
    check_session_status,
    claimed_row_problem,
    entry_of_update,
    invocation_cancelled,
    job_not_cancellable,
    new_command,
    no_heartbeat,
    question_not_pending,
    recovery_reason,
    recovery_steps,
    session_claim_problem,
    session_ended,
    updated_job,
    utc,
)
from semo.engine.store.base import (
    DEFAULT_LEASE_SECONDS,
    LIST_PAGE_ROWS,
    JobRecovery,
    JobTakeover,
    NotFound,
    OfficeRows,
    Store,
    StoreConflict,
    StoreError,
    StoreUnavailable,
    check_invocation_status,
    key_columns,
    no_nul,
    upsert_columns,
)
from semo.engine.store.models import (
    COMMAND_ENDED,
    SAFE_TO_REPEAT,
    AgentCommand,
    AgentCommandResult,
    AgentInvocation,
    AgentResult,
    AgentSession,
    CommandStatus,
    EngineEnded,
    EngineHeartbeat,
    Job,
    JobEntry,
    JobWorkCancelled,
    Office,
    Row,
    SessionStatus,
    UserQuestion,
    now,
)

SCHEMA_VERSION = 10

#: strftime format of `ts()` (fixed width, so text order is time order)
_NOW_SQL = "strftime('%Y-%m-%dT%H:%M:%f000+00:00', 'now'{})"

#: engines and their heartbeats (migrations/0003_engine_heartbeats.sql)
ENGINES_TABLE = """
CREATE TABLE IF NOT EXISTS engines (
    office_id    TEXT NOT NULL REFERENCES offices (id) ON DELETE CASCADE,
    engine_id    TEXT NOT NULL CHECK (length(engine_id) > 0),
    status       TEXT NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'stopped')),
    started_at   TEXT NOT NULL,
    last_seen    TEXT NOT NULL,
    alive_until  TEXT NOT NULL,
    stopped_at   TEXT,
    PRIMARY KEY (office_id, engine_id)
);
"""

#: facts about the file (key, value): `heartbeat_grace_until`, until when engine ids without a
#: heartbeat row count as alive (set when a file from before heartbeats is upgraded)
META_TABLE = """
CREATE TABLE IF NOT EXISTS semo_meta (
    key    TEXT PRIMARY KEY,
    value  TEXT NOT NULL
);
"""

#: until when engine ids without a heartbeat row count as alive (`LEGACY_GRACE_SECONDS` after
#: the upgrade to heartbeats; as `semo_heartbeat_grace_until` in migrations/0004)
GRACE_KEY = "heartbeat_grace_until"

#: engines that held sessions, claims or running jobs before heartbeats: alive for a grace
#: period (`LEGACY_GRACE_SECONDS`), as migration 0003 does
SEED_LEGACY_ENGINES = f"""
INSERT OR IGNORE INTO engines (office_id, engine_id, status, started_at, last_seen, alive_until)
SELECT legacy.office_id, legacy.engine_id, 'running', {_NOW_SQL.format("")},
       {_NOW_SQL.format("")}, {_NOW_SQL.format(f", '+{int(LEGACY_GRACE_SECONDS)} seconds'")}
  FROM (SELECT office_id, engine_id FROM agent_sessions
         WHERE status <> 'terminated' AND engine_id IS NOT NULL
        UNION
        SELECT office_id, engine_id FROM jobs WHERE status = 'running' AND engine_id IS NOT NULL
        UNION
        SELECT office_id, claimed_by FROM agent_commands
         WHERE status = 'processing' AND claimed_by IS NOT NULL) AS legacy
 WHERE legacy.engine_id <> '';
"""

SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS offices (
    id              TEXT PRIMARY KEY,
    name            TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    repository      TEXT,
    workspace_root  TEXT,
    created_at      TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS agents (
    id              TEXT PRIMARY KEY,
    office_id       TEXT NOT NULL REFERENCES offices (id) ON DELETE CASCADE,
    name            TEXT NOT NULL,
    role            TEXT NOT NULL,
    prompt          TEXT NOT NULL DEFAULT '',
    scope_patterns  TEXT NOT NULL DEFAULT '[]',
    core_skills     TEXT NOT NULL DEFAULT '[]',
    command         TEXT NOT NULL DEFAULT '["claude"]',
    created_at      TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS agents_office_id_idx ON agents (office_id);

CREATE TABLE IF NOT EXISTS agent_sessions (
    session_id        TEXT PRIMARY KEY,
    office_id         TEXT NOT NULL REFERENCES offices (id) ON DELETE CASCADE,
    agent_id          TEXT NOT NULL,
    worktree_id       TEXT,
    status            TEXT NOT NULL DEFAULT 'creating' CHECK (status IN
                          ('creating', 'ready', 'executing', 'waiting_input', 'error',
                           'terminated')),
    engine_id         TEXT,
    pid               INTEGER,
    created_at        TEXT NOT NULL,
    last_activity_at  TEXT NOT NULL,
    ended_at          TEXT,
    end_reason        TEXT
);
CREATE INDEX IF NOT EXISTS agent_sessions_office_id_idx ON agent_sessions (office_id, status);

CREATE TABLE IF NOT EXISTS agent_commands (
    id                TEXT PRIMARY KEY,
    office_id         TEXT NOT NULL REFERENCES offices (id) ON DELETE CASCADE,
    session_id        TEXT,
    command_type      TEXT NOT NULL CHECK (command_type IN
                          ('create_session', 'send_prompt', 'send_text', 'send_keys',
                           'get_output', 'cancel', 'terminate', 'run_job', 'ship_job')),
    payload           TEXT NOT NULL DEFAULT '{}' CHECK (json_type(payload) = 'object'),
    status            TEXT NOT NULL DEFAULT 'pending'
                          CHECK (status IN ('pending', 'processing', 'completed', 'failed')),
    claimed_by        TEXT,
    lease_expires_at  TEXT,
    attempts          INTEGER NOT NULL DEFAULT 0,
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS agent_commands_claim_idx
    ON agent_commands (office_id, status, created_at);
CREATE INDEX IF NOT EXISTS agent_commands_status_idx ON agent_commands (status, lease_expires_at);

CREATE TABLE IF NOT EXISTS agent_command_results (
    id          TEXT PRIMARY KEY,
    command_id  TEXT NOT NULL UNIQUE REFERENCES agent_commands (id) ON DELETE CASCADE,
    success     INTEGER NOT NULL,
    result      TEXT,
    error       TEXT,
    created_at  TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS user_questions (
    id             TEXT PRIMARY KEY,
    office_id      TEXT NOT NULL REFERENCES offices (id) ON DELETE CASCADE,
    agent_id       TEXT NOT NULL,
    session_id     TEXT,
    question_type  TEXT NOT NULL DEFAULT 'text'
                       CHECK (question_type IN ('text', 'choice', 'confirm', 'permission')),
    question       TEXT NOT NULL CHECK (length(question) > 0),
    options        TEXT NOT NULL DEFAULT '[]',
    status         TEXT NOT NULL DEFAULT 'pending'
                       CHECK (status IN ('pending', 'answered', 'cancelled')),
    answer         TEXT,
    created_at     TEXT NOT NULL,
    answered_at    TEXT,
    cancel_reason  TEXT,
    cancelled_at   TEXT,
    answer_delivered_at TEXT,
    CHECK (question_type <> 'permission' OR answer IS NULL
           OR answer IN ('allow', 'allow for this session', 'deny')
           OR (substr(answer, 1, 6) = 'deny: ' AND length(answer) > 6))
);
CREATE INDEX IF NOT EXISTS user_questions_office_id_idx
    ON user_questions (office_id, status, created_at);
CREATE INDEX IF NOT EXISTS user_questions_session_idx
    ON user_questions (session_id) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS user_questions_undelivered_idx
    ON user_questions (office_id, created_at)
    WHERE status = 'answered' AND answer_delivered_at IS NULL;

CREATE TABLE IF NOT EXISTS agent_invocations (
    id                 TEXT PRIMARY KEY,
    office_id          TEXT NOT NULL REFERENCES offices (id) ON DELETE CASCADE,
    caller_agent_id    TEXT NOT NULL,
    caller_session_id  TEXT,
    target_agent_id    TEXT NOT NULL,
    task               TEXT NOT NULL,
    context            TEXT,
    status             TEXT NOT NULL DEFAULT 'pending'
                           CHECK (status IN ('pending', 'running', 'delivered', 'failed',
                                             'cancelled')),
    error              TEXT,
    created_at         TEXT NOT NULL,
    updated_at         TEXT NOT NULL,
    job_id             TEXT
);
CREATE INDEX IF NOT EXISTS agent_invocations_office_id_idx
    ON agent_invocations (office_id, created_at);
CREATE INDEX IF NOT EXISTS agent_invocations_job_idx
    ON agent_invocations (job_id) WHERE job_id IS NOT NULL;

CREATE TABLE IF NOT EXISTS agent_results (
    id                  TEXT PRIMARY KEY,
    office_id           TEXT NOT NULL REFERENCES offices (id) ON DELETE CASCADE,
    invocation_id       TEXT,
    sender_agent_id     TEXT NOT NULL,
    recipient_agent_id  TEXT NOT NULL,
    summary             TEXT NOT NULL DEFAULT '',
    payload             TEXT,
    status              TEXT NOT NULL DEFAULT 'pending'
                            CHECK (status IN ('pending', 'delivered', 'cancelled')),
    created_at          TEXT NOT NULL,
    delivered_at        TEXT,
    job_id              TEXT,
    cancel_reason       TEXT
);
CREATE INDEX IF NOT EXISTS agent_results_office_id_idx
    ON agent_results (office_id, status, created_at);
CREATE INDEX IF NOT EXISTS agent_results_job_idx
    ON agent_results (job_id) WHERE job_id IS NOT NULL;

CREATE TABLE IF NOT EXISTS jobs (
    id              TEXT PRIMARY KEY,
    office_id       TEXT NOT NULL REFERENCES offices (id) ON DELETE CASCADE,
    agent_id        TEXT NOT NULL,
    task            TEXT NOT NULL,
    context         TEXT,
    status          TEXT NOT NULL DEFAULT 'pending'
                        CHECK (status IN ('pending', 'running', 'done', 'failed',
                                          'needs_review')),
    session_id      TEXT,
    attempts        INTEGER NOT NULL DEFAULT 0,
    failure_reason  TEXT,
    needs_human     INTEGER NOT NULL DEFAULT 0,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    engine_id       TEXT,
    cancel_reason   TEXT,
    branch          TEXT,
    base_branch     TEXT,
    base_commit     TEXT,
    work            TEXT
);
CREATE INDEX IF NOT EXISTS jobs_office_id_idx ON jobs (office_id, status, created_at);
CREATE INDEX IF NOT EXISTS jobs_running_engine_idx
    ON jobs (office_id, engine_id) WHERE status = 'running';

CREATE TABLE IF NOT EXISTS job_events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id      TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    office_id   TEXT NOT NULL REFERENCES offices (id) ON DELETE CASCADE,
    step        TEXT NOT NULL CHECK (length(step) BETWEEN 1 AND 64),
    status      TEXT CHECK (status IN ('pending', 'running', 'done', 'failed', 'needs_review')),
    attempts    INTEGER NOT NULL DEFAULT 0,
    session_id  TEXT,
    agent_id    TEXT,
    ref_id      TEXT,
    detail      TEXT NOT NULL DEFAULT '',
    at          TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS job_events_job_idx ON job_events (job_id, id);

CREATE TABLE IF NOT EXISTS semo_wakeups (
    office_id  TEXT PRIMARY KEY,
    seq        INTEGER NOT NULL
);

CREATE TRIGGER IF NOT EXISTS semo_agent_commands_insert_wake
AFTER INSERT ON agent_commands
BEGIN
    INSERT INTO semo_wakeups (office_id, seq) VALUES (NEW.office_id, 1)
        ON CONFLICT (office_id) DO UPDATE SET seq = seq + 1;
END;

CREATE TRIGGER IF NOT EXISTS semo_agent_commands_requeue_wake
AFTER UPDATE OF status ON agent_commands
WHEN NEW.status = 'pending' AND OLD.status IS NOT 'pending'
BEGIN
    INSERT INTO semo_wakeups (office_id, seq) VALUES (NEW.office_id, 1)
        ON CONFLICT (office_id) DO UPDATE SET seq = seq + 1;
END;

CREATE TRIGGER IF NOT EXISTS semo_agent_command_results_insert_wake
AFTER INSERT ON agent_command_results
BEGIN
    INSERT INTO semo_wakeups (office_id, seq)
        SELECT office_id, 1 FROM agent_commands WHERE id = NEW.command_id
        ON CONFLICT (office_id) DO UPDATE SET seq = seq + 1;
END;

CREATE TRIGGER IF NOT EXISTS semo_user_questions_update_wake
AFTER UPDATE ON user_questions
WHEN OLD.status IS NOT NEW.status OR OLD.answer IS NOT NEW.answer
BEGIN
    INSERT INTO semo_wakeups (office_id, seq) VALUES (NEW.office_id, 1)
        ON CONFLICT (office_id) DO UPDATE SET seq = seq + 1;
END;
"""
    + ENGINES_TABLE
    + META_TABLE
)

#: One office a name, one agent a role in an office (migrations/0012): created after `SCHEMA`
#: and the upgrades' `AFTER_SCHEMA` steps (which merge the duplicates of older files first).
UNIQUE_INDEXES = """
CREATE UNIQUE INDEX IF NOT EXISTS offices_name_key ON offices (name);
CREATE UNIQUE INDEX IF NOT EXISTS agents_office_role_key ON agents (office_id, role);
"""

#: Version 7 (migrations/0012): offices of one name, then agents of one (office, role), merged
#: into the oldest, every row re-pointed (a heartbeat row the kept office has too is dropped),
#: before `UNIQUE_INDEXES`.
MERGE_DUPLICATES = (
    """
CREATE TEMP TABLE semo_office_merge AS
SELECT o.id AS old_id,
       (SELECT k.id FROM offices k WHERE k.name = o.name ORDER BY k.created_at, k.id LIMIT 1)
           AS keep_id
  FROM offices o;
DELETE FROM semo_office_merge WHERE old_id = keep_id;
DELETE FROM engines WHERE EXISTS (
    SELECT 1 FROM semo_office_merge m JOIN engines k ON k.office_id = m.keep_id
     WHERE m.old_id = engines.office_id AND k.engine_id = engines.engine_id);
DELETE FROM semo_wakeups WHERE office_id IN (SELECT old_id FROM semo_office_merge);
"""
    + "".join(
        f"""UPDATE {table} SET office_id = (SELECT keep_id FROM semo_office_merge
                                    WHERE old_id = {table}.office_id)
 WHERE office_id IN (SELECT old_id FROM semo_office_merge);
"""
        for table in (
            "agents",
            "agent_sessions",
            "agent_commands",
            "user_questions",
            "agent_invocations",
            "agent_results",
            "jobs",
            "job_events",
            "engines",
        )
    )
    + """
DELETE FROM offices WHERE id IN (SELECT old_id FROM semo_office_merge);
DROP TABLE semo_office_merge;
CREATE TEMP TABLE semo_agent_merge AS
SELECT a.id AS old_id,
       (SELECT k.id FROM agents k WHERE k.office_id = a.office_id AND k.role = a.role
         ORDER BY k.created_at, k.id LIMIT 1) AS keep_id
  FROM agents a;
DELETE FROM semo_agent_merge WHERE old_id = keep_id;
"""
    + "".join(
        f"""UPDATE {table} SET {column} = (SELECT keep_id FROM semo_agent_merge
                                   WHERE old_id = {table}.{column})
 WHERE {column} IN (SELECT old_id FROM semo_agent_merge);
"""
        for table, column in (
            ("agent_sessions", "agent_id"),
            ("user_questions", "agent_id"),
            ("agent_invocations", "caller_agent_id"),
            ("agent_invocations", "target_agent_id"),
            ("agent_results", "sender_agent_id"),
            ("agent_results", "recipient_agent_id"),
            ("jobs", "agent_id"),
            ("job_events", "agent_id"),
        )
    )
    + """
UPDATE agent_commands
   SET payload = json_set(payload, '$.agent_id',
                          (SELECT keep_id FROM semo_agent_merge
                            WHERE old_id = json_extract(payload, '$.agent_id')))
 WHERE json_extract(payload, '$.agent_id') IN (SELECT old_id FROM semo_agent_merge);
DELETE FROM agents WHERE id IN (SELECT old_id FROM semo_agent_merge);
DROP TABLE semo_agent_merge;
"""
)


def _table(schema: str, name: str) -> str:
    """The CREATE TABLE statement of table `name` in `schema` (for a rebuild)."""
    start = schema.index(f"CREATE TABLE IF NOT EXISTS {name} (")
    return schema[start : schema.index("\n);", start) + 3] + "\n"


#: The user_questions table as `SCHEMA` makes it (rebuilt by the upgrade from version 8).
USER_QUESTIONS_TABLE = _table(SCHEMA, "user_questions")

#: What turns a file of schema version N into N + 1 (`SCHEMA`, all IF NOT EXISTS, runs after).
UPGRADES: dict[int, str] = {
    1: """
ALTER TABLE jobs ADD COLUMN engine_id TEXT;
ALTER TABLE user_questions ADD COLUMN cancel_reason TEXT;
ALTER TABLE user_questions ADD COLUMN cancelled_at TEXT;
""",
    # a file from before heartbeats: engines of that semo get the grace from now
    2: ENGINES_TABLE
    + SEED_LEGACY_ENGINES
    + META_TABLE
    + f"""
INSERT OR REPLACE INTO semo_meta (key, value)
VALUES ('{GRACE_KEY}', {_NOW_SQL.format(f", '+{int(LEGACY_GRACE_SECONDS)} seconds'")});
""",
    # a file upgraded to heartbeats by a semo that did not record when: from the first engine
    # row (the rows schema version 3 wrote on upgrade start then), or now
    3: META_TABLE
    + f"""
INSERT OR IGNORE INTO semo_meta (key, value)
SELECT '{GRACE_KEY}',
       strftime('%Y-%m-%dT%H:%M:%f000+00:00', coalesce(min(started_at), 'now'),
                '+{int(LEGACY_GRACE_SECONDS)} seconds')
  FROM engines;
""",
    # migrations/0006: job ids on invocations and results, and a 'cancelled' status for both
    # (a CHECK constraint changes: the tables are rebuilt; `AFTER_SCHEMA` copies the rows)
    4: """
DROP INDEX IF EXISTS agent_invocations_office_id_idx;
ALTER TABLE agent_invocations RENAME TO agent_invocations_v4;
DROP INDEX IF EXISTS agent_results_office_id_idx;
ALTER TABLE agent_results RENAME TO agent_results_v4;
ALTER TABLE jobs ADD COLUMN cancel_reason TEXT;
""",
    # migrations/0008: when an answer was delivered (the router reads only undelivered ones)
    5: """
ALTER TABLE user_questions ADD COLUMN answer_delivered_at TEXT;
""",
    # migrations/0014: a job's branch, base and work, and the status 'needs_review' (jobs' and
    # job_events' CHECK change: both are rebuilt, `AFTER_SCHEMA` copies the rows; the legacy
    # rename leaves job_events' reference to "jobs" as it is; a file older than version 5 has
    # no job_events yet: an empty one stands in)
    6: """
PRAGMA legacy_alter_table = ON;
DROP INDEX IF EXISTS jobs_office_id_idx;
DROP INDEX IF EXISTS jobs_running_engine_idx;
DROP INDEX IF EXISTS job_events_job_idx;
CREATE TABLE IF NOT EXISTS job_events (
    id INTEGER PRIMARY KEY, job_id TEXT, office_id TEXT, step TEXT, status TEXT,
    attempts INTEGER, session_id TEXT, agent_id TEXT, ref_id TEXT, detail TEXT, at TEXT
);
ALTER TABLE jobs RENAME TO jobs_v6;
ALTER TABLE job_events RENAME TO job_events_v6;
PRAGMA legacy_alter_table = OFF;
""",
    # migrations/0012: nothing before `SCHEMA` (the duplicates are merged after it)
    7: "",
    # migrations/0013: nothing before `SCHEMA` (user_questions is rebuilt after it, once
    # version 7's merge has re-pointed its rows)
    8: "",
    # migrations/0016: nothing before `SCHEMA` (agent_commands is rebuilt after it, once
    # version 7's merge has re-pointed its rows: a table renamed before the merge would keep
    # the duplicate offices' commands out of it)
    9: "",
}

#: What an upgrade from version N does once `SCHEMA` has created the new tables.
AFTER_SCHEMA: dict[int, str] = {
    4: """
INSERT INTO agent_invocations (id, office_id, caller_agent_id, caller_session_id,
                               target_agent_id, task, context, status, error, created_at,
                               updated_at)
SELECT id, office_id, caller_agent_id, caller_session_id, target_agent_id, task, context,
       status, error, created_at, updated_at
  FROM agent_invocations_v4 ORDER BY rowid;
DROP TABLE agent_invocations_v4;
INSERT INTO agent_results (id, office_id, invocation_id, sender_agent_id, recipient_agent_id,
                           summary, payload, status, created_at, delivered_at)
SELECT id, office_id, invocation_id, sender_agent_id, recipient_agent_id, summary, payload,
       status, created_at, delivered_at
  FROM agent_results_v4 ORDER BY rowid;
DROP TABLE agent_results_v4;
""",
    6: """
INSERT INTO jobs (id, office_id, agent_id, task, context, status, session_id, attempts,
                  failure_reason, needs_human, created_at, updated_at, engine_id, cancel_reason)
SELECT id, office_id, agent_id, task, context, status, session_id, attempts, failure_reason,
       needs_human, created_at, updated_at, engine_id, cancel_reason
  FROM jobs_v6 ORDER BY rowid;
INSERT INTO job_events (id, job_id, office_id, step, status, attempts, session_id, agent_id,
                        ref_id, detail, at)
SELECT id, job_id, office_id, step, status, attempts, session_id, agent_id, ref_id, detail, at
  FROM job_events_v6 ORDER BY id;
DROP TABLE job_events_v6;
DROP TABLE jobs_v6;
""",
    7: MERGE_DUPLICATES,
    # migrations/0013: a question may be a permission request: user_questions' CHECK changes,
    # so the table is rebuilt (its rows copied); `SCHEMA` again makes its indexes and trigger
    8: """
DROP TRIGGER IF EXISTS semo_user_questions_update_wake;
DROP INDEX IF EXISTS user_questions_office_id_idx;
DROP INDEX IF EXISTS user_questions_session_idx;
DROP INDEX IF EXISTS user_questions_undelivered_idx;
ALTER TABLE user_questions RENAME TO user_questions_v8;
"""
    + USER_QUESTIONS_TABLE
    + """
INSERT INTO user_questions (id, office_id, agent_id, session_id, question_type, question, options,
                            status, answer, created_at, answered_at, cancel_reason, cancelled_at,
                            answer_delivered_at)
SELECT id, office_id, agent_id, session_id, question_type, question, options, status, answer,
       created_at, answered_at, cancel_reason, cancelled_at, answer_delivered_at
  FROM user_questions_v8 ORDER BY rowid;
DROP TABLE user_questions_v8;
"""
    + SCHEMA,
    # migrations/0016: the command type 'ship_job': agent_commands' CHECK changes, so the table
    # is rebuilt (its rows copied), and agent_command_results with it (renaming a parent with
    # foreign keys on re-points its children; the legacy rename leaves them naming
    # "agent_commands"); `SCHEMA` again makes their indexes and triggers
    9: """
PRAGMA legacy_alter_table = ON;
DROP INDEX IF EXISTS agent_commands_claim_idx;
DROP INDEX IF EXISTS agent_commands_status_idx;
DROP TRIGGER IF EXISTS semo_agent_commands_insert_wake;
DROP TRIGGER IF EXISTS semo_agent_commands_requeue_wake;
DROP TRIGGER IF EXISTS semo_agent_command_results_insert_wake;
ALTER TABLE agent_commands RENAME TO agent_commands_v9;
ALTER TABLE agent_command_results RENAME TO agent_command_results_v9;
PRAGMA legacy_alter_table = OFF;
"""
    + _table(SCHEMA, "agent_commands")
    + _table(SCHEMA, "agent_command_results")
    + """
INSERT INTO agent_commands (id, office_id, session_id, command_type, payload, status, claimed_by,
                            lease_expires_at, attempts, created_at, updated_at)
SELECT id, office_id, session_id, command_type, payload, status, claimed_by, lease_expires_at,
       attempts, created_at, updated_at
  FROM agent_commands_v9 ORDER BY rowid;
INSERT INTO agent_command_results (id, command_id, success, result, error, created_at)
SELECT id, command_id, success, result, error, created_at
  FROM agent_command_results_v9 ORDER BY rowid;
DROP TABLE agent_command_results_v9;
DROP TABLE agent_commands_v9;
"""
    + SCHEMA,
}


def _dangling_rows(conn: sqlite3.Connection) -> collections.Counter[str]:
    """How many rows of each table name a parent row that does not exist."""
    return collections.Counter(row[0] for row in conn.execute("PRAGMA foreign_key_check"))


#: Whether engine row `e` is alive at :at (running, and its heartbeat has not run out).
ALIVE_SQL = "(e.status = 'running' AND e.alive_until > :at)"


def engine_id_alive_sql(office: str, engine: str) -> str:
    """Whether engine id `engine` of office `office` (SQL expressions) counts as alive at :at:
    its row is alive, or it has no row and the grace after the upgrade to heartbeats is running
    (as `semo_engine_id_alive` in migrations/0004)."""
    return f"""coalesce(nullif({engine}, '') IS NOT NULL
       AND coalesce((SELECT {ALIVE_SQL} FROM engines e
                      WHERE e.office_id = {office} AND e.engine_id = {engine}),
                    :at < (SELECT m.value FROM semo_meta m WHERE m.key = '{GRACE_KEY}')), 0)"""


#: The oldest pending command of an office that :engine may run: none for a live session of
#: another engine that is alive (a session unknown here, without an engine, ended, or whose
#: engine is not alive is anybody's).
CLAIM_SQL = f"""
UPDATE agent_commands
   SET status = 'processing', claimed_by = :engine,
       lease_expires_at = :lease, attempts = attempts + 1, updated_at = :at
 WHERE id = (SELECT p.id FROM agent_commands p
              WHERE p.office_id = :office AND p.status = 'pending'
                AND p.command_type NOT IN (SELECT value FROM json_each(:skip))
                AND NOT EXISTS (SELECT 1 FROM agent_sessions s
                                 WHERE s.session_id = p.session_id
                                   AND s.status <> 'terminated'
                                   AND s.engine_id <> :engine
                                   AND {engine_id_alive_sql("s.office_id", "s.engine_id")})
              ORDER BY p.created_at, p.rowid LIMIT 1)
   AND status = 'pending'
RETURNING *
"""

#: A command's session as a claim needs it (as `semo_claim_next` reads it in migrations/0004).
SESSION_STATE_SQL = f"""
SELECT s.status, s.end_reason, s.engine_id, e.status AS engine_status,
       e.last_seen AS engine_last_seen, e.stopped_at AS engine_stopped_at,
       {engine_id_alive_sql("s.office_id", "s.engine_id")} AS engine_alive
  FROM agent_sessions s
  LEFT JOIN engines e ON e.office_id = s.office_id AND e.engine_id = s.engine_id
 WHERE s.session_id = :session
"""

#: An engine row with whether it is alive at :at.
ENGINE_ROW_SQL = f"SELECT e.*, {ALIVE_SQL} AS alive FROM engines e"

#: Columns holding JSON text, per table.
JSON_COLUMNS = frozenset(
    {"scope_patterns", "core_skills", "command", "payload", "result", "options", "context", "work"}
)
BOOL_COLUMNS = frozenset({"success", "needs_human", "alive", "engine_alive"})

T = TypeVar("T")
M = TypeVar("M", bound=Row)


def default_sqlite_path() -> Path:
    """`$XDG_STATE_HOME/semo/semo.db`, else `~/.local/state/semo/semo.db`."""
    state = os.environ.get("XDG_STATE_HOME", "")
    base = Path(state) if state and Path(state).is_absolute() else Path.home() / ".local/state"
    return base / "semo" / "semo.db"


def _make_private(path: Path) -> None:
    """The database 0600 before SQLite opens it (its -wal and -shm then get the same mode),
    left-over -wal/-shm/-journal files too, and the default state folder 0700: they hold the
    offices' commands, answers and results (docs/SECURITY.md)."""
    if path.parent == default_sqlite_path().parent:
        private_dir(path.parent)
    private_file(path)
    for suffix in ("-wal", "-shm", "-journal"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            private_file(side)


def ts(value: datetime | None) -> str | None:
    """Fixed-width ISO-8601 UTC text: text order is time order."""
    if value is None:
        return None
    return utc(value).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")


def _to_db(model: Row) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in no_nul(model.model_dump()).items():
        if key in JSON_COLUMNS:
            out[key] = None if value is None else json.dumps(value, ensure_ascii=False)
        elif isinstance(value, datetime):
            out[key] = ts(value)
        elif isinstance(value, bool):
            out[key] = int(value)
        else:
            out[key] = value
    return out


def _decode(row: sqlite3.Row) -> dict[str, Any]:
    data = dict(row)
    for key in JSON_COLUMNS.intersection(data):
        if data[key] is not None:
            data[key] = json.loads(data[key])
    for key in BOOL_COLUMNS.intersection(data):
        data[key] = bool(data[key])
    return data


def _model(cls: type[M], row: sqlite3.Row) -> M:
    return cls.model_validate(_decode(row))


def _model_or_none(cls: type[M], row: sqlite3.Row | None) -> M | None:
    return None if row is None else _model(cls, row)


def _fetch_all(c: sqlite3.Connection, sql: str, args: dict[str, Any]) -> list[sqlite3.Row]:
    return c.execute(sql, args).fetchall()


def _insert_sql(table: str, columns: list[str]) -> str:
    names = ", ".join(columns)
    marks = ", ".join(f":{c}" for c in columns)
    return f"INSERT INTO {table} ({names}) VALUES ({marks})"


def _write_entry(c: sqlite3.Connection, entry: JobEntry) -> sqlite3.Row:
    """Insert a timeline entry (its id given by the database) in the caller's transaction."""
    data = _to_db(entry)
    del data["id"]
    return c.execute(_insert_sql("job_events", list(data)) + " RETURNING *", data).fetchone()


def _upsert_sql(table: str, key: str | tuple[str, ...], columns: list[str]) -> str:
    changes = ", ".join(f"{c} = excluded.{c}" for c in upsert_columns(columns, key))
    keys = ", ".join(key_columns(key))
    return f"{_insert_sql(table, columns)} ON CONFLICT ({keys}) DO UPDATE SET {changes} RETURNING *"


class SqliteStore(Store):
    backend = "sqlite"

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        busy_timeout: float = 10.0,
        poll_interval: float = 0.01,
    ) -> None:
        self.path = Path(path) if path is not None else default_sqlite_path()
        if str(self.path) == ":memory:":
            raise StoreError("the sqlite store needs a file (wake-ups use a second connection)")
        self.busy_timeout = busy_timeout
        self.poll_interval = poll_interval
        self._conn: sqlite3.Connection | None = None
        self._watch_conn: sqlite3.Connection | None = None
        self._db: ThreadPoolExecutor | None = None
        self._watcher: ThreadPoolExecutor | None = None
        # watcher-thread state: the last data_version seen and the counters read then
        self._watch_version: int | None = None
        self._watch_seqs: dict[str, int] = {}
        # per office: the counter value the last wait_for_change reported
        self._seen: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    # -- lifecycle ---------------------------------------------------------------------------

    async def open(self) -> None:
        if self._conn is not None:
            return
        self._watch_version, self._watch_seqs = None, {}
        self._db = ThreadPoolExecutor(1, thread_name_prefix="semo-sqlite")
        self._watcher = ThreadPoolExecutor(1, thread_name_prefix="semo-sqlite-watch")
        loop = asyncio.get_running_loop()
        try:
            self._conn = await loop.run_in_executor(self._db, self._connect_main)
            self._watch_conn = await loop.run_in_executor(self._watcher, self._connect)
            self._seen = dict(await loop.run_in_executor(self._watcher, self._poll))
        except (sqlite3.Error, OSError) as error:
            await self.close()
            raise StoreUnavailable(f"cannot open the sqlite store {self.path}: {error}") from None
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        for conn, executor in ((self._conn, self._db), (self._watch_conn, self._watcher)):
            if executor is None:
                continue
            if conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    await loop.run_in_executor(executor, conn.close)
            executor.shutdown(wait=False)
        self._conn = self._watch_conn = None
        self._db = self._watcher = None

    def _connect(self) -> sqlite3.Connection:
        _make_private(self.path)
        conn = sqlite3.connect(
            str(self.path),
            timeout=self.busy_timeout,
            isolation_level=None,  # autocommit; transactions are explicit BEGIN IMMEDIATE
            check_same_thread=False,  # used from its executor's one thread only
        )
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        conn.execute("PRAGMA foreign_keys = ON")
        return conn

    def _connect_main(self) -> sqlite3.Connection:
        conn = self._connect()
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} has schema version {version}; this semo knows "
                    f"{SCHEMA_VERSION}: upgrade semo"
                )
            if version < SCHEMA_VERSION:
                self._create_schema(conn, version)
        except BaseException:
            conn.close()
            raise
        return conn

    @staticmethod
    def _create_schema(conn: sqlite3.Connection, version: int) -> None:
        """Create the schema (version 0: a new file) or upgrade it from `version`.

        An upgrade runs with foreign keys off (SQLite's recipe for rebuilding tables): no
        row goes by cascade while tables are renamed, copied and merged. Before it commits, a
        row that lost its parent on the way (which the cascade would have deleted) is an error
        and the file stays as it was.
        """
        versions = range(version, SCHEMA_VERSION) if version else range(0)
        steps = "".join(UPGRADES[v] for v in versions)
        after = "".join(AFTER_SCHEMA.get(v, "") for v in versions)
        if version:
            conn.execute("PRAGMA foreign_keys = OFF")  # a no-op inside a transaction
            dangling = _dangling_rows(conn)
        try:
            # every SCHEMA statement is IF NOT EXISTS: two processes creating it at once is fine
            conn.executescript(
                f"BEGIN IMMEDIATE;\n{steps}{SCHEMA}\n{after}{UNIQUE_INDEXES}"
                f"PRAGMA user_version = {SCHEMA_VERSION};\n"
            )
            if version:
                lost = _dangling_rows(conn) - dangling
                if lost:
                    raise StoreError(
                        "upgrading the sqlite file would orphan rows ("
                        + ", ".join(f"{n} in {table}" for table, n in sorted(lost.items()))
                        + "); nothing was changed"
                    )
            conn.execute("COMMIT")
        except sqlite3.OperationalError:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            # another process upgraded the file between our look at its version and our lock
            # (its ALTER TABLEs ran first: "duplicate column name")
            if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                raise
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        finally:
            conn.execute("PRAGMA foreign_keys = ON")

    # -- plumbing ----------------------------------------------------------------------------

    async def _run(
        self,
        fn: Callable[[sqlite3.Connection], T],
        *,
        write: bool = False,
        missing: str | None = None,
        duplicate: str | None = None,
    ) -> T:
        """Run `fn(conn)` on the database thread (in `BEGIN IMMEDIATE` when `write`)."""
        conn, executor = self._conn, self._db
        if conn is None or executor is None:
            raise StoreError("the sqlite store is not open (use `async with store:`)")

        def call() -> T:
            if not write:
                return fn(conn)
            conn.execute("BEGIN IMMEDIATE")
            try:
                out = fn(conn)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return out

        try:
            return await asyncio.get_running_loop().run_in_executor(executor, call)
        except sqlite3.IntegrityError as error:
            name = getattr(error, "sqlite_errorname", "")
            if "FOREIGNKEY" in name and missing:
                raise NotFound(missing) from None
            if ("UNIQUE" in name or "PRIMARYKEY" in name) and duplicate:
                raise StoreConflict(duplicate) from None
            raise StoreError(f"the sqlite store refused the change: {error}") from None
        except (sqlite3.OperationalError, sqlite3.ProgrammingError) as error:
            raise StoreUnavailable(f"sqlite store {self.path}: {error}") from None
        except sqlite3.DatabaseError as error:
            raise StoreError(f"sqlite store {self.path}: {error}") from None

    async def _insert(self, table: str, model: M, duplicate: str) -> M:
        data = _to_db(model)
        sql = _insert_sql(table, list(data)) + " RETURNING *"
        row = await self._run(
            lambda c: c.execute(sql, data).fetchone(),
            write=True,
            missing=f"office {getattr(model, 'office_id', '?')} not found",
            duplicate=duplicate,
        )
        return _model(type(model), row)

    async def _upsert(self, table: str, key: str | tuple[str, ...], model: M) -> M:
        data = _to_db(model)
        sql = _upsert_sql(table, key, list(data))
        row = await self._run(
            lambda c: c.execute(sql, data).fetchone(),
            write=True,
            missing=f"office {getattr(model, 'office_id', '?')} not found",
        )
        return _model(type(model), row)

    async def _get(self, cls: type[M], table: str, key: str, value: str, what: str) -> M:
        row = await self._run(
            lambda c: c.execute(f"SELECT * FROM {table} WHERE {key} = ?", (value,)).fetchone()
        )
        if row is None:
            raise NotFound(f"no {what} {value}")
        return _model(cls, row)

    async def _list(
        self, cls: type[M], sql: str, params: tuple[Any, ...] | dict[str, Any]
    ) -> list[M]:
        rows = await self._run(lambda c: c.execute(sql, params).fetchall())
        return [cls.model_validate(_decode(r)) for r in rows]

    async def _pages(
        self,
        cls: type[M],
        table: str,
        where: str,
        params: dict[str, Any],
        keys: tuple[str, ...] = ("created_at", "rowid"),
        *,
        desc: bool = False,
        limit: int | None = None,
    ) -> list[M]:
        """Every row of `table` (a name of ours) matching `where` (named parameters), or the
        first `limit`, ordered by `keys` (the last one unique), LIST_PAGE_ROWS a query: each
        page starts after the last row of the one before (keyset pagination)."""
        names = [f"_key_{i}" for i in range(len(keys))]
        picked = ", ".join(f"{k} AS {n}" for k, n in zip(keys, names, strict=True))
        direction = " DESC" if desc else ""
        order = ", ".join(f"{k}{direction}" for k in keys)
        after_sql = (
            f" AND ({', '.join(keys)}) {'<' if desc else '>'} ({', '.join(':' + n for n in names)})"
        )
        found: list[M] = []
        after: dict[str, Any] | None = None
        while limit is None or len(found) < limit:
            size = LIST_PAGE_ROWS if limit is None else min(LIST_PAGE_ROWS, limit - len(found))
            sql = f"SELECT *, {picked} FROM {table} WHERE {where}"
            args = {**params, "_size": size}
            if after is not None:
                sql += after_sql
                args.update(after)
            sql += f" ORDER BY {order} LIMIT :_size"
            rows = await self._run(functools.partial(_fetch_all, sql=sql, args=args))
            for row in rows:
                data = _decode(row)
                for name in names:
                    data.pop(name)
                found.append(cls.model_validate(data))
            if len(rows) < size:
                break
            after = {n: rows[-1][n] for n in names}
        return found

    # -- offices and agents --------------------------------------------------------------------

    async def list_offices(self) -> list[Office]:
        return await self._pages(Office, "offices", "1", {})

    # -- sessions ----------------------------------------------------------------------------

    async def list_sessions(
        self, office_id: str, *, include_terminated: bool = False
    ) -> list[AgentSession]:
        where = "" if include_terminated else " AND status <> 'terminated'"
        return await self._pages(
            AgentSession, "agent_sessions", f"office_id = :office{where}", {"office": office_id}
        )

    async def set_session_status(
        self, session_id: str, status: SessionStatus, *, reason: str | None = None
    ) -> AgentSession:
        check_session_status(status)

        def change(c: sqlite3.Connection) -> sqlite3.Row:
            row = c.execute(
                "SELECT status, end_reason FROM agent_sessions WHERE session_id = ?", (session_id,)
            ).fetchone()
            if row is None:
                raise NotFound(f"no session {session_id}")
            if row["status"] == "terminated":
                if status == "terminated":
                    raise StoreConflict(already_ended(session_id, row["end_reason"]))
                raise StoreConflict(
                    f"session {session_id} is terminated; it cannot become {status}"
                )
            at = ts(now())
            changed = c.execute(
                """UPDATE agent_sessions
                      SET status = :status, last_activity_at = :at,
                          end_reason = coalesce(:reason, end_reason),
                          ended_at = CASE WHEN :status = 'terminated'
                                          THEN coalesce(ended_at, :at) ELSE ended_at END
                    WHERE session_id = :id RETURNING *""",
                {"status": status, "at": at, "reason": no_nul(reason), "id": session_id},
            ).fetchone()
            if status == "terminated":
                why = session_ended(session_id, changed["end_reason"])
                c.execute(
                    "UPDATE user_questions SET status = 'cancelled', cancel_reason = ?,"
                    " cancelled_at = ? WHERE session_id = ? AND status = 'pending'",
                    (no_nul(why), at, session_id),
                )
            return changed

        return _model(AgentSession, await self._run(change, write=True))

    # -- commands ----------------------------------------------------------------------------

    async def insert_command(
        self,
        office_id: str,
        command_type: str,
        payload: dict[str, Any] | None = None,
        *,
        session_id: str | None = None,
    ) -> AgentCommand:
        command = new_command(office_id, command_type, payload, session_id)
        return await self._insert("agent_commands", command, f"command {command.id} exists")

    async def list_commands(
        self, office_id: str, *, status: CommandStatus | None = None, limit: int = 100
    ) -> list[AgentCommand]:
        where = "" if status is None else " AND status = :status"
        return await self._pages(
            AgentCommand,
            "agent_commands",
            f"office_id = :office{where}",
            {"office": office_id, "status": status},
            desc=True,
            limit=max(0, int(limit)),
        )

    async def claim_next_command(
        self,
        office_id: str,
        engine_id: str,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        *,
        skip_types: Sequence[str] = (),
    ) -> AgentCommand | None:
        lease = timedelta(seconds=check_lease(lease_seconds))
        skip = json.dumps(list(skip_types))

        def claim(c: sqlite3.Connection) -> sqlite3.Row | None:
            while True:
                at = now()
                row = c.execute(
                    CLAIM_SQL,
                    {
                        "engine": engine_id,
                        "lease": ts(at + lease),
                        "at": ts(at),
                        "office": office_id,
                        "skip": skip,
                    },
                ).fetchone()
                if row is None:
                    return None
                session = None
                if row["session_id"]:
                    # the same transaction and clock as the claim (semo_claim_next: the same
                    # statement)
                    session = c.execute(
                        SESSION_STATE_SQL, {"session": row["session_id"], "at": ts(at)}
                    ).fetchone()
                state = None if session is None else _decode(session)
                problem = session_claim_problem(
                    row["session_id"], state, engine_id
                ) or claimed_row_problem(_decode(row))
                if problem is None:
                    return row
                # an ended session, one whose engine is gone, or a bad row inserted around
                # insert_command: fail it, and claim the next
                self._finish(c, row["id"], success=False, result=None, error=problem)

        return _model_or_none(AgentCommand, await self._run(claim, write=True))

    async def renew_leases(
        self,
        engine_id: str,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        command_ids: Sequence[str] | None = None,
    ) -> int:
        lease = timedelta(seconds=check_lease(lease_seconds))
        query = (
            "UPDATE agent_commands SET lease_expires_at = ?"
            " WHERE status = 'processing' AND claimed_by = ?"
        )
        args: list[object] = [ts(now() + lease), engine_id]
        if command_ids is not None:
            ids = list(command_ids)
            query += f" AND id IN ({', '.join('?' * len(ids))})" if ids else " AND 0"
            args += ids
        return await self._run(lambda c: c.execute(query, args).rowcount, write=True)

    @staticmethod
    def _finish(
        c: sqlite3.Connection,
        command_id: str,
        *,
        success: bool,
        result: dict[str, Any] | None,
        error: str | None,
    ) -> sqlite3.Row:
        at = ts(now())
        c.execute(
            "UPDATE agent_commands SET status = ?, lease_expires_at = NULL, updated_at = ?"
            " WHERE id = ?",
            ("completed" if success else "failed", at, command_id),
        )
        row = AgentCommandResult(command_id=command_id, success=success, result=result, error=error)
        data = _to_db(row)
        return c.execute(
            _insert_sql("agent_command_results", list(data)) + " RETURNING *", data
        ).fetchone()

    async def complete_command(
        self,
        command_id: str,
        engine_id: str,
        *,
        success: bool,
        result: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> AgentCommandResult:
        def complete(c: sqlite3.Connection) -> sqlite3.Row:
            row = c.execute(
                "SELECT status, claimed_by FROM agent_commands WHERE id = ?", (command_id,)
            ).fetchone()
            if row is None:
                raise NotFound(f"command {command_id} not found")
            if row["status"] in COMMAND_ENDED:
                raise StoreConflict(f"command {command_id} is already {row['status']}")
            if row["status"] != "processing" or row["claimed_by"] != engine_id:
                raise StoreConflict(
                    f"engine {engine_id} does not hold command {command_id} (it is "
                    f"{row['status']}, claimed by {row['claimed_by'] or 'nobody'})"
                )
            return self._finish(c, command_id, success=success, result=result, error=error)

        row = await self._run(
            complete, write=True, duplicate=f"command {command_id} already has a result"
        )
        return _model(AgentCommandResult, row)

    async def recover_expired(self) -> list[AgentCommand]:
        def recover(c: sqlite3.Connection) -> list[sqlite3.Row]:
            at = ts(now())
            expired = c.execute(
                "SELECT * FROM agent_commands WHERE status = 'processing'"
                " AND lease_expires_at < ? ORDER BY created_at, rowid",
                (at,),
            ).fetchall()
            out = []
            for row in expired:
                safe = row["command_type"] in SAFE_TO_REPEAT
                if safe and row["attempts"] < MAX_ATTEMPTS:
                    c.execute(
                        "UPDATE agent_commands SET status = 'pending', claimed_by = NULL,"
                        " lease_expires_at = NULL, updated_at = ? WHERE id = ?",
                        (at, row["id"]),
                    )
                else:
                    reason = recovery_reason(
                        row["claimed_by"],
                        row["command_type"],
                        datetime.fromisoformat(row["lease_expires_at"]),
                        row["attempts"],
                        safe,
                    )
                    self._finish(c, row["id"], success=False, result=None, error=reason)
                out.append(
                    c.execute("SELECT * FROM agent_commands WHERE id = ?", (row["id"],)).fetchone()
                )
            return out

        rows = await self._run(recover, write=True)
        return [AgentCommand.model_validate(_decode(r)) for r in rows]

    async def get_result(self, command_id: str) -> AgentCommandResult | None:
        def read(c: sqlite3.Connection) -> sqlite3.Row | None:
            row = c.execute(
                "SELECT * FROM agent_command_results WHERE command_id = ?", (command_id,)
            ).fetchone()
            if (
                row is None
                and c.execute("SELECT 1 FROM agent_commands WHERE id = ?", (command_id,)).fetchone()
                is None
            ):
                raise NotFound(f"command {command_id} not found")
            return row

        return _model_or_none(AgentCommandResult, await self._run(read))

    # -- engines -----------------------------------------------------------------------------

    async def record_heartbeat(
        self, office_id: str, engine_id: str, *, dead_after: float, starting: bool = False
    ) -> EngineHeartbeat:
        limit = timedelta(seconds=check_heartbeat(engine_id, dead_after))

        def beat(c: sqlite3.Connection) -> sqlite3.Row:
            at = now()
            c.execute(
                """INSERT INTO engines AS e (office_id, engine_id, status, started_at, last_seen,
                                             alive_until, stopped_at)
                   VALUES (:office, :engine, 'running', :at, :at, :until, NULL)
                   ON CONFLICT (office_id, engine_id) DO UPDATE
                      SET status = 'running', last_seen = :at, alive_until = :until,
                          started_at = CASE WHEN :starting THEN :at ELSE e.started_at END,
                          stopped_at = NULL""",
                {
                    "office": office_id,
                    "engine": engine_id,
                    "at": ts(at),
                    "until": ts(at + limit),
                    "starting": int(starting),
                },
            )
            row = self._engine_row(c, office_id, engine_id, at)
            if row is None:  # not after the upsert above, in the same transaction
                raise NotFound(no_heartbeat(office_id, engine_id))
            return row

        row = await self._run(beat, write=True, missing=f"office {office_id} not found")
        return _model(EngineHeartbeat, row)

    @staticmethod
    def _engine_row(
        c: sqlite3.Connection, office_id: str, engine_id: str, at: datetime
    ) -> sqlite3.Row | None:
        return c.execute(
            f"{ENGINE_ROW_SQL} WHERE e.office_id = :office AND e.engine_id = :engine",
            {"office": office_id, "engine": engine_id, "at": ts(at)},
        ).fetchone()

    async def expire_engine(self, office_id: str, engine_id: str) -> bool:
        def expire(c: sqlite3.Connection) -> bool:
            at = ts(now())
            cur = c.execute(
                "UPDATE engines SET alive_until = :at WHERE office_id = :office"
                " AND engine_id = :engine AND status = 'running' AND alive_until > :at",
                {"office": office_id, "engine": engine_id, "at": at},
            )
            return cur.rowcount > 0

        return await self._run(expire, write=True)

    async def mark_engine_stopped(self, office_id: str, engine_id: str) -> EngineHeartbeat:
        def stop(c: sqlite3.Connection) -> sqlite3.Row | None:
            at = now()
            c.execute(
                "UPDATE engines SET status = 'stopped', stopped_at = :at, last_seen = :at"
                " WHERE office_id = :office AND engine_id = :engine",
                {"office": office_id, "engine": engine_id, "at": ts(at)},
            )
            return self._engine_row(c, office_id, engine_id, at)

        row = await self._run(stop, write=True)
        if row is None:
            raise NotFound(no_heartbeat(office_id, engine_id))
        return _model(EngineHeartbeat, row)

    async def end_engine(
        self,
        office_id: str,
        engine_id: str,
        *,
        session_reason: str,
        command_error: str,
        job_reason: str,
        unless_alive: bool = True,
    ) -> EngineEnded:
        session_reason, command_error = no_nul(session_reason), no_nul(command_error)
        job_reason = no_nul(job_reason)

        def end(c: sqlite3.Connection) -> EngineEnded:
            at = ts(now())
            params = {"office": office_id, "engine": engine_id, "at": at}
            alive_sql = engine_id_alive_sql(":office", ":engine")
            if unless_alive and c.execute(f"SELECT {alive_sql}", params).fetchone()[0]:
                return EngineEnded(engine_id=engine_id, dead=False)
            ended = [
                r[0]
                for r in c.execute(
                    """UPDATE agent_sessions
                          SET status = 'terminated', end_reason = :reason,
                              last_activity_at = :at, ended_at = coalesce(ended_at, :at)
                        WHERE office_id = :office AND engine_id = :engine
                          AND status <> 'terminated'
                    RETURNING session_id""",
                    {**params, "reason": session_reason},
                ).fetchall()
            ]
            questions = 0
            for session_id in ended:
                questions += c.execute(
                    "UPDATE user_questions SET status = 'cancelled', cancel_reason = ?,"
                    " cancelled_at = ? WHERE session_id = ? AND status = 'pending'",
                    (session_ended(session_id, session_reason), at, session_id),
                ).rowcount
            commands = [
                r[0]
                for r in c.execute(
                    "SELECT id FROM agent_commands WHERE office_id = :office"
                    " AND status = 'processing' AND claimed_by = :engine"
                    " ORDER BY created_at, rowid",
                    params,
                ).fetchall()
            ]
            for command_id in commands:
                self._finish(c, command_id, success=False, result=None, error=command_error)
            jobs = c.execute(
                """UPDATE jobs
                      SET status = 'failed', failure_reason = :reason, needs_human = 0,
                          updated_at = :at
                    WHERE office_id = :office AND status = 'running'
                      AND (engine_id = :engine
                           OR (engine_id IS NULL
                               AND EXISTS (SELECT 1 FROM agent_sessions s
                                            WHERE s.session_id = jobs.session_id
                                              AND s.engine_id = :engine)))""",
                {**params, "reason": job_reason},
            ).rowcount
            return EngineEnded(
                engine_id=engine_id,
                dead=True,
                sessions_ended=len(ended),
                questions_cancelled=questions,
                commands_failed=len(commands),
                jobs_failed=jobs,
            )

        return await self._run(end, write=True)

    async def list_engines(self, office_id: str) -> list[EngineHeartbeat]:
        return await self._list(
            EngineHeartbeat,
            f"{ENGINE_ROW_SQL} WHERE e.office_id = :office ORDER BY e.started_at, e.engine_id",
            {"office": office_id, "at": ts(now())},
        )

    async def forget_engines(self, office_id: str, *, dead_for: float) -> int:
        seconds = check_dead_for(dead_for)

        def forget(c: sqlite3.Connection) -> int:
            at = now()
            return c.execute(
                f"""DELETE FROM engines AS e
                     WHERE e.office_id = :office AND NOT {ALIVE_SQL}
                       AND (CASE WHEN e.status = 'stopped' THEN e.stopped_at
                                 ELSE e.alive_until END) < :cutoff""",
                {"office": office_id, "at": ts(at), "cutoff": ts(at - timedelta(seconds=seconds))},
            ).rowcount

        return await self._run(forget, write=True)

    # -- questions ---------------------------------------------------------------------------

    async def mark_answer_delivered(self, question_id: str) -> bool:
        def mark(c: sqlite3.Connection) -> bool:
            cur = c.execute(
                "UPDATE user_questions SET answer_delivered_at = ? WHERE id = ?"
                " AND status = 'answered' AND answer_delivered_at IS NULL",
                (ts(now()), question_id),
            )
            return cur.rowcount == 1

        return await self._run(mark, write=True)

    async def _office_rows(self, query: OfficeRows[M]) -> list[M]:
        """See Store._office_rows: one `select` a page (keyset pagination)."""
        model, table, office_id = query.model, query.table, query.office_id
        status, narrow, unset = query.status, query.narrow, query.unset
        where, params = "office_id = :office", {"office": office_id}
        if isinstance(status, str):
            where += " AND status = :status"
            params["status"] = status
        elif status is not None:
            where += " AND status IN (SELECT value FROM json_each(:statuses))"
            params["statuses"] = json.dumps(list(status))
        if narrow is not None:
            where += f" AND {narrow[0]} IN (SELECT value FROM json_each(:narrow))"
            params["narrow"] = json.dumps(narrow[1])
        if unset is not None:
            where += f" AND {unset} IS NULL"
        return await self._pages(model, table, where, params)

    async def _close_question(
        self, question_id: str, changes: dict[str, Any], *, answering: bool
    ) -> UserQuestion:
        """pending -> `changes` (with their status); NotFound or StoreConflict saying why not."""

        def close(c: sqlite3.Connection) -> sqlite3.Row:
            row = c.execute(
                "SELECT status, cancel_reason FROM user_questions WHERE id = ?", (question_id,)
            ).fetchone()
            if row is None:
                raise NotFound(f"no question {question_id}")
            if row["status"] != "pending":
                raise StoreConflict(
                    question_not_pending(
                        question_id, row["status"], row["cancel_reason"], answering=answering
                    )
                )
            sets = ", ".join(f"{k} = :{k}" for k in changes)
            return c.execute(
                f"UPDATE user_questions SET {sets} WHERE id = :id RETURNING *",
                {**changes, "id": question_id},
            ).fetchone()

        return _model(UserQuestion, await self._run(close, write=True))

    async def answer_question(self, question_id: str, answer: str) -> UserQuestion:
        changes = {"status": "answered", "answer": no_nul(answer), "answered_at": ts(now())}
        return await self._close_question(question_id, changes, answering=True)

    async def cancel_question(self, question_id: str, reason: str) -> UserQuestion:
        changes = {
            "status": "cancelled",
            "cancel_reason": no_nul(reason),
            "cancelled_at": ts(now()),
        }
        return await self._close_question(question_id, changes, answering=False)

    # -- invocations, results, jobs -----------------------------------------------------------

    async def update_invocation(
        self, invocation_id: str, *, status: str, error: str | None = None
    ) -> AgentInvocation:
        check_invocation_status(status)

        def update(c: sqlite3.Connection) -> sqlite3.Row:
            row = c.execute(
                "UPDATE agent_invocations SET status = ?, error = ?, updated_at = ?"
                " WHERE id = ? AND status <> 'cancelled' RETURNING *",
                (status, no_nul(error), ts(now()), invocation_id),
            ).fetchone()
            if row is None:
                old = c.execute(
                    "SELECT error FROM agent_invocations WHERE id = ?", (invocation_id,)
                ).fetchone()
                if old is None:
                    raise NotFound(f"no invocation {invocation_id}")
                raise StoreConflict(invocation_cancelled(invocation_id, old["error"]))
            return row

        return _model(AgentInvocation, await self._run(update, write=True))

    async def mark_result_delivered(self, result_id: str) -> AgentResult:
        def deliver(c: sqlite3.Connection) -> sqlite3.Row:
            row = c.execute(
                "SELECT status FROM agent_results WHERE id = ?", (result_id,)
            ).fetchone()
            if row is None:
                raise NotFound(f"no result {result_id}")
            if row["status"] != "pending":
                raise StoreConflict(f"result {result_id} is already {row['status']}")
            return c.execute(
                "UPDATE agent_results SET status = 'delivered', delivered_at = ?"
                " WHERE id = ? RETURNING *",
                (ts(now()), result_id),
            ).fetchone()

        return _model(AgentResult, await self._run(deliver, write=True))

    async def _submit_job(self, job: Job, command: AgentCommand, entry: JobEntry) -> AgentCommand:
        def submit(c: sqlite3.Connection) -> sqlite3.Row:
            data = _to_db(job)
            c.execute(_insert_sql("jobs", list(data)), data)
            data = _to_db(command)
            row = c.execute(_insert_sql("agent_commands", list(data)) + " RETURNING *", data)
            written = row.fetchone()
            _write_entry(c, entry_of_update(job, entry))
            return written

        row = await self._run(
            submit,
            write=True,
            missing=f"office {job.office_id} not found",
            duplicate=f"job {job.id} already exists",
        )
        return _model(AgentCommand, row)

    async def update_job(
        self, job_id: str, *, entry: JobEntry | None = None, **changes: Any
    ) -> Job:
        def update(c: sqlite3.Connection) -> sqlite3.Row:
            row = c.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None:
                raise NotFound(f"no job {job_id}")
            job = updated_job(Job.model_validate(_decode(row)), changes, now())
            data = _to_db(job)
            sets = ", ".join(f"{k} = :{k}" for k in data if k not in ("id", "created_at"))
            row = c.execute(f"UPDATE jobs SET {sets} WHERE id = :id RETURNING *", data).fetchone()
            if entry is not None:
                _write_entry(c, entry_of_update(job, entry))
            return row

        return _model(Job, await self._run(update, write=True))

    async def request_job_cancel(self, job_id: str, reason: str) -> Job:
        def cancel(c: sqlite3.Connection) -> sqlite3.Row:
            row = c.execute(
                "UPDATE jobs SET status = CASE WHEN status = 'pending' THEN 'failed'"
                " ELSE status END, failure_reason = CASE WHEN status = 'pending'"
                " THEN 'cancelled: ' || :reason ELSE failure_reason END,"
                " cancel_reason = :reason, updated_at = :at"
                " WHERE id = :id AND status IN ('pending', 'running') AND cancel_reason IS NULL"
                " RETURNING *",
                {"reason": no_nul(reason), "at": ts(now()), "id": job_id},
            ).fetchone()
            if row is None:
                old = c.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
                if old is None:
                    raise NotFound(f"no job {job_id}")
                raise StoreConflict(job_not_cancellable(Job.model_validate(_decode(old))))
            _write_entry(c, cancel_step(Job.model_validate(_decode(row)), no_nul(reason)))
            return row

        return _model(Job, await self._run(cancel, write=True))

    async def cancel_job_work(self, job_id: str, reason: str) -> JobWorkCancelled:
        def cancel(c: sqlite3.Connection) -> JobWorkCancelled:
            at, why = ts(now()), no_nul(reason)
            invocations = c.execute(
                "UPDATE agent_invocations SET status = 'cancelled', error = ?, updated_at = ?"
                " WHERE job_id = ? AND status IN ('pending', 'running') RETURNING *",
                (why, at, job_id),
            ).fetchall()
            results = c.execute(
                "UPDATE agent_results SET status = 'cancelled', cancel_reason = ?"
                " WHERE job_id = ? AND status = 'pending' RETURNING *",
                (why, job_id),
            ).fetchall()
            return JobWorkCancelled(
                invocations=[AgentInvocation.model_validate(_decode(r)) for r in invocations],
                results=[AgentResult.model_validate(_decode(r)) for r in results],
            )

        return await self._run(cancel, write=True)

    async def retry_job(
        self, job_id: str, *, engine_id: str, attempts: int, failed_reason: str, reason: str
    ) -> AgentCommand | None:
        def retry(c: sqlite3.Connection) -> sqlite3.Row | None:
            at = ts(now())
            job = c.execute(
                "UPDATE jobs SET status = 'pending', engine_id = NULL, failure_reason = ?,"
                " needs_human = 0, updated_at = ? WHERE id = ? AND status = 'failed'"
                " AND engine_id = ? AND attempts = ? AND failure_reason = ?"
                " AND cancel_reason IS NULL RETURNING office_id",
                (no_nul(reason), at, job_id, engine_id, attempts, failed_reason),
            ).fetchone()
            if job is None:
                return None
            command = AgentCommand(
                office_id=job["office_id"], command_type="run_job", payload={"job_id": job_id}
            )
            data = _to_db(command)
            return c.execute(
                _insert_sql("agent_commands", list(data)) + " RETURNING *", data
            ).fetchone()

        return _model_or_none(AgentCommand, await self._run(retry, write=True))

    async def _recover_job(self, recovery: JobRecovery) -> Job | None:
        job_id, engine_id, attempts = recovery.job_id, recovery.engine_id, recovery.attempts
        why, retry = recovery.reason, recovery.retry_reason

        def recover(c: sqlite3.Connection) -> sqlite3.Row | None:
            at = ts(now())
            job = c.execute(
                "SELECT office_id, cancel_reason FROM jobs WHERE id = ? AND status = 'running'"
                " AND engine_id = ? AND attempts = ?",
                (job_id, engine_id, attempts),
            ).fetchone()
            if job is None:
                return None
            params = {"office": job["office_id"], "engine": engine_id, "at": at}
            alive_sql = engine_id_alive_sql(":office", ":engine")
            if recovery.unless_alive and c.execute(f"SELECT {alive_sql}", params).fetchone()[0]:
                return None
            c.execute(
                "UPDATE agent_invocations SET status = 'cancelled', error = ?, updated_at = ?"
                " WHERE job_id = ? AND status IN ('pending', 'running')",
                (why, at, job_id),
            )
            c.execute(
                "UPDATE agent_results SET status = 'cancelled', cancel_reason = ?"
                " WHERE job_id = ? AND status = 'pending'",
                (why, job_id),
            )
            if retry is not None and job["cancel_reason"] is None:
                command = AgentCommand(
                    office_id=job["office_id"], command_type="run_job", payload={"job_id": job_id}
                )
                data = _to_db(command)
                c.execute(_insert_sql("agent_commands", list(data)), data)
                return c.execute(
                    "UPDATE jobs SET status = 'pending', engine_id = NULL, failure_reason = ?,"
                    " needs_human = 0, updated_at = ? WHERE id = ? RETURNING *",
                    (retry, at, job_id),
                ).fetchone()
            return c.execute(
                "UPDATE jobs SET status = 'failed', failure_reason = ?, needs_human = 0,"
                " updated_at = ? WHERE id = ? RETURNING *",
                (why, at, job_id),
            ).fetchone()

        def recover_and_record(c: sqlite3.Connection) -> sqlite3.Row | None:
            row = recover(c)
            if row is not None and recovery.timeline:
                for step in recovery_steps(Job.model_validate(_decode(row)), why, retry):
                    _write_entry(c, step)
            return row

        return _model_or_none(Job, await self._run(recover_and_record, write=True))

    async def _take_over_job(self, takeover: JobTakeover) -> Job | None:
        job_id, entry = takeover.job_id, takeover.entry

        def take(c: sqlite3.Connection) -> sqlite3.Row | None:
            row = c.execute(
                "UPDATE jobs SET engine_id = ?, updated_at = ? WHERE id = ?"
                " AND status = 'running' AND engine_id = ? AND attempts = ?"
                " AND cancel_reason IS NULL RETURNING *",
                (takeover.to_engine, ts(now()), job_id, takeover.from_engine, takeover.attempts),
            ).fetchone()
            if row is not None and entry is not None:
                _write_entry(c, entry_of_update(Job.model_validate(_decode(row)), entry))
            return row

        return _model_or_none(Job, await self._run(take, write=True))

    async def _start_job(self, job_id: str, engine_id: str, entry: JobEntry | None) -> Job | None:
        def start(c: sqlite3.Connection) -> sqlite3.Row | None:
            row = c.execute(
                "UPDATE jobs SET status = 'running', engine_id = ?, failure_reason = NULL,"
                " needs_human = 0, updated_at = ? WHERE id = ? AND status = 'pending'"
                " RETURNING *",
                (engine_id, ts(now()), job_id),
            ).fetchone()
            if row is not None and entry is not None:
                _write_entry(c, entry_of_update(Job.model_validate(_decode(row)), entry))
            return row

        return _model_or_none(Job, await self._run(start, write=True))

    async def _requeue_job(self, job_id: str, command_id: str, reason: str) -> AgentCommand | None:
        def requeue(c: sqlite3.Connection) -> sqlite3.Row | None:
            row = c.execute(
                "SELECT * FROM jobs WHERE id = ? AND status = 'pending'", (job_id,)
            ).fetchone()
            if row is None:
                return None
            job = Job.model_validate(_decode(row))
            live = c.execute(
                "SELECT 1 FROM agent_commands WHERE office_id = ? AND command_type = 'run_job'"
                " AND status IN ('pending', 'processing')"
                " AND json_extract(payload, '$.job_id') = ?",
                (job.office_id, job_id),
            ).fetchone()
            if live is not None:
                return None
            command = AgentCommand(
                id=command_id,
                office_id=job.office_id,
                command_type="run_job",
                payload={"job_id": job_id},
            )
            data = _to_db(command)
            written = c.execute(
                _insert_sql("agent_commands", list(data)) + " RETURNING *", data
            ).fetchone()
            step = JobEntry(
                job_id=job_id,
                office_id=job.office_id,
                step="requeued",
                detail=reason,
                ref_id=command_id,
            )
            _write_entry(c, entry_of_update(job, step))
            return written

        return _model_or_none(AgentCommand, await self._run(requeue, write=True))

    async def add_job_entry(self, entry: JobEntry) -> JobEntry:
        row = await self._run(
            lambda c: _write_entry(c, entry),
            write=True,
            missing=f"no job {entry.job_id} in office {entry.office_id}",
        )
        return _model(JobEntry, row)

    async def list_job_entries(self, job_id: str, *, after: int = 0) -> list[JobEntry]:
        return await self._pages(
            JobEntry,
            "job_events",
            "job_id = :job AND id > :after",
            {"job": job_id, "after": after},
            ("id",),
        )

    # -- wake-ups ----------------------------------------------------------------------------

    def _poll(self) -> dict[str, int]:
        """On the watcher thread: the wake-up counters, re-read only when data_version moved."""
        conn = self._watch_conn
        if conn is None:
            raise sqlite3.ProgrammingError("the store is closed")
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        if version != self._watch_version:
            self._watch_version = version
            self._watch_seqs = dict(conn.execute("SELECT office_id, seq FROM semo_wakeups"))
        return self._watch_seqs

    async def wait_for_change(self, office_id: str, timeout: float) -> bool:
        """True when a command was inserted or re-queued, a result written or a question
        answered for the office since the store opened or the last call that returned True."""
        watcher = self._watcher
        if watcher is None or self._watch_conn is None:
            raise StoreError("the sqlite store is not open (use `async with store:`)")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout)
        poll = functools.partial(loop.run_in_executor, watcher, self._poll)
        while True:
            try:
                seqs = await poll()
            except sqlite3.Error as error:
                raise StoreUnavailable(f"sqlite store {self.path}: {error}") from None
            current = seqs.get(office_id, 0)
            if current != self._seen.get(office_id, 0):
                self._seen[office_id] = current
                return True
            left = deadline - loop.time()
            if left <= 0:
                return False
            await asyncio.sleep(min(self.poll_interval, left))
