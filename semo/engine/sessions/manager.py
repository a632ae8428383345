"""SessionManager: creates agent sessions and carries out seed 001's operations on them.

    async with SessionManager(store=store, office_id=office.id) as manager:
        session = await manager.create(agent, working_dir=path)
        await session.wait_ready(30)
        result = await manager.execute(session.session_id, "Add /health", wait=True, timeout=300)

How it works: docs/SESSIONS.md, "The session manager".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from semo.engine.agents import registry
from semo.engine.agents.base import AgentProfile, WorktreeSetup
from semo.engine.agents.persona import PersonaInjector
from semo.engine.protocol.hooks import HookEvent, HookServer, default_hook_command
from semo.engine.protocol.monitor import DEFAULT_STALE_AFTER
from semo.engine.protocol.state import AgentState, StateChange
from semo.engine.sessions.agent_session import (
    TERMINATE_GRACE,
    AgentSession,
    PromptDelivered,
    SessionEvent,
    SessionListener,
    TurnResult,
)
from semo.engine.sessions.environment import agent_env_values, scrub
from semo.engine.sessions.worktrees import WorktreeManager
from semo.engine.store.base import Store, StoreConflict, StoreError
from semo.engine.store.models import Agent, new_id
from semo.engine.store.models import AgentSession as SessionRow

log = logging.getLogger("semo.sessions")

DEFAULT_COLS, DEFAULT_ROWS = 120, 40


class UnknownSession(LookupError):
    """No live session with that id on this engine."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"no session {session_id!r} on this engine")
        self.session_id = session_id


@dataclass(frozen=True)
class Output:
    """get_output's answer: the screen rows, or the last N lines."""

    lines: list[str]
    cols: int
    rows: int
    cursor: tuple[int, int]
    state: AgentState


@dataclass(frozen=True)
class LaunchOptions:
    """How an agent's CLI is started, beyond its command (from semo.toml's [[agents]])."""

    profile: AgentProfile | None = None
    env: Mapping[str, str] | None = None
    cols: int = DEFAULT_COLS
    rows: int = DEFAULT_ROWS
    stale_after: float = DEFAULT_STALE_AFTER
    #: the CLI's permission mode, written to the worktree's settings (None: left alone)
    permission_mode: str | None = None


