"""The Engine facade: wires store, sessions, pool, dispatcher and the event bus for one office.

    engine = Engine(load_config(Path("semo.toml")))
    await engine.start()          # store open, office + agents synced, heartbeat, reconcile,
    ...                           # warm pool, dispatcher claiming commands; events on engine.bus
    await engine.stop()           # stop claiming, finish or fail in-flight work, end sessions,
                                  # record the engine stopped

`semo engine` talks to this class only; a console in the same process reaches it through
`InProcessEngine` (semo/engine/in_process.py), one attached through the control socket.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from semo.engine.agents import registry
from semo.engine.config import AgentConfig, SemoConfig
from semo.engine.control.paths import office_paths
from semo.engine.control.resume import (
    ConversationKeeper,
    Resumed,
    conversations_path,
    resume_conversations,
    tell_restarted,
)
from semo.engine.control.server import ControlServer
from semo.engine.events import EnginePhase, EngineStatus, EventBus, EventForwarder
from semo.engine.heartbeat import BEATS_PER_LIMIT, Heartbeat
from semo.engine.jobwork.workspace import JobWorkspace
from semo.engine.liveness import killed_run_of_office
from semo.engine.notify.engine_hooks import EngineNotices
from semo.engine.office import job_ops
from semo.engine.office.job_ops import JobTimeline, JobView
from semo.engine.reconcile import (
    ReconcileReport,
    end_silent_engines,
    is_dead_run,
    reconcile,
    requeue_jobs,
)
from semo.engine.routing.approvals import Approvals
from semo.engine.routing.budgets import AgentBudgets
from semo.engine.routing.dispatcher import CommandDispatcher, CommandFailed
from semo.engine.routing.job_recovery import take_over_jobs
from semo.engine.routing.jobs import JobRunner
from semo.engine.routing.router import Router
from semo.engine.session_events import bus_event
from semo.engine.sessions.agent_session import AgentSession, SessionEvent
from semo.engine.sessions.breaker import CircuitBreaker
from semo.engine.sessions.environment import agent_env_values
from semo.engine.sessions.manager import LaunchOptions, SessionManager, UnknownSession
from semo.engine.sessions.pool import SessionPoolManager
from semo.engine.sessions.worktrees import WorktreeManager
from semo.engine.ship.auto import AutoShip
from semo.engine.store import open_store
from semo.engine.store.base import NotFound, Store, StoreError
from semo.engine.store.changes import ChangeFeed

if TYPE_CHECKING:
    from semo.engine.jobwork.review import JobDiff, JobReview
from semo.engine.store.models import (
    Agent,
    AgentCommand,
    CreateSessionPayload,
    Job,
    Office,
    ShipJobPayload,
    UserQuestion,
)
from semo.engine.store.waiting import open_waiting

log = logging.getLogger("semo.engine")

FolderFor = Callable[[Agent, str], Path | None]


def default_record_dir() -> Path:
    """Where the console's recordings go: beside the default SQLite store."""
    from semo.engine.store.sqlite import default_sqlite_path

    return default_sqlite_path().with_name("recordings")


