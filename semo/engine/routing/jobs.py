"""Jobs: one task run by one agent until it says ``[SEMO:DONE]`` or fails (seed 004).

    runner = JobRunner(store, pool, office_id=office.id, agents_by_id=agents, bus=bus)
    job = await runner.execute_job(job_id)          # -> the Job row, done or failed
    dispatcher = CommandDispatcher(..., run_job=runner.run_job)

How it works: docs/JOBS.md, "The job runner".
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from semo.engine.events import BaseEvent, EventBus, JobEvent, JobStep, RoutingStep
from semo.engine.gitrun import GitError
from semo.engine.jobwork.model import JobWork
from semo.engine.jobwork.workspace import JobEnd, JobWorkspace
from semo.engine.protocol.messages import Done
from semo.engine.protocol.monitor import PATTERNS, Signal, scan_line
from semo.engine.protocol.observer import MessageFound
from semo.engine.protocol.screen_text import text_width
from semo.engine.protocol.state import STATE_WORDS, AgentState, StateChange
from semo.engine.routing.dispatcher import CommandFailed
from semo.engine.routing.job_cancel import CancelWatch, JobCancelled
from semo.engine.routing.job_recovery import job_entry
from semo.engine.routing.policy import Decision, Failure, FailureKind, decide, kind_for_pattern
from semo.engine.routing.router import Router
from semo.engine.sessions.agent_session import (
    AgentSession,
    DeliveryFailed,
    PromptDelivered,
    PromptGate,
    PromptWithdrawn,
    SessionEnded,
    SessionError,
    SessionEvent,
)
from semo.engine.sessions.manager import UnknownSession
from semo.engine.sessions.pool import PooledSession, PoolError, SessionPoolManager
from semo.engine.sessions.worktrees import WorktreeError, validate_task_id
from semo.engine.store.base import NotFound, Store, StoreError
from semo.engine.store.models import Agent, Job, JobEntry, RunJobPayload
from semo.engine.terminal.screen import TerminalScreen

__all__ = [
    "JobError",
    "JobEvent",
    "JobNotPending",
    "JobRunner",
    "JobStep",
    "UnknownJob",
    "build_prompt",
]

log = logging.getLogger("semo.jobs")

#: pauses between attempts to write a job's final status that the store refused
FINAL_WRITE_BACKOFF = (0.2, 1.0, 3.0)
#: timeline rows waiting to be written, at most (more are dropped, with a log line)
MAX_PENDING_ENTRIES = 10_000
#: what a job's step on the bus (JobEvent) carries of its timeline entry
EVENT_FIELDS = frozenset("office_id job_id agent_id step status attempts session_id detail".split())


# the generic reader's gutter and the monitor's fence, as semo.engine.protocol uses them
_GUTTER = re.compile(r"^(● |  )")
#: an agent's "Created pull request #N" (the monitor's completion pattern), and a PR's address
PULL_REQUEST = next(p.regex for p in PATTERNS if p.name == "pull_request")
_PR_URL = re.compile(r"https?://[^\s<>\"')\]]+/pull/\d+")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")


class JobError(Exception):
    """A job that cannot be run; the message says why."""


class UnknownJob(JobError, LookupError):
    pass


class JobNotPending(JobError):
    pass


#: a job's failure reason when the operator interrupted its agent's turn
OPERATOR_INTERRUPTED = "the operator interrupted the agent's turn"


@dataclass(frozen=True)
class _Outcome:
    """How one attempt ended: done, or a failure of `kind`."""

    done: bool
    kind: FailureKind | None = None
    detail: str = ""


# -- the prompt ---------------------------------------------------------------------------------


def pull_request_detail(line: str) -> str:
    """What the timeline keeps of an agent's "Created pull request #N" line: the pull
    request's address when the line has one, else the line (cut to 300 characters)."""
    url = _PR_URL.search(line)
    return url.group() if url else line.strip()[:300]


def build_prompt(
    job: Job, agent: Agent, *, retry: str | None = None, reads_prompts: bool = True
) -> str:
    """The task as the agent gets it: the task, its context as JSON, a reminder of who the
    agent is and how to finish, and for a retry why there is one.

    An agent that does not read prompts (a shell, a program: its profile's `reads_prompts`)
    gets the task text alone, on every attempt: semo's own sentences would be run as commands.

    Typed into a generic agent, this text is echoed on its screen; no line of it starts with a
    protocol tag, and the runner's own words hold none of the completion/error patterns."""
    lines = [job.task.strip()]
    if not reads_prompts:
        return lines[0]
    if job.context:
        context = json.dumps(job.context, ensure_ascii=False, sort_keys=True)
        lines.append(f"Context (JSON): {context}")
    lines.append(
        f"You are {agent.name}, the {agent.role} agent of this team. When the whole task is "
        "done, and only then, finish with [SEMO:DONE] at the start of a line, optionally "
        "followed by a one-line summary."
    )
    if retry:
        lines.append(retry)
    return "\n".join(lines)


