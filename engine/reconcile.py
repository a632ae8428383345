"""What an engine does about what dead engines left behind: on start, and periodically.

An engine that died (SIGKILL, power loss) leaves `agent_sessions` rows that say a session is
alive, `agent_commands` rows it had claimed, `jobs` it was running, and questions its sessions
asked. Two passes find dead engines and clean up after them, the same way:

- `reconcile`, on start: the runs that are certainly dead from here (`DeadRuns`): its own
  configured id (it cannot be running twice), or a default id ``<this host>-<pid>`` whose
  process no longer exists. It also forgets the heartbeat rows of engines dead for a week.
- `end_silent_engines`, every `lease_seconds` while running (`SilentEngines`): engines of the
  office, on any host, that are not alive by their heartbeat (`engines`: it ran out, they
  stopped, or they never recorded one).

What is done about them:

- Their sessions are marked terminated (which cancels the sessions' pending questions).
- Pending questions of any ended session of the office (left by an earlier run, whatever ended
  it) are cancelled with the session's end reason: nobody can answer them any more.
- Their in-flight commands fail with a reason; commands whose lease expired (any engine's) go
  back to pending or fail, as `Store.recover_expired` decides.
- Their running jobs fail with a reason (jobs are not re-run: the `run_job` command that ran
  one is not safe to repeat, and fails too). A job's engine is `jobs.engine_id`, or for rows
  written without it the engine of the job's session.

Pending commands are picked up by the dispatcher afterwards; one addressed to a session that
has ended, or whose engine is not alive, is failed by the claim ("session X has ended ...; the
command was not run"). On start, runs on other hosts or still alive here are left alone: their
heartbeats run out if they are really gone, and the periodic pass finds them then.
"""

from __future__ import annotations

import logging
import os
import socket

from pydantic import BaseModel

from engine.store._shared import FORGET_ENGINES_AFTER, engine_silence, session_ended
from engine.store.base import NotFound, Store, StoreConflict
from engine.store.models import AgentSession, EngineHeartbeat

log = logging.getLogger("semo.engine")


class ReconcileReport(BaseModel):
    dead_engines: list[str] = []
    sessions_ended: int = 0
    commands_failed: int = 0
    commands_recovered: int = 0
    jobs_failed: int = 0
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


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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

    def __init__(self, me: str) -> None:
        self.me = me
        self.found: set[str] = set()

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
    read once)."""

    def __init__(self, me: str, heartbeats: list[EngineHeartbeat]) -> None:
        super().__init__(me)
        self.heartbeats = {row.engine_id: row for row in heartbeats}

    def __call__(self, engine_id: str | None) -> bool:
        if not engine_id or engine_id == self.me:
            return False
        row = self.heartbeats.get(engine_id)
        if row is not None and row.alive:
            return False
        self.found.add(engine_id)
        return True

    def what(self, engine_id: str) -> str:
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


async def end_silent_engines(store: Store, office_id: str, me: str) -> ReconcileReport:
    """Periodically: end what the engines that are not alive by their heartbeat left (on any
    host). Call it only while this engine's own heartbeat is steady (`Heartbeat.steady`)."""
    dead = SilentEngines(me, await store.list_engines(office_id))
    return await end_dead_engines(store, office_id, dead)


async def end_dead_engines(store: Store, office_id: str, dead: DeadRuns) -> ReconcileReport:
    """End the sessions of the engines `dead` says are dead (cancelling the pending questions
    of every ended session), fail their in-flight commands and their running jobs."""
    report = ReconcileReport()
    ending = {
        row.session_id: _reason(dead, row.engine_id, "without ending it")
        for row in await store.list_sessions(office_id)
        if row.engine_id and dead(row.engine_id)
    }
    report.questions_cancelled = await _cancel_questions(store, office_id, ending)
    for session_id, reason in ending.items():
        try:
            await store.set_session_status(session_id, "terminated", reason=reason)
        except (NotFound, StoreConflict):
            continue  # deleted or ended meanwhile (another engine's pass)
        report.sessions_ended += 1
    report.commands_failed = await _fail_commands(store, office_id, dead)
    report.jobs_failed = await _fail_jobs(store, office_id, dead)
    report.dead_engines = sorted(dead.found)
    return report


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


async def _cancel_questions(store: Store, office_id: str, ending: dict[str, str]) -> int:
    """Cancel the pending questions of sessions that have ended or are being ended (`ending`:
    session id -> the end reason about to be written); how many."""
    sessions: dict[str, AgentSession | None] = {}
    cancelled = 0
    for question in await store.list_questions(office_id, status="pending"):
        session_id = question.session_id
        if not session_id:
            continue
        if session_id in ending:
            reason = session_ended(session_id, ending[session_id])
        else:
            if session_id not in sessions:
                sessions[session_id] = await _session(store, session_id)
            session = sessions[session_id]
            if session is None or session.status != "terminated":
                continue
            reason = session_ended(session_id, session.end_reason)
        try:
            await store.cancel_question(question.id, reason)
        except StoreConflict:
            continue  # answered or cancelled meanwhile
        cancelled += 1
    return cancelled


async def _fail_commands(store: Store, office_id: str, dead: DeadRuns) -> int:
    """Fail the commands dead runs were running; how many."""
    failed = 0
    for command in await store.list_commands(office_id, status="processing", limit=10_000):
        holder = command.claimed_by
        if not (holder and dead(holder)):
            continue
        error = _reason(dead, holder, "while running this command")
        try:
            await store.complete_command(command.id, holder, success=False, error=error)
        except StoreConflict:
            continue  # finished or recovered meanwhile
        failed += 1
    return failed


async def _fail_jobs(store: Store, office_id: str, dead: DeadRuns) -> int:
    """Fail the jobs dead runs were running; how many."""
    failed = 0
    for job in await store.list_jobs(office_id, status="running"):
        engine = job.engine_id
        if engine is None:  # a row written before jobs recorded their engine
            session = await _session(store, job.session_id)
            engine = session.engine_id if session is not None else None
        if not dead(engine):
            continue
        assert engine is not None
        reason = _reason(dead, engine, "while running this job")
        await store.update_job(job.id, status="failed", failure_reason=reason, needs_human=False)
        log.info("job %s failed: %s", job.id, reason)
        failed += 1
    return failed
