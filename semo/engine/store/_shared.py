"""Rules every backend applies the same way (validation, job updates, wording of reasons)."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar, get_args

from pydantic import ValidationError

from semo.engine.store.base import StoreError, check_entry_of
from semo.engine.store.literals import is_command_type
from semo.engine.store.models import (
    MAX_PAYLOAD_BYTES,
    AgentCommand,
    InvalidCommand,
    Job,
    JobEntry,
    JobStatus,
    SessionStatus,
    validate_command,
    validation_problems,
)

#: A command safe to repeat is re-queued after an expired lease at most until it has been
#: claimed this many times; then it fails (a command that kills every engine must not loop).
MAX_ATTEMPTS = 5
#: how long after the upgrade to heartbeats (migration 0003; sqlite: schema version 3) an engine
#: without a heartbeat row still counts as alive (and the limit of the rows 0003 wrote for the
#: engines that then held sessions, claims or jobs): an engine of an older semo still running
#: has this long to be restarted with this one, and one that had died is found this long after
#: the upgrade. Postgres and Supabase count it from `semo_migrations.applied_at` of
#: `HEARTBEATS_MIGRATION`; sqlite from the time it recorded when it upgraded the file.
LEGACY_GRACE_SECONDS = 3600.0
#: the migration that introduced heartbeats (see LEGACY_GRACE_SECONDS)
HEARTBEATS_MIGRATION = "0003_engine_heartbeats.sql"
#: heartbeat rows of engines dead for this long are deleted (on an engine's start)
FORGET_ENGINES_AFTER = 7 * 86_400.0

RowT = TypeVar("RowT", bound=Mapping[str, Any])

SESSION_STATUSES: tuple[str, ...] = get_args(SessionStatus)
#: Fields `update_job` may change (id, office_id and created_at are fixed; updated_at is set).
JOB_FIELDS = frozenset(Job.model_fields) - {"id", "office_id", "created_at", "updated_at"}


def utc(value: datetime) -> datetime:
    """An aware UTC datetime (naive values are taken to be UTC already)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def new_command(
    office_id: str, command_type: str, payload: dict[str, Any] | None, session_id: str | None
) -> AgentCommand:
    """The command to store, or InvalidCommand saying what is wrong."""
    if payload is None:
        payload = {}
    if not isinstance(payload, dict):
        raise InvalidCommand(f"the payload must be a JSON object, not {type(payload).__name__}")
    validate_command(command_type, payload, session_id)
    try:
        size = len(json.dumps(payload, ensure_ascii=False).encode())
    except (TypeError, ValueError) as error:
        raise InvalidCommand(f"the payload is not JSON-serialisable: {error}") from None
    if size > MAX_PAYLOAD_BYTES:
        raise InvalidCommand(f"the payload is {size} bytes; the limit is {MAX_PAYLOAD_BYTES} bytes")
    if not is_command_type(command_type):  # validate_command refused it already
        raise InvalidCommand(f"unknown command type {command_type!r}")
    return AgentCommand(
        office_id=office_id, command_type=command_type, payload=payload, session_id=session_id
    )


def claimed_row_problem(row: dict[str, Any]) -> str | None:
    """Why a claimed row cannot run (it was inserted around `insert_command`), or None."""
    payload = row.get("payload")
    if not isinstance(payload, dict):
        return f"rejected: the payload must be a JSON object, not {type(payload).__name__}"
    try:
        validate_command(row.get("command_type") or "", payload, row.get("session_id"))
    except InvalidCommand as error:
        return f"rejected: {error}"
    return None


def session_ended(session_id: str, end_reason: str | None) -> str:
    """`session X has ended: <why>`, the reason a command of an ended session fails at claim
    and the cancel reason of the session's pending questions."""
    return f"session {session_id} has ended" + (f": {end_reason}" if end_reason else "")


def ended_session_problem(session_id: str | None, session: Mapping[str, Any] | None) -> str | None:
    """Why a claimed command must not run because its session has ended (`session`: the
    session's row, or None when the store has none), or None."""
    if not session_id or session is None or session.get("status") != "terminated":
        return None
    return f"{session_ended(session_id, session.get('end_reason'))}; the command was not run"


def when(value: datetime | str | None) -> str:
    """A timestamp for a message (ISO-8601 UTC), from a datetime or a row's text; "?" if none."""
    if value is None:
        return "?"
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return value
        return utc(parsed).isoformat()
    return utc(value).isoformat()


