"""The async Store interface every backend implements (sqlite, postgres, supabase).

How it works: docs/STORE.md, "The Store interface's guarantees".
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast, get_args

from semo.engine.store.models import (
    Agent,
    AgentCommand,
    AgentCommandResult,
    AgentInvocation,
    AgentResult,
    AgentSession,
    CommandStatus,
    EngineEnded,
    EngineHeartbeat,
    InvocationStatus,
    Job,
    JobEntry,
    JobStatus,
    JobWorkCancelled,
    Office,
    QuestionStatus,
    Row,
    SessionStatus,
    UserQuestion,
    new_id,
)

M = TypeVar("M", bound=Row)
T = TypeVar("T")

DEFAULT_LEASE_SECONDS = 30.0
#: rows per request of a listing, below Supabase's default "Max rows" (1000)
LIST_PAGE_ROWS = 500
#: what makes an agent one: its role in its office (unique, migrations/0012)
AGENT_KEY = ("office_id", "role")

INVOCATION_STATUSES: tuple[str, ...] = get_args(InvocationStatus)
RESULT_STATUSES = ("pending", "delivered", "cancelled")
JOB_STATUSES: tuple[str, ...] = get_args(JobStatus)


def narrow_by(
    column: str, values: Sequence[str] | None, job_id: str | None
) -> tuple[str, list[str]] | None:
    """The (column, values) a listing is narrowed to: `values` of `column`, or one job's rows."""
    if job_id is not None:
        if values is not None:
            raise StoreError(f"narrow a listing by {column} or by job_id, not both")
        return ("job_id", [job_id])
    return None if values is None else (column, list(values))


def key_columns(key: str | tuple[str, ...]) -> tuple[str, ...]:
    """An upsert's key as a tuple of columns."""
    return (key,) if isinstance(key, str) else key


def upsert_columns(columns: Sequence[str], key: str | tuple[str, ...]) -> list[str]:
    """The columns an upsert on `key` updates: all but the key, `id` and created_at (a row
    found by another key keeps its id)."""
    keep = {*key_columns(key), "id", "created_at"}
    return [c for c in columns if c not in keep]


def no_nul(value: T) -> T:
    """`value` with NUL characters in its strings (and nested dict/list strings) replaced by
    U+FFFD: Postgres text and jsonb cannot hold NUL, and every backend stores the same thing."""
    # _no_nul keeps each value's type (str, dict, list, tuple or as it came), which mypy
    # cannot follow through the isinstance branches
    return cast(T, _no_nul(value))


