"""What an engine does about what dead engines left behind: on start, and periodically.

An engine that died (SIGKILL, power loss) leaves `agent_sessions` rows that say a session is
alive, `agent_commands` rows it had claimed, `jobs` it was running, and questions its sessions
asked. Two passes find dead engines and clean up after them, the same way:

How it works: docs/OPERATIONS.md, "Reconciling what dead engines left".
"""

from __future__ import annotations

import logging
import os
import socket
import sys

from pydantic import BaseModel

from semo.engine.routing.job_recovery import recover_jobs, running_jobs_of
from semo.engine.runtime import pid_alive
from semo.engine.store._shared import FORGET_ENGINES_AFTER, engine_silence, session_ended
from semo.engine.store.base import NotFound, Store, StoreConflict, StoreError, StoreUnavailable
from semo.engine.store.models import AgentSession, EngineHeartbeat, Job

log = logging.getLogger("semo.engine")


class ReconcileReport(BaseModel):
    dead_engines: list[str] = []
    sessions_ended: int = 0
    commands_failed: int = 0
    commands_recovered: int = 0
    jobs_failed: int = 0
    jobs_requeued: int = 0
    questions_cancelled: int = 0
    engines_forgotten: int = 0

    def describe(self) -> str:
        counts = (
            self.sessions_ended,
            self.commands_failed,
            self.commands_recovered,
            self.jobs_failed,
            self.questions_cancelled,
        )
        if not any(counts):
            return "nothing left over by dead engines"
        return (
            f"{self.sessions_ended} session(s) marked terminated, {self.commands_failed} "
            f"in-flight command(s) failed, {self.commands_recovered} expired lease(s) recovered, "
            f"{self.jobs_failed} running job(s) failed, {self.questions_cancelled} pending "
            f"question(s) cancelled (dead engines: {', '.join(self.dead_engines) or 'none'})"
        )


def is_dead_run(engine_id: str, me: str, host: str | None = None) -> bool:
    """Whether `engine_id` names an earlier run of this engine that is certainly not running."""
    if engine_id == me:
        return True
    prefix = f"{host or socket.gethostname()}-"
    if not engine_id.startswith(prefix):
        return False
    pid = engine_id[len(prefix) :]
    return pid.isdigit() and int(pid) != os.getpid() and not pid_alive(int(pid))


class DeadRuns:
    """Which engine ids are certainly dead runs, as seen by engine `me` on start (remembered)."""

    #: whether the store must check that the engine is still not alive when it writes (the
    #: runs found here are dead whatever their heartbeat says)
    unless_alive = False

    def __init__(self, me: str) -> None:
        self.me = me
        self.found: set[str] = set()
        #: engines of this machine whose process is gone, while their heartbeat still runs:
        #: their row is expired first, so that the store's check agrees that they are dead
        self.gone: set[str] = set()

    def __call__(self, engine_id: str | None) -> bool:
        if not engine_id:
            return False
        if engine_id in self.found:
            return True
        if is_dead_run(engine_id, self.me):
            self.found.add(engine_id)
            return True
        return False

    def what(self, engine_id: str) -> str:
        """What became of dead engine `engine_id`, for the reasons written."""
        return "stopped"

    def found_by(self) -> str:
        return f"found by {self.me} on start"


class SilentEngines(DeadRuns):
    """Which engine ids are not alive by their heartbeat, as seen by engine `me` (never itself):
    their heartbeat ran out, they stopped, or they have none (`heartbeats`: the office's rows,
    read once). Only candidates: the store ends what one left only if it is still not alive
    when it writes (`unless_alive`)."""

    unless_alive = True

    def __init__(
        self, me: str, heartbeats: list[EngineHeartbeat], *, judge_silence: bool = True
    ) -> None:
        super().__init__(me)
        self.heartbeats = {row.engine_id: row for row in heartbeats}
        #: whether silence counts (else only the engines of this machine whose process is gone)
        self.judge_silence = judge_silence

    def __call__(self, engine_id: str | None) -> bool:
        if not engine_id or engine_id == self.me:
            return False
        row = self.heartbeats.get(engine_id)
        if row is not None and row.alive:
            # alive by its heartbeat: dead only if it ran here and its process is gone
            if not is_dead_run(engine_id, self.me):
                return False
            self.gone.add(engine_id)
        elif not self.judge_silence:
            return False
        self.found.add(engine_id)
        return True

    def what(self, engine_id: str) -> str:
        if engine_id in self.gone:
            return "exited (its process is gone, on this machine)"
        row = self.heartbeats.get(engine_id)
        if row is None:
            return engine_silence(None, None, None)
        return engine_silence(row.status, row.last_seen, row.stopped_at)

    def found_by(self) -> str:
        return f"found by {self.me}"