def engine_silence(
    status: str | None, last_seen: datetime | str | None, stopped_at: datetime | str | None
) -> str:
    """What became of an engine that no longer counts as alive, from its heartbeat row (status,
    last_seen, stopped_at; status None: it has no row)."""
    if status is None:
        return "never recorded a heartbeat (an engine of an older semo, or a row written by hand)"
    if status == "stopped":
        return f"stopped at {when(stopped_at)}"
    return f"stopped answering (last seen {when(last_seen)})"


def _owned_elsewhere(session: Mapping[str, Any] | None, engine_id: str) -> bool:
    """Whether `session` (a session state row) is live and recorded to run on another engine."""
    if session is None or session.get("status") == "terminated":
        return False
    owner = session.get("engine_id")
    return bool(owner) and owner != engine_id


def silent_owner_problem(
    session_id: str | None, session: Mapping[str, Any] | None, engine_id: str
) -> str | None:
    """Why engine `engine_id` must not run a command it claimed because the command's live
    session belongs to another engine that is no longer alive (its heartbeat ran out, it
    stopped, or it never recorded one), or None. `session` is the session's state row
    (`semo_session_state`: status, end_reason, engine_id and its heartbeat's engine_status,
    engine_last_seen, engine_stopped_at, engine_alive)."""
    if not session_id or session is None or not _owned_elsewhere(session, engine_id):
        return None
    if session.get("engine_alive"):
        return None
    silence = engine_silence(
        session.get("engine_status"),
        session.get("engine_last_seen"),
        session.get("engine_stopped_at"),
    )
    owner = session["engine_id"]
    return f"session {session_id}'s engine {owner} {silence}; the command was not run"


def session_claim_problem(
    session_id: str | None, session: Mapping[str, Any] | None, engine_id: str
) -> str | None:
    """Why a command just claimed by `engine_id` must be failed at once instead of run because
    of its session (it has ended, or its engine is no longer alive), or None. `session` is the
    state row of the command's session (None when it has none, or the store does not know it),
    read in the same transaction as the claim. The sqlite backend's twin of what
    `semo_claim_next` (migrations/0004) does on the server."""
    return ended_session_problem(session_id, session) or silent_owner_problem(
        session_id, session, engine_id
    )


async def claim_runnable(
    claim_one: Callable[[], Awaitable[RowT | None]],
    reject: Callable[[RowT, str], Awaitable[object]],
) -> RowT | None:
    """The claim loop of the backends whose claims run in the database (`semo_claim_next`):
    `claim_one()` claims the next command the engine may take (the database has already failed
    those of ended sessions and of engines that are not alive), or returns None when there is
    none; a claimed row that fails its model (inserted around `insert_command`) is failed with
    `reject(row, "rejected: ...")` and the next one claimed. Returns the row to run, or None."""
    while True:
        row = await claim_one()
        if row is None:
            return None
        problem = claimed_row_problem(dict(row))
        if problem is None:
            return row
        await reject(row, problem)


def already_ended(session_id: str, end_reason: str | None) -> str:
    """Why a session that has ended cannot be ended again (StoreConflict)."""
    why = f" ({end_reason})" if end_reason else ""
    return f"session {session_id} has already ended{why}"


def question_not_pending(
    question_id: str, status: str, cancel_reason: str | None, *, answering: bool
) -> str:
    """Why question `question_id` cannot be answered (`answering`) or cancelled: its status."""
    text = f"question {question_id} is already {status}"
    if status == "cancelled":
        if cancel_reason:
            text += f" ({cancel_reason})"
        if answering:
            text += "; it can no longer be answered"
    return text


def recovery_reason(
    claimed_by: str | None, command_type: str, expired: datetime | None, attempts: int, safe: bool
) -> str:
    when = utc(expired).isoformat() if expired else "?"
    head = (
        f"engine {claimed_by} stopped renewing its lease on this {command_type} command "
        f"(expired {when})"
    )
    if safe:
        return f"{head}; given up after {attempts} attempts"
    return f"{head}; {command_type} is not safe to repeat, so it was not run again"


def check_heartbeat(engine_id: str, dead_after: float) -> float:
    """The limit after which an engine that stops beating counts as dead (ValueError)."""
    if not isinstance(engine_id, str) or not engine_id:
        raise ValueError(f"an engine id must be a non-empty string, not {engine_id!r}")
    limit = float(dead_after)
    if not limit > 0:
        raise ValueError(f"dead_after must be positive, not {dead_after!r}")
    return limit


def check_dead_for(dead_for: float) -> float:
    """How long an engine must have been dead for its row to be forgotten (ValueError)."""
    seconds = float(dead_for)
    if not seconds >= 0:
        raise ValueError(f"dead_for must be zero or more seconds, not {dead_for!r}")
    return seconds