def _no_nul(value: object) -> object:
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if isinstance(value, dict):
        return {_no_nul(k): _no_nul(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_no_nul(v) for v in value)
    return value


def check_entry_of(job_id: str, entry: JobEntry | None) -> None:
    """A timeline entry to be written with a change of job `job_id` must be that job's."""
    if entry is not None and entry.job_id != job_id:
        raise StoreError(
            f"a timeline entry of job {entry.job_id} cannot be written with job {job_id}"
        )


def check_invocation_status(status: str) -> None:
    if status not in INVOCATION_STATUSES:
        raise StoreError(
            f"unknown invocation status {status!r} (known: {', '.join(INVOCATION_STATUSES)})"
        )


def check_job_status(status: str | None) -> None:
    """A status to list jobs by (None: all)."""
    if status is not None and status not in JOB_STATUSES:
        raise StoreError(f"unknown job status {status!r} (known: {', '.join(JOB_STATUSES)})")


@dataclass(frozen=True)
class OfficeRows(Generic[M]):
    """What a listing reads: the rows of `table` (a name of ours, never input) for the office,
    as `model`; with `status` (or one of them) unless None; with `narrow` = (column of ours,
    non-empty values) only those whose column is one of the values; with `unset` (a column of
    ours) only those where it is null."""

    model: type[M]
    table: str
    office_id: str
    status: str | Sequence[str] | None = None
    narrow: tuple[str, list[str]] | None = None
    unset: str | None = None


@dataclass(frozen=True)
class JobRecovery:
    """A dead engine's job to recover (`Store.recover_job`; the texts NUL-free)."""

    job_id: str
    engine_id: str
    attempts: int
    reason: str
    retry_reason: str | None
    unless_alive: bool
    timeline: bool


@dataclass(frozen=True)
class JobTakeover:
    """A dead engine's job another engine takes over (`Store.take_over_job`)."""

    job_id: str
    from_engine: str
    attempts: int
    to_engine: str
    entry: JobEntry | None


class StoreError(Exception):
    """Base of the store's errors; the message is meant for an operator."""


class NotFound(StoreError):
    pass


class StoreConflict(StoreError):
    """The row is not in a state that allows this (already answered, claim lost, ...)."""


class StoreUnavailable(StoreError):
    """The database cannot be reached; the operation did not happen."""


class StoreBusy(StoreUnavailable):
    """The database (or its pooler) refuses new connections for now ("too many clients"):
    worth waiting for, with backoff."""


class Store(ABC):
    backend: str = "?"

    # -- lifecycle ---------------------------------------------------------------------------

    @abstractmethod
    async def open(self) -> None:
        """Connect (and for sqlite create the schema)."""

    @abstractmethod
    async def close(self) -> None: ...

    async def __aenter__(self) -> Store:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- offices and agents --------------------------------------------------------------------

    async def create_office(self, office: Office) -> Office:
        """Insert `office`; StoreConflict when its id or its name is taken (one office a
        name)."""
        return await self._insert(
            "offices", office, f"office {office.id} or an office named {office.name!r} exists"
        )

    async def ensure_office(self, office: Office) -> Office:
        """The office named `office.name`: the existing one, else `office`, inserted. Engines
        that start at once all get the same office (the name is unique in the store)."""
        for _ in range(3):  # an insert that lost the race finds the winner's row next
            with contextlib.suppress(NotFound):
                return await self._get(Office, "offices", "name", office.name, "office named")
            with contextlib.suppress(StoreConflict):
                return await self.create_office(office)
        raise StoreConflict(f"office {office.name!r} kept appearing and vanishing; try again")

    async def get_office(self, office_id: str) -> Office:
        return await self._get(Office, "offices", "id", office_id, "office")

    @abstractmethod
    async def list_offices(self) -> list[Office]: ...

    async def upsert_agent(self, agent: Agent) -> Agent:
        """The office's agent of `agent.role`, inserted or updated (one agent a role): an
        existing one keeps its id, whatever `agent.id` says."""
        return await self._upsert("agents", AGENT_KEY, agent)

    async def get_agent(self, agent_id: str) -> Agent:
        return await self._get(Agent, "agents", "id", agent_id, "agent")

    async def list_agents(self, office_id: str) -> list[Agent]:
        return await self._listing(Agent, "agents", office_id, None)

    # -- sessions ----------------------------------------------------------------------------

    async def upsert_session(self, session: AgentSession) -> AgentSession:
        return await self._upsert("agent_sessions", "session_id", session)

    async def get_session(self, session_id: str) -> AgentSession:
        return await self._get(AgentSession, "agent_sessions", "session_id", session_id, "session")

    @abstractmethod
    async def list_sessions(
        self, office_id: str, *, include_terminated: bool = False
    ) -> list[AgentSession]: ...

    @abstractmethod
    async def set_session_status(
        self, session_id: str, status: SessionStatus, *, reason: str | None = None
    ) -> AgentSession:
        """Change the session's status. Terminating it records `reason` (and `ended_at`) and
        cancels its pending questions. A terminated session stays as it is: StoreConflict, for
        another status ("... cannot become X") and for ending it again ("session X has
        already ended (<its reason>)"), so its end reason is the first one."""

    # -- commands ----------------------------------------------------------------------------

    @abstractmethod
    async def insert_command(
        self,
        office_id: str,
        command_type: str,
        payload: dict[str, Any] | None = None,
        *,
        session_id: str | None = None,
    ) -> AgentCommand:
        """Validate and insert a pending command (InvalidCommand, NotFound for the office)."""

    async def get_command(self, command_id: str) -> AgentCommand:
        return await self._get(AgentCommand, "agent_commands", "id", command_id, "command")

    @abstractmethod
    async def list_commands(
        self, office_id: str, *, status: CommandStatus | None = None, limit: int = 100
    ) -> list[AgentCommand]:
        """Newest first."""

    @abstractmethod
    async def claim_next_command(
        self,
        office_id: str,
        engine_id: str,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        *,
        skip_types: Sequence[str] = (),
    ) -> AgentCommand | None:
        """Oldest pending command of the office that `engine_id` may run (and whose type is not
        one of `skip_types`: they stay pending, in their place), now `processing` and
        leased to it: one without a session, or whose session is unknown to the store, has no
        engine, or is run by `engine_id`. Commands for live sessions of other engines that are
        alive are left to them; one whose session has ended, or whose session's engine is no
        longer alive (heartbeat run out, stopped, or none recorded), is failed (its one result
        says why) and the next is claimed instead."""

    @abstractmethod
    async def renew_leases(
        self,
        engine_id: str,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        command_ids: Sequence[str] | None = None,
    ) -> int:
        """Extend the leases `engine_id` holds on `command_ids` (None: on every command it
        holds); returns how many. An engine passes the ids it is running, so a claim whose
        answer never reached it is not kept alive by it and expires."""

    @abstractmethod
    async def complete_command(
        self,
        command_id: str,
        engine_id: str,
        *,
        success: bool,
        result: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> AgentCommandResult: ...

    @abstractmethod
    async def recover_expired(self) -> list[AgentCommand]:
        """Requeue or fail commands whose lease expired; returns them in their new state."""

    @abstractmethod
    async def get_result(self, command_id: str) -> AgentCommandResult | None: ...

    # -- engines -----------------------------------------------------------------------------

    @abstractmethod
    async def record_heartbeat(
        self, office_id: str, engine_id: str, *, dead_after: float, starting: bool = False
    ) -> EngineHeartbeat:
        """Engine `engine_id` of the office is alive: `last_seen` now, `alive_until` now plus
        `dead_after` seconds (the database's clock), status running; `starting` also sets
        `started_at` and clears `stopped_at`. NotFound for an unknown office, ValueError for
        an empty engine id or a limit that is not positive."""

    @abstractmethod
    async def mark_engine_stopped(self, office_id: str, engine_id: str) -> EngineHeartbeat:
        """A clean stop: status stopped, `stopped_at` now; the engine no longer counts as alive.
        NotFound when the engine has no heartbeat in the office."""

    @abstractmethod
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
        """End what engine `engine_id` of the office left, in one transaction: its live sessions
        are terminated with `session_reason` (their pending questions cancelled, "session X has
        ended: <reason>"), its in-flight commands failed with `command_error` (one result
        each), its running jobs (and running jobs without an engine whose session it ran)
        failed with `job_reason`. Only rows still in that state are changed (a job done
        meanwhile stays done). With `unless_alive`, nothing is changed while the engine counts
        as alive (its heartbeat, or no row during the upgrade grace), decided in the same
        transaction as the writes (`dead` False in the answer)."""

    @abstractmethod
    async def expire_engine(self, office_id: str, engine_id: str) -> bool:
        """Another engine has ended `engine_id`'s work: its heartbeat runs out now (the
        database's clock), so it shows as dead at once; whether a running, alive row changed.
        An engine that is in fact alive is alive again with its next beat."""

    @abstractmethod
    async def list_engines(self, office_id: str) -> list[EngineHeartbeat]:
        """The office's engines, oldest start first, each with `alive` by the database's clock
        (an unknown office has none)."""

    @abstractmethod
    async def forget_engines(self, office_id: str, *, dead_for: float) -> int:
        """Delete the heartbeat rows of the office's engines that have not been alive for
        `dead_for` seconds (a dead engine's row and no row are treated alike); how many."""

    # -- questions ---------------------------------------------------------------------------

    async def create_question(self, question: UserQuestion) -> UserQuestion:
        return await self._insert(
            "user_questions", question, f"question {question.id} already exists"
        )

    async def get_question(self, question_id: str) -> UserQuestion:
        return await self._get(UserQuestion, "user_questions", "id", question_id, "question")

    async def list_questions(
        self,
        office_id: str,
        *,
        status: QuestionStatus | None = "pending",
        session_ids: Sequence[str] | None = None,
        undelivered: bool = False,
    ) -> list[UserQuestion]:
        """The office's questions (of one status, or all), oldest first; with `session_ids`,
        only those of these sessions (none for an empty list); with `undelivered`, only those
        whose answer was not marked delivered (`mark_answer_delivered`)."""
        narrow = None if session_ids is None else ("session_id", list(session_ids))
        unset = "answer_delivered_at" if undelivered else None
        return await self._listing(
            UserQuestion, "user_questions", office_id, status, narrow, unset=unset
        )

    @abstractmethod
    async def mark_answer_delivered(self, question_id: str) -> bool:
        """Record that the agent took the answer of answered question `question_id` (once:
        True when this call marked it, False when it was marked already or is not answered)."""

    @abstractmethod
    async def answer_question(self, question_id: str, answer: str) -> UserQuestion:
        """pending -> answered (StoreConflict if it is not pending, with the cancel reason of a
        cancelled one)."""

    @abstractmethod
    async def cancel_question(self, question_id: str, reason: str) -> UserQuestion:
        """pending -> cancelled, with `reason` and `cancelled_at` (StoreConflict if it is not
        pending, NotFound)."""

    # -- invocations, results, jobs -----------------------------------------------------------

    async def create_invocation(self, invocation: AgentInvocation) -> AgentInvocation:
        return await self._insert(
            "agent_invocations", invocation, f"invocation {invocation.id} already exists"
        )

    @abstractmethod
    async def update_invocation(
        self, invocation_id: str, *, status: str, error: str | None = None
    ) -> AgentInvocation: ...

    async def list_invocations(
        self,
        office_id: str,
        *,
        statuses: Sequence[str] | None = None,
        ids: Sequence[str] | None = None,
        job_id: str | None = None,
    ) -> list[AgentInvocation]:
        """The office's invocations, oldest first: with `statuses`, only those in one of them;
        with `ids`, only those (an empty list selects none); with `job_id`, only that job's
        (not together with `ids`)."""
        for status in statuses or ():
            check_invocation_status(status)
        narrow = narrow_by("id", ids, job_id)
        wanted = None if statuses is None else list(statuses)
        return await self._listing(AgentInvocation, "agent_invocations", office_id, wanted, narrow)

    async def create_result(self, result: AgentResult) -> AgentResult:
        return await self._insert("agent_results", result, f"result {result.id} already exists")

    @abstractmethod
    async def mark_result_delivered(self, result_id: str) -> AgentResult: ...

    async def list_results(
        self,
        office_id: str,
        *,
        status: str | None = None,
        invocation_ids: Sequence[str] | None = None,
        job_id: str | None = None,
    ) -> list[AgentResult]:
        """The office's results between agents, oldest first: of one status, or all; with
        `invocation_ids`, only the results of these invocations (none for an empty list);
        with `job_id`, only that job's (not together with `invocation_ids`)."""
        if status is not None and status not in RESULT_STATUSES:
            raise StoreError(f"unknown result status {status!r}")
        narrow = narrow_by("invocation_id", invocation_ids, job_id)
        return await self._listing(AgentResult, "agent_results", office_id, status, narrow)

    async def create_job(self, job: Job) -> Job:
        return await self._insert("jobs", job, f"job {job.id} already exists")

    async def submit_job(self, job: Job, entry: JobEntry) -> tuple[Job, AgentCommand]:
        """Insert a pending `job`, the `run_job` command that runs it and its timeline `entry`
        (the `created` step, naming the command in `ref_id`) in one transaction: the job and
        the command. NotFound for an unknown office, StoreConflict for a job id that exists,
        StoreError for an entry of another job."""
        check_entry_of(job.id, entry)
        command = AgentCommand(
            office_id=job.office_id, command_type="run_job", payload={"job_id": job.id}
        )
        step = entry.model_copy(update={"ref_id": command.id})
        return job, await self._submit_job(job, command, step)

    @abstractmethod
    async def _submit_job(self, job: Job, command: AgentCommand, entry: JobEntry) -> AgentCommand:
        """`submit_job` on this backend: the three rows in one transaction; the command."""

    @abstractmethod
    async def update_job(
        self, job_id: str, *, entry: JobEntry | None = None, **changes: Any
    ) -> Job:
        """Change the job's fields (`updated_at` is set); with `entry`, that step goes on the
        job's timeline in the same transaction, with the updated job's status and attempts
        (and its session and agent unless the entry names others): a reader never sees the
        status without the step that says why. NotFound, StoreError for a bad change."""

    async def start_job(
        self, job_id: str, *, engine_id: str, entry: JobEntry | None = None
    ) -> Job | None:
        """A pending job becomes running on `engine_id` (its failure reason and needs_human
        cleared), in one transaction with `entry` on its timeline (as `update_job(entry=)`).
        The job then; None when it is not pending (another engine started it, it was
        cancelled, it ended): a compare-and-set on its status, so that of the engines holding
        a `run_job` command for one job, one runs it."""
        check_entry_of(job_id, entry)
        return await self._start_job(job_id, engine_id, entry)

    @abstractmethod
    async def _start_job(self, job_id: str, engine_id: str, entry: JobEntry | None) -> Job | None:
        """`start_job` on this backend."""

    async def requeue_job(self, job_id: str, *, reason: str) -> AgentCommand | None:
        """In one transaction, a pending job with no `run_job` command pending or processing
        gets a new one and a `requeued` step (`reason`, naming the command in `ref_id`); the
        command. None when the job is not pending (or unknown), or a `run_job` command for it
        is pending or processing: engines requeueing one job at once insert one command."""
        return await self._requeue_job(job_id, new_id(), no_nul(reason))

    @abstractmethod
    async def _requeue_job(self, job_id: str, command_id: str, reason: str) -> AgentCommand | None:
        """`requeue_job` on this backend (the new command's id `command_id`)."""

    async def get_job(self, job_id: str) -> Job:
        return await self._get(Job, "jobs", "id", job_id, "job")

    async def list_jobs(self, office_id: str, *, status: JobStatus | None = None) -> list[Job]:
        """The office's jobs (of one status, or all), oldest first."""
        check_job_status(status)
        return await self._listing(Job, "jobs", office_id, status)

    @abstractmethod
    async def request_job_cancel(self, job_id: str, reason: str) -> Job:
        """An operator cancels a job: a pending one is failed at once ("cancelled: <reason>"),
        a running one gets `cancel_reason` (the engine running it ends it). The step goes on
        the job's timeline in the same transaction (`failed` or `cancel_requested`).
        StoreConflict when it has ended or is being cancelled already, NotFound for an unknown
        job."""

    @abstractmethod
    async def cancel_job_work(self, job_id: str, reason: str) -> JobWorkCancelled:
        """Cancel the job's open work: its pending and running invocations and its pending
        results become `cancelled` (invocations with `error`, results with `cancel_reason` =
        `reason`); returns what was cancelled. Idempotent."""

    @abstractmethod
    async def retry_job(
        self, job_id: str, *, engine_id: str, attempts: int, failed_reason: str, reason: str
    ) -> AgentCommand | None:
        """A job that a dead engine's end failed (status failed, engine `engine_id`, its
        `failure_reason` still `failed_reason`, `attempts` unchanged, no cancel requested)
        goes back to pending with `reason`, and a `run_job` command for it is inserted, in one
        transaction; that command. None when the job is not in that state (another engine
        retried it first, or it ended otherwise)."""

    async def recover_job(
        self,
        job_id: str,
        *,
        engine_id: str,
        attempts: int,
        reason: str,
        retry_reason: str | None,
        unless_alive: bool = True,
        timeline: bool = False,
    ) -> Job | None:
        """A job still running on dead engine `engine_id` (`attempts` unchanged), in one
        transaction: its open work is cancelled with `reason` (as `cancel_job_work`), then it
        goes back to pending with `retry_reason` and a new `run_job` command (when
        `retry_reason` is given and no cancel was requested), else it fails with `reason`;
        with `timeline`, its steps too (`engine_died`, then `retry` or `failed`:
        `_shared.recovery_steps`). The job as it is then; None when it is not in that state
        (another engine recovered it first, it ended otherwise, or, with `unless_alive`, its
        engine is alive)."""
        retry = None if retry_reason is None else no_nul(retry_reason)
        recovery = JobRecovery(
            job_id, engine_id, attempts, no_nul(reason), retry, unless_alive, timeline
        )
        return await self._recover_job(recovery)

    @abstractmethod
    async def _recover_job(self, recovery: JobRecovery) -> Job | None:
        """`recover_job` on this backend."""

    async def take_over_job(
        self,
        job_id: str,
        *,
        from_engine: str,
        attempts: int,
        to_engine: str,
        entry: JobEntry | None = None,
    ) -> Job | None:
        """A job running on `from_engine` (a dead engine) with `attempts` and no cancel asked
        for becomes `to_engine`'s, in one transaction with `entry` on its timeline (as
        `update_job(entry=)`); nothing else changes (its work stays open). The job then; None
        when it is not in that state (another engine recovered or took it, it ended, or a
        cancel was asked for)."""
        check_entry_of(job_id, entry)
        return await self._take_over_job(
            JobTakeover(job_id, from_engine, attempts, to_engine, entry)
        )

    @abstractmethod
    async def _take_over_job(self, takeover: JobTakeover) -> Job | None:
        """`take_over_job` on this backend."""

    @abstractmethod
    async def add_job_entry(self, entry: JobEntry) -> JobEntry:
        """Append a step to a job's timeline (its `id` given by the database)."""

    @abstractmethod
    async def list_job_entries(self, job_id: str, *, after: int = 0) -> list[JobEntry]:
        """The job's timeline steps with an id above `after`, in order."""

    # -- rows (every backend's primitives) -------------------------------------------------------

    @abstractmethod
    async def _insert(self, table: str, model: M, duplicate: str) -> M:
        """Insert `model` into `table` (a name of ours); StoreConflict(`duplicate`) when its
        key exists, NotFound when its office does not."""

    @abstractmethod
    async def _upsert(self, table: str, key: str | tuple[str, ...], model: M) -> M:
        """Insert `model`, or update the row with its `key` (a column or several, unique):
        every column but the key, `id` and created_at (`upsert_columns`)."""

    @abstractmethod
    async def _get(self, cls: type[M], table: str, key: str, value: str, what: str) -> M:
        """The row of `table` whose `key` is `value`; NotFound ("no <what> <value>")."""

    # -- listings (every backend's, over its `_office_rows`) -----------------------------------

    async def _listing(
        self,
        model: type[M],
        table: str,
        office_id: str,
        status: str | Sequence[str] | None,
        narrow: tuple[str, list[str]] | None = None,
        *,
        unset: str | None = None,
    ) -> list[M]:
        """The rows `OfficeRows` describes, without a request when a list selects nothing."""
        if not isinstance(status, str) and status is not None and not status:
            return []
        if narrow is not None and not narrow[1]:
            return []
        return await self._office_rows(OfficeRows(model, table, office_id, status, narrow, unset))

    @abstractmethod
    async def _office_rows(self, query: OfficeRows[M]) -> list[M]:
        """The rows `query` describes, oldest first, read page by page."""

    # -- wake-ups ----------------------------------------------------------------------------

    @abstractmethod
    async def wait_for_change(self, office_id: str, timeout: float) -> bool:
        """True when something may have changed for the office (a hint), False on timeout."""

    # -- broadcasts --------------------------------------------------------------------------

    async def publish_event(self, office_id: str, event: str, payload: dict[str, Any]) -> bool:
        """Broadcast `payload` (a JSON-able dict) as `event` to whoever watches the office, best
        effort: True when it was sent, False when it was not (never raises). Only backends with
        a broadcast channel send anything (supabase: Realtime); the others return False."""
        return False