async def reconcile(store: Store, office_id: str, me: str) -> ReconcileReport:
    """On start: end what the certainly dead runs (`DeadRuns`) left, recover expired leases,
    and forget the heartbeat rows of engines dead for `FORGET_ENGINES_AFTER` seconds."""
    report = await end_dead_engines(store, office_id, DeadRuns(me))
    report.commands_recovered = len(await store.recover_expired())
    report.engines_forgotten = await store.forget_engines(office_id, dead_for=FORGET_ENGINES_AFTER)
    return report


async def end_silent_engines(
    store: Store, office_id: str, me: str, *, heartbeats: bool = True
) -> ReconcileReport:
    """Periodically: end what the engines of this machine whose process is gone left, and,
    with `heartbeats`, what the engines that are not alive by their heartbeat left (on any
    host): pass it only while this engine's own heartbeat is steady (`Heartbeat.steady`)."""
    rows = await store.list_engines(office_id)
    dead = SilentEngines(me, rows, judge_silence=heartbeats)
    return await end_dead_engines(store, office_id, dead)


async def end_dead_engines(store: Store, office_id: str, dead: DeadRuns) -> ReconcileReport:
    """End what the engines `dead` says are dead left (their sessions, with their pending
    questions, in-flight commands and running jobs: one `Store.end_engine` per engine), then
    cancel the pending questions every other ended session left."""
    report = ReconcileReport()
    for engine_id in await _holders(store, office_id):
        if not dead(engine_id):
            continue
        try:
            await _end_engine(store, office_id, dead, engine_id, report)
        except StoreUnavailable:
            raise
        except StoreError as error:  # one engine's rows never stop the pass, or a start
            log.warning("ending what engine %s left failed: %s", engine_id, error)
    report.questions_cancelled += await _cancel_questions(store, office_id)
    return report


async def _end_engine(
    store: Store, office_id: str, dead: DeadRuns, engine_id: str, report: ReconcileReport
) -> None:
    """End what dead engine `engine_id` left (counted in `report`)."""
    if engine_id in dead.gone:  # its process is gone: its heartbeat ends now
        await store.expire_engine(office_id, engine_id)
    jobs = await running_jobs_of(store, office_id, engine_id)
    claimed = await _claimed_jobs(store, office_id, engine_id)
    job_reason = _reason(dead, engine_id, "while running this job")
    # each job's work cancelled and the job retried or failed, one transaction per job, before
    # the engine's end: if this engine dies half-way, the jobs left still run on the dead
    # engine and the next pass recovers them (semo.engine.routing.job_recovery)
    recovered = await recover_jobs(
        store, jobs, engine_id, job_reason, unless_alive=dead.unless_alive
    )
    ended = await store.end_engine(
        office_id,
        engine_id,
        session_reason=_reason(dead, engine_id, "without ending it"),
        command_error=_reason(dead, engine_id, "while running this command"),
        job_reason=job_reason,
        unless_alive=dead.unless_alive,
    )
    if not ended.dead:
        log.info("engine %s is alive again: what it runs is left to it", engine_id)
        return
    if engine_id != dead.me:  # shown dead at once (`semo engines`), not when its beat runs out
        await store.expire_engine(office_id, engine_id)
    report.dead_engines.append(engine_id)
    report.sessions_ended += ended.sessions_ended
    report.questions_cancelled += ended.questions_cancelled
    report.commands_failed += ended.commands_failed
    report.jobs_failed += ended.jobs_failed + recovered.recovered
    report.jobs_requeued += await requeue_jobs(
        store, office_id, claimed, _reason(dead, engine_id, "before running this job")
    )
    if ended.jobs_failed + recovered.recovered:
        log.info(
            "%d job(s) of engine %s failed (%d retried)",
            ended.jobs_failed + recovered.recovered,
            engine_id,
            recovered.retried,
        )