def no_heartbeat(office_id: str, engine_id: str) -> str:
    return f"engine {engine_id} has no heartbeat in office {office_id}"


def check_lease(lease_seconds: float) -> float:
    lease = float(lease_seconds)
    if not lease > 0:
        raise ValueError(f"lease_seconds must be positive, not {lease_seconds!r}")
    return lease


def check_session_status(status: str) -> None:
    if status not in SESSION_STATUSES:
        raise StoreError(
            f"unknown session status {status!r} (known: {', '.join(SESSION_STATUSES)})"
        )


def invocation_cancelled(invocation_id: str, reason: str | None) -> str:
    """Why an invocation cannot change any more (it was cancelled with its job's work)."""
    return f"invocation {invocation_id} was cancelled ({reason or 'no reason recorded'})"


def job_not_cancellable(job: Job) -> str:
    """Why `job` cannot be cancelled (it has ended, or a cancel was asked for already)."""
    if job.status in ("pending", "running"):
        return f"job {job.id} is being cancelled already ({job.cancel_reason})"
    why = f": {job.failure_reason}" if job.failure_reason else ""
    return f"job {job.id} has ended ({job.status}{why}); there is nothing to cancel"


def job_step(
    job: Job, step: str, detail: str | None, *, status: JobStatus | None = None
) -> JobEntry:
    """A timeline entry about `job` as it is now (its status unless `status` is given)."""
    return JobEntry(
        job_id=job.id,
        office_id=job.office_id,
        step=step,
        status=status or job.status,
        attempts=job.attempts,
        session_id=job.session_id,
        agent_id=job.agent_id,
        detail=detail or "",
    )


def entry_of_update(job: Job, entry: JobEntry) -> JobEntry:
    """`entry`, written with the update that made `job` (`update_job(entry=...)`): the job's
    office, status and attempts, its session and agent unless the entry names others."""
    check_entry_of(job.id, entry)
    return entry.model_copy(
        update={
            "office_id": job.office_id,
            "status": job.status,
            "attempts": job.attempts,
            "session_id": entry.session_id or job.session_id,
            "agent_id": entry.agent_id or job.agent_id,
        }
    )


def cancel_step(job: Job, reason: str) -> JobEntry:
    """The step `request_job_cancel` writes: the pending job failed, or the cancel asked for."""
    if job.status == "failed":
        return job_step(job, "failed", job.failure_reason)
    return job_step(job, "cancel_requested", reason)


def recovery_steps(job: Job, reason: str, retry_reason: str | None) -> list[JobEntry]:
    """The steps `recover_job(timeline=True)` writes for `job` as it recovered it: engine_died,
    then retry, or failed (not for a job whose cancel was asked for: its cancel says why)."""
    steps = [job_step(job, "engine_died", reason, status="failed")]
    if job.status == "pending":
        steps.append(job_step(job, "retry", retry_reason))
    elif job.cancel_reason is None:
        steps.append(job_step(job, "failed", f"{reason} (attempt {job.attempts}, no retry left)"))
    return steps


def updated_job(job: Job, changes: dict[str, Any], at: datetime) -> Job:
    """`job` with `changes` applied and validated (StoreError saying what is wrong)."""
    unknown = sorted(set(changes) - JOB_FIELDS)
    if unknown:
        raise StoreError(
            f"cannot update job {job.id}: unknown or fixed field(s) {', '.join(unknown)} "
            f"(can change: {', '.join(sorted(JOB_FIELDS))})"
        )
    data = job.model_dump()
    data.update(changes)
    data["updated_at"] = at
    try:
        return Job.model_validate(data)
    except ValidationError as error:
        problems = validation_problems(error)
        raise StoreError(f"cannot update job {job.id}: {problems}") from None


# greedy up to the last "@": an unencoded "@" in the password must not leak its tail
_URL_PASSWORD = re.compile(r"(?P<head>[a-z][a-z0-9+.-]*://[^:/@?#\s]*):\S*@", re.I)
_QUERY_PASSWORD = re.compile(r"(?P<head>[?&]password=)[^&#\s]*", re.I)
_KV_PASSWORD = re.compile(r"(?P<head>\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.I)


def redact_dsn(dsn: str) -> str:
    """The DSN (URL or key=value form) with any password replaced by ***."""
    text = _URL_PASSWORD.sub(r"\g<head>:***@", dsn)
    text = _QUERY_PASSWORD.sub(r"\g<head>***", text)
    if "://" not in text:
        text = _KV_PASSWORD.sub(r"\g<head>***", text)
    return text