def continuation_prompt(job: Job, note: str = "") -> str:
    """What a resumed Claude Code conversation is told to go on with the job it was running
    when its engine stopped (it has the task and its own work in its history already)."""
    task = job.task.strip().splitlines()[0][:200] if job.task.strip() else ""
    lines = [
        f"[semo] semo was restarted (its engine stopped) and this conversation was resumed. "
        f'You were working on job {job.id}: "{task}". Continue it where you left off; check '
        "what is already done first. Anything that was waiting for you (a result, an answer) "
        "is typed here after this.",
        "When the whole task is done, and only then, finish with [SEMO:DONE] at the start of a "
        "line, optionally followed by a one-line summary.",
    ]
    if note:
        lines.append(note)
    return "\n".join(lines)


def _retry_note(kind: FailureKind | str | None, attempt: int) -> str:
    why = {
        "timeout": "the previous attempt timed out",
        "crash": "the previous attempt's session ended unexpectedly; this is a new session",
        "engine": "the engine running the previous attempt stopped; this is a new session, and "
        "what the other agents were doing for it was cancelled",
        "taken over": "the engine running the previous attempt stopped; this is a new session "
        "(its conversation could not be resumed); what the other agents do for it goes on, and "
        "their results are typed here",
    }.get(kind or "", "the previous attempt did not finish")
    return f"Retry (attempt {attempt}): {why}. Check what is already done before you continue."


# -- watching a session -----------------------------------------------------------------------


class _ScreenTurns:
    """A generic session's lines, read turn by turn: logical lines (auto-wrapped rows joined)
    from where the last read stopped up to the cursor row, without the line a prompt was typed
    on and without anything inside code fences; returns their signals."""

    def __init__(self, screen: TerminalScreen) -> None:
        self.screen = screen
        self.next_row = self.cursor_row()  # what is above was there before the job
        self.echo_row: int | None = None
        self.fence: str | None = None
        self.rewrites = screen.scrollback.rewrites

    def _after_reflow(self) -> None:
        """A resize re-wrapped the screen and its history (`Scrollback.rewrites`): the rows
        remembered no longer name the same lines, so reading goes on from the cursor. Lines
        printed since the last read and not yet read are not judged (an error line among them
        decides nothing); none is read twice, and the prompt's echo is never taken for output."""
        if self.screen.scrollback.rewrites != self.rewrites:
            self.rewrites = self.screen.scrollback.rewrites
            self.next_row = self.cursor_row()
            self.echo_row = None

    def cursor_row(self) -> int:
        return self.screen.scrollback.total_pushed + self.screen.cursor.y

    def prompt_typed(self) -> None:
        """A prompt is being typed on the cursor row: that line is its echo."""
        self._after_reflow()
        self.echo_row = self.cursor_row()
        self.fence = None

    def read(self, at: float) -> list[Signal]:
        screen = self.screen
        self._after_reflow()
        if screen.alternate:
            return []
        pushed = screen.scrollback.total_pushed
        end = pushed + screen.cursor.y
        start = max(self.next_row, pushed - len(screen.scrollback))
        signals: list[Signal] = []
        first: int | None = None
        parts: list[str] = []
        for index in range(start, end):
            line = (
                screen.scrollback[index - pushed]
                if index < pushed
                else screen.row_line(index - pushed)
            )
            if first is None:
                first = index
            if line.wrapped:
                parts.append(line.text + " " * max(0, screen.columns - text_width(line.text)))
                continue
            parts.append(line.text)
            text, parts = "".join(parts), []
            echo = self.echo_row is not None and first <= self.echo_row <= index
            first = None
            if not echo:
                signals.extend(self._scan(text, at))
        # a line still wrapping onto the cursor row is read whole next time
        self.next_row = end if first is None else first
        return signals

    def _scan(self, text: str, at: float) -> list[Signal]:
        text = _GUTTER.sub("", text)
        opener = _FENCE.match(text)
        if opener:
            mark = opener.group(1)
            if self.fence is None:
                self.fence = mark
            elif mark[0] == self.fence[0] and len(mark) >= len(self.fence):
                self.fence = None
            return []
        if self.fence is not None:
            return []
        return scan_line(text, "screen", at)