class Engine:
    def __init__(
        self,
        config: SemoConfig,
        *,
        store: Store | None = None,
        agent_env: Mapping[str, str] | None = None,
        runtime_dir: Path | None = None,
        folder_for: FolderFor | None = None,
        record_dir: Path | None = None,
        control: bool = False,
    ) -> None:
        self.config = config
        self.engine_id = config.engine_id()
        self.store = store or open_store(config.store_config())
        self._owns_store = store is None
        self.bus = EventBus()
        self.office: Office | None = None
        self.agents: dict[str, Agent] = {}  # by role
        self.reconciled: ReconcileReport | None = None
        self.started_at: float | None = None
        self._agent_env = agent_env
        self._runtime_dir = runtime_dir
        self._folder_for = folder_for
        self._record_dir = record_dir
        self._forwarder: EventForwarder | None = None
        self.manager: SessionManager | None = None
        self.pool: SessionPoolManager | None = None
        self.dispatcher: CommandDispatcher | None = None
        self.router: Router | None = None
        self.approvals: Approvals | None = None
        self.jobs: JobRunner | None = None
        self._changes: ChangeFeed | None = None
        self.heartbeat: Heartbeat | None = None
        self._recovery: asyncio.Task[None] | None = None
        #: `[ship] on_done`: ships the jobs this engine finishes (semo/engine/ship/auto.py)
        self.auto_ship: AutoShip | None = None
        self._remove_auto_ship: Callable[[], None] | None = None
        #: stop() has run (a second call does nothing: e.g. after a start that failed)
        self._stopped = False
        #: the office's control socket that consoles attach to (engine.control), if serving
        self.control: ControlServer | None = None
        self._serve_control = control
        #: the record of this engine's Claude Code conversations (semo.engine.control.resume), kept
        #: when it serves consoles
        self.conversations: ConversationKeeper | None = None
        #: the office's notifications ([[notify]], semo.engine.notify)
        self.notices: EngineNotices | None = None

    # -- life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start everything; if a step fails once the heartbeat runs, what had started is
        stopped (`stop`) before the error is raised."""
        self._stopped = False
        if self._owns_store:
            await open_waiting(self.store)
        try:
            await self._refuse_if_running()  # before anything is written: a live one stays
        except BaseException as error:
            await self.stop(f"start refused: {error}")  # no heartbeat: its row is not touched
            raise
        self.office = await self._sync_office()
        office_id = self.office.id
        self._status("starting", f"office {self.office.name}, store {self.store.backend}")
        self.heartbeat = Heartbeat(
            self.store,
            office_id,
            self.engine_id,
            lease_seconds=self.config.engine.lease_seconds,
            dead_after=self.config.engine.failover(),
        )
        await self.heartbeat.start()
        try:
            if self._serve_control:  # a second engine for this office on this machine stops here
                self.control = ControlServer(
                    self, office_paths(self.config.office.name, self.config.store_config())
                )
                await self.control.start()
            await self._start_running(office_id)
        except BaseException as error:
            # whatever had started stops (the heartbeat too: recorded stopped, not left to run
            # out while nothing runs), then the caller learns why the start failed
            try:
                await self.stop(f"start failed: {error!r}")
            except BaseException:
                log.exception("stopping engine %s after a failed start failed", self.engine_id)
            raise

    async def _start_running(self, office_id: str) -> None:
        """What `start` does once the heartbeat runs: reconcile, sessions, routing, claims.

        The Claude Code conversations a killed engine of the office left
        (semo.engine.control.resume) are resumed before anything else uses sessions: their jobs are
        taken over before reconcile (which would cancel their work), the sessions are resumed before
        the pool starts its warm sessions, the jobs are continued in them and the router types what
        waited for them before the dispatcher claims new work."""
        self.notices = EngineNotices(self)
        self.notices.start()
        continued: list[Job] = []
        if self._serve_control:
            paths = office_paths(self.config.office.name, self.config.store_config())
            self.conversations = ConversationKeeper(self, conversations_path(paths))
            continued = await self._take_over_jobs(office_id, self.conversations)
        self.reconciled = await reconcile(self.store, office_id, self.engine_id)
        log.info("reconciled: %s", self.reconciled.describe())
        self.notices.engines_died(self.reconciled, "found on start")
        self.manager = SessionManager(
            store=self.store,
            office_id=office_id,
            engine_id=self.engine_id,
            agent_env=self._agent_env,
            worktrees=self._worktrees(),
            runtime_dir=self._runtime_dir,
            record_dir=self._record_dir,
            launch_options=self._launch_options,
            peers=lambda: list(self.agents.values()),
        )
        self.manager.add_listener(self._on_session_event)
        self.manager.hook_timeouts["PermissionRequest"] = self.config.approvals.hook_timeout()
        await self.manager.start()
        if self.store.backend == "supabase":
            self._forwarder = EventForwarder(self.bus, self.store, office_id=office_id)
            self._forwarder.start()
        pool = self.config.pool
        self.pool = SessionPoolManager(
            self.manager,
            agents=self.agents,
            max_sessions=pool.max_sessions,
            warm_roles=[r for r in pool.warm_roles if r in self.agents],
            idle_timeout=pool.idle_timeout,
            breaker=CircuitBreaker(
                pool.restart_failures,
                pool.restart_window,
                pool.restart_cooldown,
                on_transition=self.notices.breaker_changed,
            ),
            folder_for=self._folder_for,
        )
        resumed: list[Resumed] = []
        if self.conversations is not None:
            # recording first: a resumed conversation is recorded again as soon as its hooks
            # report, so an engine that dies now leaves it for the next one
            self.conversations.start()
            jobs = {job.session_id or "": job.id for job in continued}
            resumed = await resume_conversations(self, self.conversations, jobs)
        await self.pool.start()
        self._changes = ChangeFeed(self.store, office_id)
        self._changes.start()
        self.router = Router(
            self.store,
            self.manager,
            self.pool,
            office_id=office_id,
            agents=self.agents,
            bus=self.bus,
            wait_for_change=self._changes.cursor().wait_for_change,
            reads_prompts=self._reads_prompts,
            budgets=AgentBudgets(self.config.budgets),
        )
        for conversation in resumed:
            self.router.resumed(conversation.old_id, conversation.session.session_id)
        self.approvals = Approvals(
            self.store,
            self.manager,
            office_id=office_id,
            policy=self.config.approvals,
            bus=self.bus,
            job_for=self.router.job_for,
        )
        self.router.approvals = self.approvals
        if self.conversations is not None:
            self.approvals.on_grant = self.conversations.granted
        for conversation in resumed:  # what the operator allowed for them before the restart
            if conversation.grants:
                self.approvals.restore(conversation.session.session_id, conversation.grants)
        self.approvals.start()
        self.jobs = JobRunner(
            self.store,
            self.pool,
            office_id=office_id,
            agents_by_id={agent.id: agent for agent in self.agents.values()},
            bus=self.bus,
            router=self.router,  # the job's id on the work its session causes
            workspace=self._job_workspace(),
        )
        # the jobs' prompts are queued before the router types anything (its sweep included)
        await self._continue(continued, resumed)
        self.router.start()
        await self.router.resume()
        settings = self.config.engine
        self.dispatcher = CommandDispatcher(
            self.store,
            self.manager,
            office_id=office_id,
            engine_id=self.engine_id,
            bus=self.bus,
            create_session=self._create_session,
            run_job=self.jobs.run_job,
            ship_job=self._ship_job,
            wait_for_change=self._changes.cursor().wait_for_change,
            command_timeout=settings.command_timeout,
            lease_seconds=settings.lease_seconds,
            max_jobs=settings.max_jobs,
        )
        self.dispatcher.start()
        self.auto_ship = AutoShip(self.store, self.config.ship)
        self._remove_auto_ship = self.bus.add_listener(self.auto_ship.on_event)
        self._recovery = asyncio.create_task(self._recover_expired(), name="recover expired")
        self.started_at = time.monotonic()
        self._status("running", f"{len(self.manager.sessions)} session(s)")
        if self.control is not None:
            self.control.ready()

    async def stop(self, reason: str = "engine stopped") -> None:
        """Stop taking commands, finish or fail what is in flight, end every session, record
        the engine stopped. Every step runs even when an earlier one fails (the first failure
        is raised at the end); the heartbeat is stopped and the store closed whatever
        happens. A second call does nothing."""
        if self._stopped:
            return
        self._stopped = True
        self._status("stopping", reason)
        try:
            recovery = self._recovery
            while recovery is not None and not recovery.done():  # gone before anything stops
                recovery.cancel()  # again if a step it awaited swallowed the cancellation
                await asyncio.wait({recovery}, timeout=1.0)
            grace = self.config.engine.shutdown_grace
            steps: list[tuple[str, Callable[[], Awaitable[object]]]] = []
            if self.dispatcher is not None:
                steps.append(("dispatcher", functools.partial(self.dispatcher.stop, grace)))
            if self.jobs is not None:
                steps.append(("continued jobs", self.jobs.stop))
            if self.router is not None:
                steps.append(("router", self.router.stop))
            if self._changes is not None:
                steps.append(("change feed", self._changes.stop))
            # the agents get `grace` (all of them at once), then what is left of them is killed
            if self.pool is not None:
                steps.append(("pool", functools.partial(self.pool.close, grace=grace)))
            if self.manager is not None:
                steps.append(("sessions", functools.partial(self.manager.close, reason, grace)))
            if self.jobs is not None:  # the timeline rows the steps above queued, written
                steps.append(("job timeline", self.jobs.close))
            if self._remove_auto_ship is not None and self.auto_ship is not None:
                self._remove_auto_ship()
                steps.append(("shipping", self.auto_ship.stop))
            failure: Exception | None = None
            for name, step in steps:
                try:
                    await step()
                except Exception as error:
                    log.exception("engine %s: stopping the %s failed", self.engine_id, name)
                    failure = failure or error
            if failure is not None:
                raise failure
        finally:
            try:
                if self.heartbeat is not None:
                    await self.heartbeat.stop()  # after its sessions ended: recorded stopped
            finally:
                self._status("stopped", reason)
                try:
                    if self.notices is not None:  # before the store closes: waits read it
                        await self.notices.stop()
                    if self._forwarder is not None:
                        await self._forwarder.stop()
                finally:
                    try:
                        if self._owns_store:
                            await self.store.close()
                    finally:
                        if self.control is not None:
                            await self.control.stop(reason)

    # -- the facade ----------------------------------------------------------------------------

    @property
    def office_id(self) -> str:
        assert self.office is not None, "start() first"
        return self.office.id

    def sessions(self) -> list[AgentSession]:
        return list(self.manager.sessions.values()) if self.manager else []

    def connection_state(self) -> str:
        """How the engine hears about new rows: for the console's header."""
        backend = self.store.backend
        if backend == "supabase" and self.office is not None:
            subscribed = getattr(self.store, "subscribed", None)
            live = subscribed is not None and subscribed(self.office.id)
            return "realtime: subscribed" if live else "realtime: reconnecting"
        if backend == "postgres":
            return "polling" if getattr(self.store, "wakeups", "") == "poll" else "listen/notify"
        return "local"

    async def pending_questions(self) -> list[UserQuestion]:
        """Pending questions of this engine's live sessions (a question whose session ended,
        e.g. in an earlier run, can no longer be answered: it is not shown)."""
        live = {s.session_id for s in self.sessions() if not s.ended}
        questions = await self.store.list_questions(self.office_id)
        return [q for q in questions if q.session_id is None or q.session_id in live]

    async def recent_commands(self, limit: int = 20) -> list[AgentCommand]:
        return await self.store.list_commands(self.office_id, limit=limit)

    async def new_session(self, role: str) -> AgentSession:
        """A session of `role` from the pool (an idle one, else a new one), left idle."""
        assert self.pool is not None, "start() first"
        pooled = await self.pool.acquire(role=role)
        self.pool.release(pooled.session_id)
        return pooled.session

    def send_prompt(self, session_id: str, text: str) -> None:
        assert self.manager is not None, "start() first"
        self.manager.get(session_id).post(text)

    async def cancel(self, session_id: str) -> None:
        """The operator interrupts the session's turn (a job's watcher records it so)."""
        assert self.manager is not None, "start() first"
        await self.manager.cancel(session_id, by_operator=True)

    async def terminate(self, session_id: str) -> None:
        assert self.manager is not None, "start() first"
        await self.manager.terminate(session_id, reason="terminated by the operator")

    def start_recording(self, session_id: str) -> Path:
        """Record the session's terminal into an asciicast file; returns its path."""
        assert self.manager is not None, "start() first"
        session = self.manager.get(session_id)
        folder = self._record_dir or default_record_dir()
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{session.role}-{session_id[:8]}-{int(time.time())}.cast"
        session.terminal.start_recording(path)
        return path

    def stop_recording(self, session_id: str) -> None:
        """ValueError when the session is not being recorded."""
        assert self.manager is not None, "start() first"
        session = self.manager.get(session_id)
        if session.terminal.recorder is None:
            raise ValueError(f"{session.role} is not being recorded")
        session.terminal.stop_recording()

    async def answer(
        self, question_id: str, *, text: str | None = None, option: int | None = None
    ) -> UserQuestion:
        """Answer a pending question; the answer is typed into the asking session."""
        assert self.router is not None, "start() first"
        return await self.router.answer(question_id, text=text, option=option)

    async def list_jobs(self, *, include_ended: bool = True) -> list[JobView]:
        """The office's jobs, oldest first (only the pending and running ones unless
        `include_ended`)."""
        return await job_ops.list_jobs(self.store, self.office_id, include_ended=include_ended)

    async def job_timeline(self, job_id: str) -> JobTimeline:
        """The job's timeline (NotFound for a job of another office)."""
        return await job_ops.job_timeline(self.store, job_id, self.office_id)

    async def job_review(self, job_id: str) -> JobReview:
        """The job's branch, base, commits and diffstat (semo/engine/jobwork/review.py)."""
        from semo.engine.jobwork.review import job_review

        await job_ops.get_job(self.store, job_id, self.office_id)  # NotFound for another's
        return await job_review(
            self.store, job_id, repository=self.config.office.repository, settings=self.config.git
        )

    async def job_diff(self, job_id: str) -> JobDiff:
        """The job's diff, file by file; a file's patch is cut at `MAX_PATCH_CHARS`."""
        from semo.engine.jobwork.review import job_diff
        from semo.engine.ship.diff_limit import cut_patches

        await job_ops.get_job(self.store, job_id, self.office_id)  # NotFound for another's
        diff = await job_diff(self.store, job_id, repository=self.config.office.repository)
        return cut_patches(diff)

    async def create_job(self, role: str, task: str, context: dict[str, Any] | None = None) -> Job:
        """A job for the office's agent `role`; an engine of the office runs it."""
        job, _command = await job_ops.create_job(
            self.store, self.office_id, role=role, task=task, context=context
        )
        return job

    async def cancel_job(self, job_id: str, reason: str = "") -> Job:
        return await job_ops.cancel_job(self.store, job_id, reason, self.office_id)

    # -- wiring --------------------------------------------------------------------------------

    async def _refuse_if_running(self) -> None:
        """EngineIdInUse when another engine runs with this engine's id in the configured office
        (`Heartbeat.refuse_if_running`); nothing is written before this."""
        name = self.config.office.name
        office = next((o for o in await self.store.list_offices() if o.name == name), None)
        if office is None:
            return  # a new office: nobody runs it yet
        row = next(
            (r for r in await self.store.list_engines(office.id) if r.engine_id == self.engine_id),
            None,
        )
        if row is not None and row.alive:
            paths = office_paths(name, self.config.store_config())
            gone = killed_run_of_office(paths, self.engine_id, row.started_at.isoformat())
            if gone is not None:  # a SIGKILLed run on this machine: no need to watch its beats
                log.info(
                    "engine %s: the run the store says alive is gone: %s", self.engine_id, gone
                )
                return
        settings = self.config.engine
        heartbeat = Heartbeat(
            self.store,
            office.id,
            self.engine_id,
            lease_seconds=settings.lease_seconds,
            dead_after=settings.failover(),
        )
        await heartbeat.refuse_if_running()

    async def _sync_office(self) -> Office:
        """The configured office and its agents in the store (created or updated by role: one
        office a name and one agent a role, whatever engines start at once)."""
        office = await self.store.ensure_office(self.config.office.to_office())
        for agent_config in self.config.agents:
            agent = await self.store.upsert_agent(agent_config.to_agent(office.id))
            self.agents[agent.role] = agent
        return office

    def _job_workspace(self) -> JobWorkspace | None:
        """Jobs' branches (docs/JOBS.md "Shipping a job's work"), when sessions run in the
        office repository's worktrees."""
        assert self.manager is not None and self.store is not None
        worktrees = self.manager.worktrees
        if worktrees is None:
            return None
        return JobWorkspace(
            self.store, worktrees.repository, settings=self.config.git, worktrees=worktrees
        )

    def _worktrees(self) -> WorktreeManager | None:
        if self._folder_for is not None:
            return None
        settings = self.config.office
        return WorktreeManager(settings.repository, settings.workspace_root)

    def _launch_options(self, agent: Agent) -> LaunchOptions:
        config: AgentConfig | None = self.config.agent(agent.role)
        stale_after = self.config.engine.stale_after
        # every agent can commit: its git identity, unless its own env sets one
        identity = self.config.git.identity(agent.role, agent.name)
        if config is None:
            return LaunchOptions(stale_after=stale_after, env=identity)
        return LaunchOptions(
            profile=registry.profile_named(
                config.profile,
                prompt_pattern=config.prompt_pattern,
                reads_prompts=config.reads_prompts,
            ),
            env={**identity, **(config.env or {})},
            cols=config.cols,
            rows=config.rows,
            stale_after=config.stale_after or stale_after,
            permission_mode=config.permission_mode,
        )

    def _reads_prompts(self, agent: Agent) -> bool:
        """Whether `agent` reads typed text as a prompt for a model (its profile says)."""
        profile = self._launch_options(agent).profile or registry.profile_for_command(agent.command)
        return profile.reads_prompts

    def agent_launch_env(self, agent: Agent) -> dict[str, str]:
        """The environment `agent`'s sessions start with (hook tokens aside)."""
        assert self.manager is not None, "start() first"
        options = self._launch_options(agent)
        return {**self.manager.agent_env, **agent_env_values(options.env or {})}

    async def _take_over_jobs(self, office_id: str, keeper: ConversationKeeper) -> list[Job]:
        """The running jobs of certainly dead runs (`is_dead_run`) whose session is a recorded
        Claude Code conversation: taken over to be continued in it (before reconcile)."""
        sessions = {
            old_id: str(entry.get("engine_id"))
            for old_id, entry in keeper.entries.items()
            if entry.get("engine_id") and is_dead_run(str(entry["engine_id"]), self.engine_id)
        }
        if not sessions:
            return []

        def reason(engine_id: str) -> str:
            me = self.engine_id
            return f"engine {engine_id} stopped while running this job (found by {me} on start)"

        try:
            return await take_over_jobs(self.store, office_id, self.engine_id, sessions, reason)
        except StoreError as error:
            log.warning("taking over the jobs of resumed conversations failed: %s", error)
            return []

    async def _continue(self, jobs: list[Job], resumed: list[Resumed]) -> None:
        """Continue the jobs taken over, each in the session that resumed its conversation
        (a new one if the resume failed); the sessions resumed without a job are told they
        were restarted. Returns once each one's first prompt is queued: what the router types
        into them afterwards (results, answers) comes after."""
        assert self.jobs is not None and self.pool is not None
        by_old = {conversation.old_id: conversation for conversation in resumed}
        started: list[asyncio.Event] = []
        for job in jobs:
            conversation = by_old.pop(job.session_id or "", None)
            _task, queued = self.jobs.continue_job(
                job,
                resumed=conversation.session.session_id if conversation else None,
                note=conversation.note() if conversation else "",
            )
            started.append(queued)
        assert self.router is not None
        interrupted = await self._interrupted_agents()
        for conversation in by_old.values():
            agent_id = conversation.session.agent_id
            if agent_id in interrupted:  # one turn: its invocation again, with the note
                self.router.restart_note(agent_id, conversation.note())
            else:
                tell_restarted(conversation)
        if started:
            waits = [asyncio.ensure_future(event.wait()) for event in started]
            # a job whose conversation is gone starts a new session first: not waited for long
            _done, pending = await asyncio.wait(waits, timeout=self.pool.ready_timeout)
            for waiting in pending:
                waiting.cancel()

    async def _interrupted_agents(self) -> set[str]:
        """Agents whose interrupted invocation the router sends again (none if unreadable)."""
        assert self.router is not None
        try:
            return await self.router.interrupted_agents()
        except StoreError as error:
            log.warning("reading the interrupted invocations failed: %s", error)
            return set()

    async def _ship_job(self, payload: ShipJobPayload) -> dict[str, Any]:
        """A `ship_job` command: the job's steps (semo/engine/ship/command.py), the report back."""
        from semo.engine.ship.command import ship_command
        from semo.engine.ship.ship import ShipError

        try:
            return await ship_command(self.store, self.office_id, payload, self.config.ship)
        except ShipError as error:
            raise CommandFailed(str(error)) from None

    async def _create_session(self, payload: CreateSessionPayload) -> AgentSession:
        assert self.pool is not None
        pooled = await self.pool.acquire(role=payload.role, agent_id=payload.agent_id)
        return pooled.session

    def recovery_period(self) -> float:
        """Seconds between two recovery passes: as often as the heartbeat beats (at most a
        quarter of `failover_seconds`), so a dead engine is taken over within about
        1.25 x failover_seconds."""
        settings = self.config.engine
        return min(settings.lease_seconds, settings.failover() / BEATS_PER_LIMIT)

    async def _recover_expired(self) -> None:
        """Every `recovery_period()`: what dead engines of the office (on any host) left
        behind. A pass that fails is logged and the next one runs: this loop must never end
        early."""
        period = self.recovery_period()
        while True:
            await asyncio.sleep(period)
            try:
                await self._recover_once()
            except Exception:
                log.exception("a recovery pass failed; the next runs in %s s", period)

    async def _recover_once(self) -> None:
        """Commands whose lease expired (any engine's) go back to pending or fail; and, while
        this engine's own heartbeat is steady, the sessions of engines whose heartbeat ran out
        are ended, their running jobs failed and their questions cancelled."""
        try:
            recovered = await self.store.recover_expired()
        except StoreError as error:
            log.warning("recovering expired leases failed: %s", error)
        else:
            for command in recovered:
                log.warning("command %s: lease expired, now %s", command.id, command.status)
            jobs = [
                str(c.payload["job_id"])
                for c in recovered
                if c.command_type == "run_job" and c.status == "failed" and c.payload.get("job_id")
            ]
            if jobs and self.office is not None:  # a job not started keeps a command to run it
                try:
                    reason = "its run_job command's lease ran out before the job started"
                    await requeue_jobs(self.store, self.office.id, jobs, reason)
                except StoreError as error:
                    log.warning("requeueing jobs whose lease ran out failed: %s", error)
        await self._stop_sessions_ended_elsewhere()
        if self.heartbeat is None or self.office is None:
            return
        # engines of this machine whose process is gone are dead whatever the heartbeats say;
        # the others' silence is judged only while this engine's own beats are steady
        steady = self.heartbeat.steady()
        try:
            report = await end_silent_engines(
                self.store, self.office.id, self.engine_id, heartbeats=steady
            )
        except StoreError as error:
            log.warning("ending what silent engines left failed: %s", error)
            return
        if report.dead_engines:
            log.warning("engines that stopped answering: %s", report.describe())
            if self.notices is not None:
                self.notices.engines_died(report, "their heartbeat ran out")

    async def _stop_sessions_ended_elsewhere(self) -> None:
        """Sessions of this engine that the store says have ended stop here too: another engine
        took this one for dead (a network cut longer than its heartbeat's limit) and closed
        their commands and questions, or an operator ran `semo end-session`. Their agents must
        not go on working for nobody."""
        if self.manager is None:
            return
        live = [s for s in list(self.manager.sessions.values()) if not s.ended]
        for session in live:  # at most the pool's size: one read each
            try:
                row = await self.store.get_session(session.session_id)
            except NotFound:
                continue  # never recorded (the store was away when it started)
            except StoreError as error:
                log.warning("checking for sessions ended elsewhere failed: %s", error)
                return
            if row.status != "terminated" or session.ended:
                continue
            reason = f"ended in the store by someone else: {row.end_reason or 'no reason'}"
            log.warning("session %s %s; stopping its agent", session.session_id, reason)
            try:
                await self.manager.terminate(session.session_id, reason=reason)
            except UnknownSession:
                continue  # ended here meanwhile
            except Exception:
                log.exception("stopping session %s failed", session.session_id)

    def _on_session_event(self, session: AgentSession, event: SessionEvent) -> None:
        if self.office is not None and (bus := bus_event(self.office.id, session, event)):
            self.bus.publish(bus)

    def _status(self, status: EnginePhase, detail: str) -> None:
        if self.office is None:
            return
        log.info("engine %s %s: %s", self.engine_id, status, detail)
        self.bus.publish(
            EngineStatus(
                office_id=self.office.id,
                engine_id=self.engine_id,
                status=status,
                detail=detail,
            )
        )