async def _claimed_jobs(store: Store, office_id: str, engine_id: str) -> list[str]:
    """The jobs whose `run_job` command `engine_id` holds (claimed; the job may not have
    started yet: an engine claims up to `max_jobs` while its sessions are busy)."""
    commands = await store.list_commands(office_id, status="processing", limit=sys.maxsize)
    return [
        str(c.payload.get("job_id"))
        for c in commands
        if c.claimed_by == engine_id and c.command_type == "run_job" and c.payload.get("job_id")
    ]


async def requeue_jobs(store: Store, office_id: str, job_ids: list[str], reason: str) -> int:
    """A new `run_job` command (and a `requeued` step) for each of `job_ids` still pending
    whose command the dead engine's end failed, unless another is pending or running: so no
    job is left pending without a command to run it. Each is one compare-and-set in the store
    (`Store.requeue_job`): engines ending one dead engine at once requeue a job once. Returns
    how many were requeued (`office_id` names the office in the logs)."""
    requeued = 0
    for job_id in job_ids:
        try:
            command = await store.requeue_job(job_id, reason=reason)
        except StoreUnavailable:
            raise
        except StoreError as error:
            log.warning("requeueing job %s of office %s failed: %s", job_id, office_id, error)
            continue
        if command is None:
            continue  # not pending, or a command runs it already
        requeued += 1
        log.info("job %s, claimed by a dead engine before it ran, requeued", job_id)
    return requeued


async def _holders(store: Store, office_id: str) -> list[str]:
    """The engine ids that hold something in the office, sorted: a live session, a claimed
    command or a running job (a job without an engine: the engine of its session)."""
    holders = {row.engine_id for row in await store.list_sessions(office_id) if row.engine_id}
    # every in-flight command, page by page (a cap would hide the engines holding only older
    # ones); claims are bounded by what engines run at once
    for command in await store.list_commands(office_id, status="processing", limit=sys.maxsize):
        if command.claimed_by:
            holders.add(command.claimed_by)
    for job in await store.list_jobs(office_id, status="running"):
        engine = await _job_engine(store, job)
        if engine:
            holders.add(engine)
    return sorted(holders)


async def _job_engine(store: Store, job: Job) -> str | None:
    if job.engine_id is not None:
        return job.engine_id
    # a row written before jobs recorded their engine: the engine of its session
    session = await _session(store, job.session_id)
    return session.engine_id if session is not None else None


def _reason(dead: DeadRuns, engine_id: str, doing: str) -> str:
    """e.g. "engine X stopped without ending it (found by me on start)"."""
    return f"engine {engine_id} {dead.what(engine_id)} {doing} ({dead.found_by()})"


async def _session(store: Store, session_id: str | None) -> AgentSession | None:
    if not session_id:
        return None
    try:
        return await store.get_session(session_id)
    except NotFound:
        return None


async def _cancel_questions(store: Store, office_id: str) -> int:
    """Cancel the pending questions of sessions that have ended (left by an earlier run, or
    by a store that could not cancel them when the session ended); how many."""
    sessions: dict[str, AgentSession | None] = {}
    cancelled = 0
    for question in await store.list_questions(office_id, status="pending"):
        session_id = question.session_id
        if not session_id:
            continue
        if session_id not in sessions:
            sessions[session_id] = await _session(store, session_id)
        session = sessions[session_id]
        if session is None or session.status != "terminated":
            continue
        try:
            await store.cancel_question(question.id, session_ended(session_id, session.end_reason))
        except StoreConflict:
            continue  # answered or cancelled meanwhile
        except StoreUnavailable:
            raise
        except StoreError as error:  # a question an agent wrote never stops a start
            log.warning("cancelling question %s failed: %s", question.id, error)
            continue
        cancelled += 1
    return cancelled