class _Watch:
    """One attempt's view of its session's events (called from the session's listeners)."""

    def __init__(
        self,
        session: AgentSession,
        on_turn: Callable[[str], None],
        on_delivered: Callable[[], None],
        on_pull_request: Callable[[int, str], None] | None = None,
    ) -> None:
        self.session = session
        self.on_turn = on_turn
        self.on_delivered = on_delivered
        #: the agent said "Created pull request #N" (seed 001): the number and its line
        self.on_pull_request = on_pull_request
        self.pull_requests: set[int] = set()
        self.delivered = False
        self.outcome: asyncio.Future[_Outcome] = asyncio.get_running_loop().create_future()
        self.errors: list[Signal] = []
        self.turns = 0  # turns that ended without an outcome
        # turns that ended before the session confirmed the prompt (a fast agent under load):
        # their steps follow the "delivered" step, as they happened after it
        self._held_turns: list[str] = []
        # without hooks, the screen says where a turn ends
        screen_only = not session.profile.uses_hooks
        self.screen = _ScreenTurns(session.terminal.screen) if screen_only else None

    def on_event(self, event: SessionEvent) -> None:
        if isinstance(event, PromptDelivered) and not self.delivered:
            # also after the outcome: a fast agent's [SEMO:DONE] can be read before its
            # session confirms the prompt (the attempt ends only once `deliver` returns, so the
            # step still comes before the outcome's)
            self.delivered = True
            self.on_delivered()
            self._release_turns()
            return
        if self.outcome.done():
            return
        if isinstance(event, MessageFound):
            if isinstance(event.message, Done):
                if self.screen is not None:  # its turn's lines so far: a pull request in them
                    self._read_screen(event.at)
                summary = event.message.text
                self._finish(_Outcome(True, detail=summary))
        elif isinstance(event, Signal):
            if self.screen is not None or not event.decisive:
                return  # generic: read again at the turn's end; tool output: informs only
            if event.kind == "completion":
                self._pull_request(event.text)
            if event.kind == "completion" and event.pattern == "semo_done":
                self._finish(_Outcome(True, detail=event.text))
            elif event.kind == "error":
                self.errors.append(event)
        elif isinstance(event, StateChange):
            self._on_state(event)

    def _read_screen(self, at: float) -> None:
        """A generic session's new lines: their errors judge the turn when it ends, their
        "Created pull request #N" is the job's pull request (as in a Claude Code session);
        other completion lines ("All tests passed") only inform."""
        assert self.screen is not None
        for signal in self.screen.read(at):
            if signal.kind == "error":
                self.errors.append(signal)
            else:
                self._pull_request(signal.text)

    def _pull_request(self, line: str) -> None:
        match = PULL_REQUEST.search(line)
        if match is None or self.on_pull_request is None:
            return
        number = int(match.group(1))
        if number not in self.pull_requests:
            self.pull_requests.add(number)
            self.on_pull_request(number, line)

    def _on_state(self, change: StateChange) -> None:
        if self._operator_interrupted(change):
            return
        if change.state == AgentState.TERMINATED:
            # the process ended on its own (or the CLI quit): a crash; the engine ended it
            crashed = change.source != "engine"
            kind: FailureKind = "crash" if crashed else "terminated"
            status = self.session.exit_status
            detail = status.describe() if crashed and status is not None else change.reason
            self._finish(_Outcome(False, kind, detail))
            return
        if change.state == AgentState.EXECUTING:
            if self.screen is not None:
                self._read_screen(change.at)
                self.screen.prompt_typed()
            return
        turn_ended = change.previous == AgentState.EXECUTING and change.state in (
            AgentState.READY,
            AgentState.WAITING_INPUT,
        )
        if turn_ended:
            self._turn_ended(change)

    def _operator_interrupted(self, change: StateChange) -> bool:
        """The operator interrupted the turn (F8, a cancel command) and it ended (or the agent
        with it: Ctrl+C ends a program that does not handle it): the attempt is cancelled,
        never a crash to retry."""
        ended = change.state == AgentState.TERMINATED or (
            change.previous == AgentState.EXECUTING
            and change.state in (AgentState.READY, AgentState.WAITING_INPUT)
        )
        if not ended or not getattr(self.session, "interrupted_by_operator", False):
            return False
        self._finish(_Outcome(False, "cancelled", OPERATOR_INTERRUPTED))
        return True

    def _turn_ended(self, change: StateChange) -> None:
        if self.screen is not None:
            self._read_screen(change.at)
        errors, self.errors = self.errors, []
        if errors:
            worst = max(errors, key=lambda signal: signal.priority)
            self._finish(_Outcome(False, kind_for_pattern(worst.pattern), worst.text))
        else:
            self.turns += 1
            state = STATE_WORDS[change.state]
            detail = f"turn ended without [SEMO:DONE]: {state} ({change.reason})"
            if self.delivered:
                self.on_turn(detail)
            else:
                self._held_turns.append(detail)

    def _release_turns(self) -> None:
        held, self._held_turns = self._held_turns, []
        for detail in held:
            self.on_turn(detail)

    def _finish(self, outcome: _Outcome) -> None:
        self._release_turns()
        if not self.outcome.done():
            self.outcome.set_result(outcome)


# -- the runner ---------------------------------------------------------------------------------