def agent_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (default: ours) without credentials (`semo.engine.sessions.environment.scrub`)."""
    return scrub(os.environ if base is None else base)


def existing_folder(path: Path) -> Path:
    """`path` resolved; FileNotFoundError when it is not a folder."""
    folder = Path(path).expanduser().resolve()
    if not folder.is_dir():
        raise FileNotFoundError(f"working directory {path} does not exist")
    return folder


class SessionManager:
    def __init__(
        self,
        *,
        store: Store | None = None,
        office_id: str | None = None,
        engine_id: str = "local",
        agent_env: Mapping[str, str] | None = None,
        worktrees: WorktreeManager | None = None,
        persona: PersonaInjector | None = None,
        hook_command: Sequence[str] | None = None,
        runtime_dir: Path | None = None,
        record_dir: Path | None = None,
        launch_options: Callable[[Agent], LaunchOptions] | None = None,
        peers: Callable[[], Sequence[Agent]] | None = None,
    ) -> None:
        self.store = store
        self.office_id = office_id
        self.engine_id = engine_id
        self.agent_env = agent_environment(agent_env)
        self.worktrees = worktrees
        self.persona = persona or PersonaInjector()
        self.hook_command = list(hook_command or default_hook_command())
        self.hooks = HookServer(
            runtime_dir=runtime_dir, on_event=self._on_hook, events=registry.hook_events()
        )
        self.hooks.admit = self._admit_hook
        #: hook timeouts other than the default, by event (a PermissionRequest waits for a
        #: person: semo/engine/approval_policy.py ApprovalsSection.hook_timeout)
        self.hook_timeouts: dict[str, int] = {}
        self.record_dir = record_dir
        self.launch_options = launch_options or (lambda _agent: LaunchOptions())
        self.peers = peers or (lambda: ())
        self.sessions: dict[str, AgentSession] = {}
        self.rows: dict[str, SessionRow] = {}
        self._listeners: list[SessionListener] = []
        self._writes: asyncio.Queue[tuple[str, str, str | None]] = asyncio.Queue()
        self._writer: asyncio.Task[None] | None = None

    # -- life cycle ----------------------------------------------------------------------------

    async def start(self) -> SessionManager:
        if not self.hooks.serving:
            await self.hooks.start()
        if self.store is not None and self._writer is None:
            self._writer = asyncio.create_task(self._write_states(), name="session states")
        return self

    async def close(self, reason: str = "engine stopped", grace: float = TERMINATE_GRACE) -> None:
        """Terminate every session (all at once, each gets `grace` seconds to exit before it is
        killed) and stop the hook server."""
        await asyncio.gather(
            *(self.terminate(sid, reason=reason, grace=grace) for sid in list(self.sessions)),
            return_exceptions=True,
        )
        await self.hooks.close()
        if self._writer is not None:
            await self._writes.join()
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
            self._writer = None

    async def __aenter__(self) -> SessionManager:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def add_listener(self, listener: SessionListener) -> None:
        """Called with (session, event) for every event of every session."""
        self._listeners.append(listener)

    # -- create --------------------------------------------------------------------------------

    async def create(
        self,
        agent: Agent,
        *,
        working_dir: Path | None = None,
        task_id: str | None = None,
        profile: AgentProfile | None = None,
        peers: Sequence[Agent] | None = None,
        env: Mapping[str, str] | None = None,
        cols: int | None = None,
        rows: int | None = None,
    ) -> AgentSession:
        """Start `agent`'s CLI in `working_dir` (or in a new worktree for `task_id`).

        Unset options come from `launch_options(agent)`; `peers` (the agents it may invoke)
        from `peers()`."""
        await self.start()
        options = self.launch_options(agent)
        profile = profile or options.profile or registry.profile_for_command(agent.command)
        adapter = registry.adapter(profile.name)
        env = env if env is not None else options.env
        cols, rows = cols or options.cols, rows or options.rows
        peers = self.peers() if peers is None else peers
        session_id = new_id()
        folder = await self._folder(agent, working_dir, task_id or session_id[:8])
        launch_env = {**self.agent_env, **agent_env_values(env or {})}
        await adapter.prepare(
            WorktreeSetup(
                folder=folder,
                agent=agent,
                peers=[p for p in peers if p.id != agent.id],
                persona=self.persona,
                hook_command=self.hook_command,
                hook_timeouts=self.hook_timeouts,
                permission_mode=options.permission_mode,
                env=self.agent_env,
            )
        )
        token_env = {}
        if profile.uses_hooks:
            reader = adapter.turn_text_reader(folder, launch_env)
            self.hooks.register_session(session_id, transcripts=reader)
            token_env = self.hooks.env_for(session_id)
        child_env = {**launch_env, **token_env}
        record = self.record_dir / f"{session_id}.cast" if self.record_dir else None
        session = AgentSession(
            session_id,
            agent.command,
            profile,
            adapter=adapter,
            role=agent.role,
            agent_id=agent.id,
            cwd=folder,
            env=child_env,
            cols=cols,
            rows=rows,
            record=record,
            stale_after=options.stale_after,
        )
        session.add_listener(self._on_session_event)
        try:
            session.start()
        except Exception:
            self.hooks.unregister(session_id)
            raise
        self.sessions[session_id] = session
        log.info(
            "session %s: %s (%s) started in %s, pid %s",
            session_id,
            agent.role,
            profile.name,
            folder,
            session.pid,
        )
        await self._record_created(session, agent)
        return session

    async def _folder(self, agent: Agent, working_dir: Path | None, task_id: str) -> Path:
        if working_dir is not None:
            return existing_folder(working_dir)
        if self.worktrees is None:
            raise ValueError(
                "no working directory given and no repository configured for worktrees"
            )
        worktree = await self.worktrees.create(agent.role, task_id)
        return worktree.path

    # -- operations (seed 001) ------------------------------------------------------------------

    def get(self, session_id: str) -> AgentSession:
        try:
            return self.sessions[session_id]
        except KeyError:
            raise UnknownSession(session_id) from None

    def send_prompt(self, session_id: str, text: str) -> asyncio.Future[PromptDelivered]:
        """Queue a prompt; it is typed when the agent is ready."""
        return self.get(session_id).submit(text)

    async def execute(
        self, session_id: str, text: str, *, wait: bool = False, timeout: float = 30.0
    ) -> TurnResult | PromptDelivered:
        """Deliver `text`; with `wait`, also wait for the turn it starts to end."""
        session = self.get(session_id)
        if wait:
            return await session.execute(text, timeout=timeout)
        return await session.deliver(text, timeout=timeout)

    def send_text(self, session_id: str, text: str) -> None:
        self.get(session_id).write(text)

    async def send_keys(self, session_id: str, keys: str) -> None:
        await self.get(session_id).send_keys(keys)

    def get_output(self, session_id: str, lines: int | None = None) -> Output:
        session = self.get(session_id)
        screen = session.terminal.screen
        text = session.last_lines(lines) if lines else session.screen_rows()
        return Output(
            text, screen.columns, screen.lines, (screen.cursor.x, screen.cursor.y), session.state
        )

    async def cancel(self, session_id: str, *, by_operator: bool = False) -> None:
        await self.get(session_id).cancel(by_operator=by_operator)

    def resize(self, session_id: str, cols: int, rows: int) -> None:
        if not (1 <= cols <= 1000 and 1 <= rows <= 1000):
            raise ValueError(f"terminal size {cols}x{rows} is out of range (1..1000)")
        self.get(session_id).resize(cols, rows)

    async def terminate(
        self, session_id: str, *, reason: str = "terminated", grace: float = TERMINATE_GRACE
    ) -> None:
        session = self.get(session_id)
        await session.terminate(reason, grace)
        self.sessions.pop(session_id, None)
        self.hooks.unregister(session_id)
        await self._record_ended(session_id, reason)

    # -- events --------------------------------------------------------------------------------

    def _admit_hook(self, session_key: str, event: str) -> bool:
        """Whether the session's CLI can have sent `event` now (its turn gate); a report for a
        session this manager does not know goes on to `_on_hook`, which drops it."""
        session = self.sessions.get(session_key)
        return session is None or session.turns.admit(event)

    def _on_hook(self, event: HookEvent) -> None:
        session = self.sessions.get(event.session_key)
        if session is None:
            log.warning("hook %s for unknown session %s dropped", event.event, event.session_key)
            return
        session.on_hook(event)

    def _on_session_event(self, session: AgentSession, event: SessionEvent) -> None:
        if isinstance(event, StateChange):
            log.info(
                "session %s (%s): %s -> %s (%s: %s)",
                session.session_id,
                session.role,
                event.previous,
                event.state,
                event.source,
                event.reason,
            )
            if self.store is not None:
                self._writes.put_nowait((session.session_id, str(event.state), event.reason))
        for listener in self._listeners:
            try:
                listener(session, event)
            except Exception:
                log.exception("session manager listener failed")

    # -- store ---------------------------------------------------------------------------------

    async def _record_created(self, session: AgentSession, agent: Agent) -> None:
        if self.store is None or self.office_id is None:
            return
        row = SessionRow(
            session_id=session.session_id,
            office_id=self.office_id,
            agent_id=agent.id,
            worktree_id=str(session.cwd) if session.cwd else None,
            status=session.state.value,
            engine_id=self.engine_id,
            pid=session.pid,
        )
        try:
            self.rows[session.session_id] = await self.store.upsert_session(row)
        except StoreError as error:
            log.warning("session %s: not recorded in the store: %s", session.session_id, error)
            return
        if session.state.value != row.status:  # it moved on while the row was being written
            self._writes.put_nowait((session.session_id, session.state.value, "caught up"))

    async def _record_ended(self, session_id: str, reason: str) -> None:
        if self.store is not None:
            self._writes.put_nowait((session_id, "terminated", reason))
            await self._writes.join()

    async def _write_states(self) -> None:
        assert self.store is not None
        while True:
            session_id, status, reason = await self._writes.get()
            try:
                if session_id in self.rows:
                    # SessionState's values are the store's SessionStatus names (a str here)
                    await self.store.set_session_status(session_id, status, reason=reason)  # type: ignore[arg-type]
            except StoreConflict as error:
                if status != "terminated":
                    log.warning("session %s: state %s not recorded: %s", session_id, status, error)
                else:  # recorded ended already (its state change, or another engine): kept
                    log.debug("session %s: %s", session_id, error)
            except StoreError as error:
                log.warning("session %s: state %s not recorded: %s", session_id, status, error)
            except Exception:
                log.exception("session %s: state %s not recorded", session_id, status)
            finally:
                self._writes.task_done()