class JobRunner:
    def __init__(
        self,
        store: Store,
        pool: SessionPoolManager,
        *,
        office_id: str,
        agents_by_id: Mapping[str, Agent],
        bus: EventBus | None = None,
        job_timeout: float = 1800.0,
        acquire_wait: float | None = None,
        cancel_grace: float = 10.0,
        engine_id: str | None = None,
        router: Router | None = None,
        cancel_poll: float = 1.0,
        workspace: JobWorkspace | None = None,
    ) -> None:
        if not job_timeout > 0:
            raise ValueError(f"job_timeout must be positive, not {job_timeout!r}")
        if (acquire_wait is not None and acquire_wait < 0) or cancel_grace < 0:
            raise ValueError("acquire_wait and cancel_grace must not be negative")
        self.store = store
        self.pool = pool
        self.office_id = office_id
        self.agents_by_id = agents_by_id
        self.bus = bus
        #: written on the rows of the jobs this runner runs (default: the session manager's),
        #: so that reconcile can fail them if this engine dies
        self.engine_id = engine_id if engine_id is not None else pool.manager.engine_id
        #: seconds one attempt may take, from its prompt to its outcome
        self.job_timeout = float(job_timeout)
        #: seconds a job waits for a session when the pool is full; None (the default): as
        #: long as it takes, so a burst beyond max_sessions queues (a cancel ends the wait)
        self.acquire_wait = None if acquire_wait is None else float(acquire_wait)
        #: seconds an interrupted turn gets to return to the prompt after a timeout
        self.cancel_grace = float(cancel_grace)
        #: seconds between reads of a running job's row (an operator's cancel)
        self.cancel_poll = float(cancel_poll)
        self.router = router
        #: the jobs' branches (semo/engine/jobwork): None runs jobs without recording their work
        self.workspace = workspace
        self._watches: dict[str, _Watch] = {}  # session id -> the attempt running in it
        self._running: set[str] = set()  # job ids being run by this runner
        self._job_sessions: dict[str, str] = {}  # session id -> the job it runs
        self._continued: set[asyncio.Task[Job]] = set()  # jobs taken over (continue_job)
        self._entries: asyncio.Queue[JobEntry] | None = None
        self._writer: asyncio.Task[None] | None = None
        self._closed = False
        pool.manager.add_listener(self._on_session_event)
        if router is not None:
            router.job_of_session = self.job_of_session
            if workspace is not None:
                router.enter_job = self._enter_for_router
        if bus is not None:
            bus.add_listener(self._on_bus_event)

    @property
    def running(self) -> frozenset[str]:
        """Ids of the jobs this runner is running now."""
        return frozenset(self._running)

    def job_of_session(self, session_id: str) -> str | None:
        """The job session `session_id` runs for this runner, if any."""
        return self._job_sessions.get(session_id)

    # -- the dispatcher's entry ---------------------------------------------------------------

    async def run_job(self, payload: RunJobPayload) -> dict[str, Any]:
        """The `run_job` command: runs the job to its end; CommandFailed when it cannot be run
        (unknown, not pending). A job that failed is a completed command whose result says so."""
        try:
            job = await self.execute_job(payload.job_id)
        except JobError as error:
            raise CommandFailed(str(error)) from error
        result: dict[str, Any] = {
            "job_id": job.id,
            "status": job.status,
            "attempts": job.attempts,
            "needs_human": job.needs_human,
        }
        if job.failure_reason:
            result["failure_reason"] = job.failure_reason
        return result

    # -- running a job ------------------------------------------------------------------------

    async def execute_job(self, job_id: str) -> Job:
        """Run the pending job `job_id` to its end; the final row (done or failed).

        Raises UnknownJob, JobNotPending (also when this runner is running it already), or a
        StoreError when the store cannot be read or written."""
        if job_id in self._running:
            raise JobNotPending(f"job {job_id} is already running on this engine")
        try:
            job = await self.store.get_job(job_id)
        except NotFound:
            raise UnknownJob(f"no job {job_id!r}") from None
        if job.office_id != self.office_id:
            raise UnknownJob(f"job {job_id} belongs to another office ({job.office_id})")
        if job.status != "pending":
            raise JobNotPending(f"job {job_id} is {job.status}; only a pending job can be run")
        self._running.add(job_id)
        try:
            # a compare-and-set on the job's status: of two engines holding a run_job command
            # for it (one requeued while the other's was slow), one starts it
            started = await self.store.start_job(
                job_id,
                engine_id=self.engine_id,
                entry=job_entry(job, "started", detail=job.task[:200]),
            )
            if started is None:
                now = await self.store.get_job(job_id)
                raise JobNotPending(f"job {job_id} is {now.status}; only a pending job can be run")
            return await self._run(started, started=True)
        finally:
            self._running.discard(job_id)

    def continue_job(
        self, job: Job, *, resumed: str | None, note: str = ""
    ) -> tuple[asyncio.Task[Job], asyncio.Event]:
        """Run `job`, taken over from a dead engine (`job_recovery.take_over_jobs`: still
        running, now on this engine), to its end, in a task of this runner (ended by `stop`).

        `resumed`: the pool session that resumed the job's Claude Code conversation, leased
        first; it is told to continue (`continuation_prompt`, with `note`) instead of getting
        the task again. When it is gone (the resume failed, it ended) a new session gets the
        whole task with a retry note. The event is set once the attempt's first prompt is
        queued (or the run ended without one): what else is typed into the session then
        (results, answers) comes after it."""
        queued = asyncio.Event()
        self._running.add(job.id)

        async def run() -> Job:
            try:
                return await self._run(
                    job, resumed=resumed, note=note, queued=queued, taken_over=True
                )
            finally:
                queued.set()
                self._running.discard(job.id)

        task = asyncio.create_task(run(), name=f"job {job.id} continued")
        self._continued.add(task)
        task.add_done_callback(self._continued.discard)
        task.add_done_callback(_log_failure)
        return task, queued

    async def stop(self) -> None:
        """End the jobs this runner continues itself (the dispatcher ends the others)."""
        tasks = list(self._continued)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(
        self,
        job: Job,
        *,
        resumed: str | None = None,
        note: str = "",
        queued: asyncio.Event | None = None,
        taken_over: bool = False,
        started: bool = False,
    ) -> Job:
        """Run `job` to its end; `started`: the store marked it running on this engine, with
        its `started` step (`Store.start_job`), else it is marked so here."""
        earlier = job.attempts  # > 0: retried after its engine died (job_recovery)
        if not started:
            job = await self.store.update_job(
                job.id,
                status="running",
                engine_id=self.engine_id,
                failure_reason=None,
                needs_human=False,
            )
        self._publish(job, "started", detail=job.task[:200], record=not started)
        job = await self._start_branch(job)
        work = JobWork.of(job)
        resolve = work.resolve
        agent = self.agents_by_id.get(job.agent_id)
        if resolve is not None:  # the operator handed a conflict to a role: its agent runs
            agent = next((a for a in self.agents_by_id.values() if a.role == resolve.role), None)
        if agent is None:
            known = ", ".join(f"{a.role} ({a.id})" for a in self.agents_by_id.values()) or "none"
            decision = decide(
                Failure(
                    kind="no_session",
                    attempts=1,
                    detail=f"no agent {job.agent_id!r} here (agents: {known})",
                )
            )
            return await self._fail(job, decision)
        if job.cancel_reason is not None:  # cancelled as it was taken: nothing starts
            return await self._cancelled(job, None, job.cancel_reason)
        watch = CancelWatch(self.store, job.id, poll=self.cancel_poll)
        watch.start()
        lease: PooledSession | None = None
        retry = (
            _retry_note("taken over" if taken_over else "engine", earlier + 1)
            if earlier and resolve is None  # a conflict handed to an agent is no retry
            else None
        )
        attempts = earlier
        try:
            while True:
                if lease is None:
                    try:
                        lease = await watch.unless_cancelled(
                            self.pool.acquire(
                                agent_id=agent.id,
                                task_id=_task_id(job),
                                wait=self.acquire_wait,
                                prefer=resumed,
                                on_wait=functools.partial(self._queued, job),
                            ),
                            undo=self._release,
                        )
                    except (PoolError, WorktreeError, ValueError, LookupError) as error:
                        failure = Failure(
                            kind="no_session", attempts=max(attempts, 1), detail=str(error)
                        )
                        return await self._fail(job, decide(failure))
                attempts += 1
                job = await self._update(job, attempts=attempts, session_id=lease.session_id)
                self._job_sessions[lease.session_id] = job.id
                prompt = None
                if resumed is not None and lease.session_id == resumed:
                    prompt = continuation_prompt(job, note)
                    what = "its resumed Claude Code conversation"
                elif resumed is not None:
                    what = "a new session: its resumed conversation is gone"
                else:
                    what = "session"
                resumed = None  # later attempts: a new prompt, as for any job
                self._publish(job, "session", detail=f"{lease.role} {what}, attempt {attempts}")
                if await self._enter(job, lease.role, lease.session, resolve) and prompt is None:
                    prompt_job = job if resolve is None else _resolving(job, resolve.prompt)
                    prompt = build_prompt(
                        prompt_job,
                        agent,
                        retry=retry,
                        reads_prompts=lease.session.profile.reads_prompts,
                    )
                outcome = await watch.unless_cancelled(
                    self._attempt(job, agent, lease.session, retry, prompt, queued, watch.gate)
                )
                queued = None
                if outcome.done:
                    await self._cancel_work(job, "the job is done")
                    end = await self._record_work(job)
                    if end is not None and end.conflict is not None:
                        return await self._needs_review(job, end.conflict.detail)
                    return await self._done(job, outcome.detail)
                assert outcome.kind is not None
                if outcome.kind == "cancelled":
                    return await self._cancelled(job, lease, outcome.detail)
                failure = Failure(kind=outcome.kind, attempts=attempts, detail=outcome.detail)
                decision = decide(failure)
                log.info("job %s: attempt %d failed: %s", job.id, attempts, decision.reason)
                await self._cancel_work(job, f"attempt {attempts} failed: {decision.reason}")
                if not decision.retry:
                    await self._record_work(job)  # what it did is on its branch, for review
                    return await self._fail(job, decision)
                self._publish(job, "retry", detail=decision.reason)
                retry = _retry_note(outcome.kind, attempts + 1)
                keep = not decision.recreate_session and await watch.unless_cancelled(
                    self._recover(job, lease, outcome)
                )
                if not keep:
                    self._release(lease)
                    lease = None
        except JobCancelled as cancelled:
            return await self._cancelled(job, lease, cancelled.reason)
        except asyncio.CancelledError:
            decision = decide(
                Failure(kind="cancelled", attempts=max(attempts, 1), detail="the run was cancelled")
            )
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.shield(self._cancel_work(job, decision.reason))
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.shield(self._fail(job, decision))
            raise
        finally:
            await watch.close()
            if lease is not None:
                self._release(lease)

    async def _cancelled(self, job: Job, lease: PooledSession | None, reason: str) -> Job:
        """An operator's cancel ends the job: its turn interrupted, its work cancelled, failed
        with `cancelled: <reason>`."""
        self._publish(job, "cancelling", detail=reason)
        if lease is not None:
            await self._interrupt(lease)
        decision = Decision(retry=False, reason=f"cancelled: {reason}")
        await self._cancel_work(job, decision.reason)
        return await self._fail(job, decision)

    async def _attempt(
        self,
        job: Job,
        agent: Agent,
        session: AgentSession,
        retry: str | None,
        prompt: str | None = None,
        queued: asyncio.Event | None = None,
        gate: PromptGate | None = None,
    ) -> _Outcome:
        """Deliver the task (or `prompt`) to `session` and wait for the attempt's outcome;
        `queued` is set once the prompt is in the session's queue; `gate` is asked right
        before it is typed (a cancelled job's task is never typed)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.job_timeout
        watch = _Watch(
            session,
            lambda what: self._publish(job, "turn", session_id=session.session_id, detail=what),
            lambda: self._publish(job, "delivered", session_id=session.session_id),
            lambda number, line: self._publish(
                job,
                "pr_created",
                session_id=session.session_id,
                detail=pull_request_detail(line),
                ref_id=f"#{number}",
            ),
        )
        self._watches[session.session_id] = watch
        try:
            try:
                if prompt is None:
                    prompt = build_prompt(
                        job, agent, retry=retry, reads_prompts=session.profile.reads_prompts
                    )
                if queued is not None:
                    # its waiters run once this task waits inside deliver: after the prompt
                    # was queued (submit is synchronous)
                    queued.set()
                await session.deliver(prompt, timeout=self.job_timeout, gate=gate)
            except PromptWithdrawn as error:
                return _Outcome(False, "cancelled", str(error))
            except SessionEnded as error:
                if watch.outcome.done():
                    return watch.outcome.result()
                # ended before its state change reached the watch: the same outcome it gives
                status = session.exit_status
                return _Outcome(False, "crash", status.describe() if status else str(error))
            except DeliveryFailed as error:
                return _Outcome(False, "timeout", f"the agent did not take the prompt ({error})")
            except TimeoutError:
                return _Outcome(
                    False,
                    "timeout",
                    f"the agent was not at its prompt within {self.job_timeout:g} s",
                )
            remaining = max(0.0, deadline - loop.time())
            try:
                return await asyncio.wait_for(asyncio.shield(watch.outcome), remaining)
            except TimeoutError:
                turns = f"; {watch.turns} turn(s) ended without it" if watch.turns else ""
                return _Outcome(
                    False, "timeout", f"no [SEMO:DONE] within {self.job_timeout:g} s{turns}"
                )
        finally:
            if self._watches.get(session.session_id) is watch:
                del self._watches[session.session_id]

    async def _interrupt(self, lease: PooledSession) -> None:
        """A cancelled job's turn: interrupted (the session stays, for the pool)."""
        session = lease.session
        if not session.ended and session.state == AgentState.EXECUTING:
            with contextlib.suppress(SessionError):
                await session.cancel()

    async def _cancel_work(self, job: Job, reason: str) -> None:
        """Cancel the job's open invocations and results (and stop the agents on them)."""
        try:
            if self.router is not None:
                await self.router.settle()
                await self.router.cancel_job_work(job.id, reason)
            else:
                await self.store.cancel_job_work(job.id, reason)
        except StoreError as error:
            log.warning("job %s: cancelling its open work failed: %s", job.id, error)

    async def _recover(self, job: Job, lease: PooledSession, outcome: _Outcome) -> bool:
        """After a timeout: interrupt the turn; whether the session is back at its prompt and
        can take the retry. One that is not is ended (it would hold its slot forever)."""
        session = lease.session
        if session.ended:
            return False
        if session.state == AgentState.EXECUTING:
            with contextlib.suppress(SessionError):
                await session.cancel()
            with contextlib.suppress(TimeoutError, SessionEnded):
                await session.wait_for_state(AgentState.READY, self.cancel_grace)
        if session.state == AgentState.READY:
            return True
        if not session.ended:
            reason = f"job {job.id}: not back at its prompt after a timeout ({outcome.detail})"
            try:
                await self.pool.manager.terminate(session.session_id, reason=reason)
            except UnknownSession:
                await session.terminate(reason)
        return False

    # -- the job's branch (semo/engine/jobwork) ----------------------------------------------------

    async def _start_branch(self, job: Job) -> Job:
        """The job's branch at the base (kept on a retry), on the timeline; a repository that
        cannot give one leaves the job to run without it (the step says why)."""
        if self.workspace is None:
            return job
        try:
            job = await self.workspace.start(job)
        except (GitError, StoreError, OSError) as error:
            self._publish(job, "branch", detail=f"no job branch: {error}")
            return job
        base = f"{job.base_branch} at {(job.base_commit or '')[:10]}"
        self._publish(job, "branch", detail=f"{job.branch} from {base}")
        return job

    async def _enter(self, job: Job, role: str, session: AgentSession, resolve: Any = None) -> bool:
        """Put the session's worktree on the role's branch for the job (and, for a conflict
        handed to the role, the conflict into it); whether the prompt must say more (a
        conflict to resolve)."""
        if self.workspace is None or not job.branch:
            return False
        try:
            worktree = await self.workspace.worktree_of(session.cwd)
            if worktree is None:
                return False
            entered = await self.workspace.enter(job.id, role, worktree)
            saved = f"; what it held before was saved as {entered.saved}" if entered.saved else ""
            self._publish(
                job,
                "worktree",
                session_id=session.session_id,
                detail=f"{role} works on {entered.branch} in {worktree}{saved}",
            )
            if resolve is not None and resolve.role == role:
                files = await self.workspace.prepare_resolve(job.id, role, worktree)
                self._publish(
                    job,
                    "resolving",
                    session_id=session.session_id,
                    detail=f"{role} resolves the conflict in {', '.join(files) or 'no file'}",
                )
                return True
        except (GitError, StoreError, OSError) as error:
            self._publish(job, "worktree", session_id=session.session_id, detail=str(error))
        return False

    async def _enter_for_router(self, session: AgentSession, role: str, job_id: str) -> None:
        """An invocation of `job_id` is about to be typed into `session`: its worktree goes on
        the role's branch for that job, unless the session runs another job of this runner."""
        running = self._job_sessions.get(session.session_id)
        if running is not None and running != job_id:
            log.info("session %s runs job %s, not %s", session.session_id, running, job_id)
            return
        try:
            job = await self.store.get_job(job_id)
        except (NotFound, StoreError) as error:
            log.info("job %s: not entering %s: %s", job_id, session.session_id, error)
            return
        await self._enter(job, role, session)

    async def _record_work(self, job: Job) -> JobEnd | None:
        """The end of the job: its roles' leftovers committed and their branches combined on
        the job branch, on the timeline (`committed`, `combined`)."""
        if self.workspace is None or not job.branch:
            return None
        try:
            end = await self.workspace.finish(job.id)
        except (GitError, StoreError, OSError) as error:
            self._publish(job, "combined", detail=f"the job's work was not combined: {error}")
            return None
        for role, sha in end.committed.items():
            self._publish(job, "committed", detail=f"{role}: {sha[:10]} (what it left)")
        commits = "; ".join(end.commits[-20:])
        stat = end.diffstat or "no changes"
        self._publish(
            job, "combined", detail=f"{job.branch}: {len(end.commits)} commit(s), {stat}. {commits}"
        )
        return end

    # -- store and bus ------------------------------------------------------------------------

    async def _update(self, job: Job, **changes: Any) -> Job:
        try:
            return await self.store.update_job(job.id, **changes)
        except StoreError as error:
            log.warning("job %s: %s not recorded: %s", job.id, ", ".join(changes), error)
            return job.model_copy(update=changes)

    async def _done(self, job: Job, summary: str) -> Job:
        job = await self._final(
            job, "done", summary, status="done", failure_reason=None, needs_human=False
        )
        log.info("job %s done after %d attempt(s)", job.id, job.attempts)
        self._publish(job, "done", detail=summary, record=False)  # written with the status
        return job

    async def _needs_review(self, job: Job, detail: str) -> Job:
        job = await self._final(
            job,
            "needs_review",
            detail,
            status="needs_review",
            failure_reason=detail,
            needs_human=True,
        )
        log.info("job %s needs review: %s", job.id, detail)
        self._publish(job, "needs_review", detail=detail, record=False)
        return job

    async def _fail(self, job: Job, decision: Decision) -> Job:
        job = await self._final(
            job,
            "failed",
            decision.reason,
            status="failed",
            failure_reason=decision.reason,
            needs_human=decision.needs_human,
        )
        log.info("job %s failed: %s", job.id, decision.reason)
        self._publish(job, "failed", detail=decision.reason, record=False)
        return job

    async def _final(self, job: Job, step: JobStep, detail: str, **changes: Any) -> Job:
        """Write the job's end and its timeline step in one transaction (after the steps
        queued before it); a store that refuses is asked again a few times."""
        await self._flush()
        entry = JobEntry(job_id=job.id, office_id=job.office_id, step=step, detail=detail)
        for delay in (*FINAL_WRITE_BACKOFF, None):
            try:
                return await self.store.update_job(job.id, entry=entry, **changes)
            except StoreError as error:
                if delay is None:
                    raise
                log.warning(
                    "job %s: writing its end failed (%s); again in %g s", job.id, error, delay
                )
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    def _queued(self, job: Job, occupancy: str) -> None:
        """The job waits for a session: the pool is full (`occupancy` says how)."""
        self._publish(job, "queued", detail=f"waiting for a session: {occupancy}")

    def _publish(
        self,
        job: Job,
        step: JobStep,
        *,
        session_id: str | None = None,
        detail: str = "",
        record: bool = True,
        ref_id: str | None = None,
    ) -> None:
        """The step on the bus, and on the job's timeline unless the store wrote it already
        (`record` False: with the job's status, `_final`)."""
        entry = job_entry(job, step, session_id=session_id, detail=detail)
        if ref_id is not None:
            entry = entry.model_copy(update={"ref_id": ref_id})
        if record:
            self._record(entry)
        if self.bus is None:
            return
        fields = entry.model_dump(include=set(EVENT_FIELDS))  # pydantic's IncEx: a set
        self.bus.publish(JobEvent(**fields, needs_human=job.needs_human))

    # -- the timeline ---------------------------------------------------------------------------

    def _on_bus_event(self, event: BaseEvent) -> None:
        """The router's steps about this office's jobs go on their timelines."""
        if not isinstance(event, RoutingStep) or event.job_id is None:
            return
        if event.office_id != self.office_id:
            return
        self._record(
            JobEntry(
                job_id=event.job_id,
                office_id=event.office_id,
                step=event.step[:64],
                session_id=event.session_id,
                agent_id=event.agent_id,
                ref_id=event.ref_id,
                detail=event.detail,
                at=event.at,
            )
        )

    def _record(self, entry: JobEntry) -> None:
        """Queue a timeline row; one writer task writes them in order."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if self._closed:  # the engine is stopping: no writer outlives close()
            log.info("job %s: timeline row %s after close, not written", entry.job_id, entry.step)
            return
        if self._entries is None:
            self._entries = asyncio.Queue()
        if self._entries.qsize() >= MAX_PENDING_ENTRIES:
            log.warning("job %s: timeline row %s dropped (writer behind)", entry.job_id, entry.step)
            return
        self._entries.put_nowait(entry)
        if self._writer is None or self._writer.done():
            self._writer = loop.create_task(self._write_entries(), name="job timeline")

    async def _write_entries(self) -> None:
        assert self._entries is not None
        while True:
            entry = await self._entries.get()
            try:
                await self.store.add_job_entry(entry)
            except StoreError as error:
                log.warning(
                    "job %s: timeline row %s not written: %s", entry.job_id, entry.step, error
                )
            except Exception:
                log.exception("job %s: writing timeline row %s failed", entry.job_id, entry.step)
            finally:
                self._entries.task_done()

    async def _flush(self) -> None:
        """Wait until the queued timeline rows are written."""
        if self._entries is not None and self._writer is not None and not self._writer.done():
            await self._entries.join()

    async def close(self) -> None:
        """Write what is queued and stop the writer."""
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._flush(), 5.0)
        self._closed = True
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
            self._writer = None

    # -- sessions -----------------------------------------------------------------------------

    def _on_session_event(self, session: AgentSession, event: SessionEvent) -> None:
        watch = self._watches.get(session.session_id)
        if watch is not None:
            watch.on_event(event)

    def _release(self, lease: PooledSession) -> None:
        self._job_sessions.pop(lease.session_id, None)
        try:
            self.pool.release(lease.session_id)
        except PoolError as error:
            log.info("job runner: session %s not released: %s", lease.session_id, error)


def _log_failure(task: asyncio.Task[Job]) -> None:
    """A continued job's run that raised (the store refused its row): logged, not lost in a
    task nobody awaits. Its row stays as the store last took it, as for a `run_job` command."""
    if not task.cancelled() and (error := task.exception()) is not None:
        log.error("%s failed", task.get_name(), exc_info=error)


def _resolving(job: Job, prompt: str) -> Job:
    """`job` as the prompt of a conflict handed to an agent shows it: the operator's words,
    then what semo did, instead of the task."""
    task = (
        f"{prompt.strip()}\n[semo] Job {job.id} ({job.task.strip().splitlines()[0][:120]}): the "
        f"job branch {job.branch} was merged into your branch in your worktree and conflicts "
        "(markers in the files). Resolve the conflicts, keeping both sides' intent, and commit."
    )
    return job.model_copy(update={"task": task})


def _task_id(job: Job) -> str | None:
    """The pool's task id for the job's session (its worktree's name), when the job id fits."""
    try:
        return validate_task_id(f"job-{job.id}")
    except WorktreeError:
        return None
