"""The session pool of an office (seed 004): warm sessions, cold ones on demand, a hard limit.

    pool = SessionPoolManager(manager, {a.role: a for a in agents}, max_sessions=6)
    await pool.start()                                  # FE, BE, QA started and ready
    lease = await pool.acquire(role="BE", task_id="task-42")
    result = await lease.session.execute("Add /health", timeout=300)
    pool.release(lease.session_id)                      # back to idle; its idle clock starts

How it works: docs/SESSIONS.md, "The pool".
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict

from semo.engine.protocol.state import AgentState, StateChange
from semo.engine.sessions.agent_session import (
    TERMINATE_GRACE,
    AgentSession,
    SessionEnded,
    SessionEvent,
)
from semo.engine.sessions.breaker import BreakerState, CircuitBreaker
from semo.engine.sessions.manager import SessionManager, UnknownSession
from semo.engine.sessions.pool_words import EVICTED
from semo.engine.sessions.worktrees import Worktree, WorktreeError, validate_task_id
from semo.engine.store.models import Agent, new_id

if TYPE_CHECKING:
    from semo.engine.config import PoolConfig

__all__ = [
    "DEFAULT_WARM_ROLES",
    "WARM_TASK_ID",
    "AgentResolver",
    "BreakerOpen",
    "FolderFor",
    "NotInPool",
    "NotLeased",
    "PoolClosed",
    "PoolError",
    "PoolExhausted",
    "PoolStatus",
    "PoolWaiter",
    "PooledSession",
    "PooledSessionStatus",
    "RoleBreakerStatus",
    "SessionPoolManager",
    "SessionStartFailed",
    "UnknownRole",
    "warm_place",
    "warm_task_id",
]

log = logging.getLogger("semo.pool")

DEFAULT_WARM_ROLES = ("FE", "BE", "QA")
#: The task id (and worktree folder name) of a role's warm session: `warm-<role>-<place>`,
#: unique in the office (roles differ in more than case), so that the warm worktrees' git
#: admin folders never share a name either, and unique to the office and the workspace (the
#: place), so that engines or offices sharing one repository never share a warm branch
#: (`semo/<role>/warm-<role>-<place>`; see `warm_task_id`).
WARM_TASK_ID = "warm"


def warm_task_id(role: str, place: str | None = None) -> str:
    """The task id of `role`'s warm session, e.g. ``warm-fe``, and with `place` (what makes
    the engine's worktrees its own: its office and workspace, `warm_place`) a short digest of
    it, e.g. ``warm-fe-3f2a9c1b``."""
    base = f"{WARM_TASK_ID}-{role.lower()}"
    if place is None:
        return base
    return f"{base}-{hashlib.sha256(place.encode()).hexdigest()[:8]}"


def warm_place(office_id: str, workspace_root: Path) -> str:
    """What makes an engine's warm worktrees its own: its office and its workspace's real
    path (stable across restarts, so a restarted engine finds its warm worktree again)."""
    return f"{office_id}:{os.path.realpath(workspace_root)}"


#: Session ids the pool dropped after they ended on their own, remembered for `release`.
_ENDED_MEMORY = 256

#: (role, agent_id) -> the office's agent, or None when there is none.
AgentResolver = Callable[[str | None, str | None], Agent | None]
#: (agent, task_id) -> the folder to run the session in, or None for a worktree.
FolderFor = Callable[[Agent, str], Path | None]

_T = TypeVar("_T")


# -- errors ---------------------------------------------------------------------------------------


class PoolError(Exception):
    """A pool operation that cannot be done; the message says why and what to do."""


class PoolExhausted(PoolError):
    """The office has max_sessions sessions and none of them is free for the request."""


class UnknownRole(PoolError, LookupError):
    def __init__(self, wanted: str, known: Iterable[str], *, what: str = "role") -> None:
        names = ", ".join(sorted(set(known))) or "none"
        super().__init__(f"the office has no agent with {what} {wanted!r} (roles: {names})")
        self.wanted = wanted
        self.known = sorted(set(known))


class BreakerOpen(PoolError):
    """The role's sessions keep failing; the pool starts none for a while."""

    def __init__(self, role: str, retry_after: float, message: str) -> None:
        super().__init__(message)
        self.role = role
        self.retry_after = retry_after


class SessionStartFailed(PoolError):
    """A session was started for the request but did not reach its prompt."""


class PoolClosed(PoolError):
    pass


class NotInPool(PoolError, LookupError):
    pass


class NotLeased(PoolError):
    pass


# -- what the pool holds ----------------------------------------------------------------------


@dataclass(eq=False)
class PooledSession:
    """A session of the pool; :meth:`SessionPoolManager.acquire` hands these out (the same
    object every time the same session is leased)."""

    session: AgentSession
    agent: Agent
    role: str
    warm: bool
    created_at: float  # the pool's clock
    folder: Path | None = None
    worktree: Worktree | None = None  # made by the pool; removed when the session is reaped
    task_id: str | None = None  # the current lease's task
    leased_at: float | None = None
    released_at: float | None = None
    ready_since: float | None = None
    closing: bool = field(default=False, repr=False)

    @property
    def session_id(self) -> str:
        return self.session.session_id

    @property
    def leased(self) -> bool:
        return self.leased_at is not None

    def idle_since(self) -> float | None:
        """Since when the session is idle (not leased and ready), or None when it is not."""
        if self.leased or self.closing or self.session.state != AgentState.READY:
            return None
        return max(
            self.released_at if self.released_at is not None else self.created_at,
            self.ready_since if self.ready_since is not None else self.created_at,
        )


class PooledSessionStatus(BaseModel):
    model_config = ConfigDict(frozen=True)

    session_id: str
    role: str
    agent_id: str
    warm: bool
    leased: bool
    task_id: str | None
    state: AgentState
    pid: int | None
    folder: str | None
    age_s: float
    idle_s: float | None  # None while leased or not ready
    leased_s: float | None  # None while not leased


class RoleBreakerStatus(BaseModel):
    model_config = ConfigDict(frozen=True)

    state: BreakerState
    failures: int
    retry_after_s: float


class PoolWaiter(BaseModel):
    """An acquire call waiting for a session: its role, its task (a job's is `job-<id>`) and
    for how long."""

    model_config = ConfigDict(frozen=True)

    role: str
    task_id: str | None
    waited_s: float


class PoolStatus(BaseModel):
    """What the console and ``semo engine`` show about the pool."""

    model_config = ConfigDict(frozen=True)

    max_sessions: int
    warm_roles: list[str]
    sessions: dict[str, PooledSessionStatus]  # by session id: warm first, then by age
    total: int  # sessions in the pool, starting ones included
    starting: int
    warm: int
    cold: int
    leased: int
    idle: int
    waiting: int  # acquire calls waiting for a session
    waiters: list[PoolWaiter] = []  # those calls, the longest waiting first
    down: dict[str, str]  # warm roles without a session: why
    breakers: dict[str, RoleBreakerStatus]  # per known role
    closed: bool

    def summary(self) -> str:
        """One short line for a text log: counts, then what is down or broken, by role."""
        parts = [
            f"{self.total}/{self.max_sessions} sessions (warm {self.warm}, cold {self.cold}; "
            f"leased {self.leased}, idle {self.idle}, starting {self.starting})",
            f"{self.waiting} waiting",
        ]
        if self.down:
            parts.append("down: " + ", ".join(sorted(self.down)))
        broken = sorted(
            f"{role} {breaker.state.value} ({breaker.retry_after_s:.0f} s)"
            for role, breaker in self.breakers.items()
            if breaker.state is not BreakerState.CLOSED
        )
        if broken:
            parts.append("breakers: " + ", ".join(broken))
        return "; ".join(parts)


# -- the pool -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Start:
    """A reserved slot: whether the new session is the role's warm one, and whom it evicts."""

    warm: bool
    evict: tuple[PooledSession, str] | None


class SessionPoolManager:
    """One office's session pool on top of a :class:`SessionManager` (see the module doc)."""

    def __init__(
        self,
        manager: SessionManager,
        agents: Mapping[str, Agent] | AgentResolver,
        *,
        max_sessions: int = 6,
        warm_roles: Iterable[str] = DEFAULT_WARM_ROLES,
        idle_timeout: float = 600.0,
        breaker: CircuitBreaker | None = None,
        ready_timeout: float = 60.0,
        folder_for: FolderFor | None = None,
        on_change: Callable[[PoolStatus], object] | None = None,
        period: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        warm = list(warm_roles)
        if max_sessions < 1:
            raise ValueError("max_sessions must be at least 1")
        if len(set(warm)) != len(warm):
            raise ValueError(f"warm roles listed twice: {warm}")
        if len(warm) > max_sessions:
            raise ValueError(f"{len(warm)} warm roles do not fit in max_sessions = {max_sessions}")
        if idle_timeout <= 0 or ready_timeout <= 0 or period <= 0:
            raise ValueError("idle_timeout, ready_timeout and period must be positive")
        if isinstance(agents, Mapping):
            for key, agent in agents.items():
                if key != agent.role:
                    raise ValueError(f"agent {agent.name!r} has role {agent.role!r}, not {key!r}")
        self.manager = manager
        self.agents = agents
        self.max_sessions = max_sessions
        self.warm_roles = warm
        self.idle_timeout = float(idle_timeout)
        self.breaker = breaker or CircuitBreaker(3, 60.0, 30.0)
        self.ready_timeout = float(ready_timeout)
        self.folder_for: FolderFor = folder_for or (lambda _agent, _task: None)
        self.on_change = on_change
        self.period = float(period)
        self.clock = clock

        self._entries: dict[str, PooledSession] = {}
        self._pending: dict[str, int] = {}  # role -> sessions being started (slots reserved)
        self._warm_starting: set[str] = set()
        self._starting: dict[str, AgentSession] = {}  # created, not yet ready
        self._down: dict[str, str] = {}  # warm role -> why it has no session
        self._hold: set[str] = set()  # warm roles not to restart (terminated by someone else)
        self._ended: OrderedDict[str, str] = OrderedDict()  # dropped session id -> why
        self._tasks: set[asyncio.Task[Any]] = set()
        self._housekeeper: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        self._waiting = 0
        self._waiters: dict[int, tuple[str, str | None, float]] = {}  # role, task, since
        self._started = False
        self._closed = False
        manager.add_listener(self._on_session_event)

    @classmethod
    def from_config(
        cls,
        manager: SessionManager,
        agents: Mapping[str, Agent] | AgentResolver,
        config: PoolConfig,
        **options: Any,
    ) -> SessionPoolManager:
        """A pool with the ``[pool]`` settings of semo.toml (options override/add to them)."""
        breaker = options.pop("breaker", None) or CircuitBreaker(
            failure_threshold=config.restart_failures,
            window_seconds=config.restart_window,
            reset_timeout=config.restart_cooldown,
        )
        options.setdefault("max_sessions", config.max_sessions)
        options.setdefault("warm_roles", config.warm_roles)
        options.setdefault("idle_timeout", config.idle_timeout)
        return cls(manager, agents, breaker=breaker, **options)

    # -- life cycle ----------------------------------------------------------------------------

    async def start(self) -> SessionPoolManager:
        """Start the warm sessions (concurrently) and wait until each is ready or has failed."""
        self._check_open()
        if self._started:
            return self
        self._started = True
        await self.manager.start()
        for role in self.warm_roles:
            if not self._has_warm(role):  # an adopted warm session is not started again
                self._down.setdefault(role, "starting")
        before = set(self._tasks)
        self._ensure_warm()
        await asyncio.gather(*(self._tasks - before), return_exceptions=True)
        self._check_open()  # closed while the warm sessions were starting
        self._housekeeper = asyncio.create_task(self._housekeeping(), name="session pool")
        for role, reason in self._down.items():
            log.warning("pool: warm %s session not running: %s", role, reason)
        self._emit()
        return self

    async def close(self, reason: str = "pool closed", grace: float = TERMINATE_GRACE) -> None:
        """Terminate every session of the pool and stop its tasks; waiting acquires fail.
        Every session (starting or not) is signalled at once and gets `grace` seconds to exit
        before it is killed: closing takes `grace`, not `grace` per session."""
        if self._closed:
            return
        self._closed = True
        self._emit()  # wakes waiting acquires: they raise PoolClosed
        if self._housekeeper is not None:
            self._housekeeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._housekeeper
        # no entry is added once closed (a start checks after its session got ready)
        entries = self._take_entries()
        await asyncio.gather(
            *(s.terminate(reason, grace) for s in list(self._starting.values())),
            *(self._terminate(entry, reason, grace) for entry in entries),
            return_exceptions=True,
        )
        while self._tasks:  # starts end (their sessions were terminated), cleanups finish
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        await asyncio.gather(
            *(self._terminate(entry, reason, grace) for entry in self._take_entries()),
            return_exceptions=True,
        )
        self._emit()

    def _take_entries(self) -> list[PooledSession]:
        """The pool's sessions, marked closing and removed from it (close() ends them)."""
        entries = list(self._entries.values())
        for entry in entries:
            entry.closing = True
        self._entries.clear()
        return entries

    async def __aenter__(self) -> SessionPoolManager:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- leases --------------------------------------------------------------------------------

    async def acquire(
        self,
        *,
        role: str | None = None,
        agent_id: str | None = None,
        task_id: str | None = None,
        wait: float | None = 0.0,
        prefer: str | None = None,
        on_wait: Callable[[str], None] | None = None,
    ) -> PooledSession:
        """A ready session of the role (or agent), leased to the caller until :meth:`release`.

        `prefer`: a session id to lease first, if it is the pool's, of the agent, alive and not
        leased, whatever its state (a resumed Claude Code conversation that is still starting
        or busy: the caller's delivery waits for its prompt); else the usual choice.
        `wait`: seconds to wait for a session when none is free; None: as long as it takes
        (the caller cancels the call to stop waiting). `on_wait`: told once, with what the
        office's sessions are doing ("office has 2/2 sessions, all busy"), when the request
        starts waiting.

        Raises UnknownRole, BreakerOpen, PoolExhausted (at once, or after `wait` seconds),
        SessionStartFailed (a new session did not reach its prompt) or PoolClosed.
        """
        self._check_open()
        if not self._started:
            raise PoolError("the session pool is not started; await pool.start() first")
        agent = self._resolve(role, agent_id)
        if task_id is not None:
            validate_task_id(task_id)
        preferred = self._entries.get(prefer or "")
        if (
            preferred is not None
            and preferred.agent.id == agent.id
            and not (preferred.leased or preferred.closing or preferred.session.ended)
        ):
            self._lease(preferred, task_id)
            return preferred
        loop = asyncio.get_running_loop()
        deadline = None if wait is None else loop.time() + max(0.0, wait)
        waiting = False
        waiter_key = object()  # this call's key in _waiters
        try:
            while True:
                changed = self._changed
                entry = self._take_idle(agent, task_id)
                if entry is not None:
                    return entry
                self._check_breaker(agent.role)
                start = self._reserve_start(agent)
                if start is not None:
                    return await self._start_leased(agent, task_id, start)
                remaining = None if deadline is None else deadline - loop.time()
                if remaining is not None and remaining <= 0:
                    raise PoolExhausted(self._exhausted_message(agent.role, wait or 0.0))
                if not waiting:  # report the waiter, then look again: the report may free one
                    waiting = True
                    self._waiting += 1
                    self._waiters[id(waiter_key)] = (agent.role, task_id, self.clock())
                    self._emit()
                    if on_wait is not None:
                        on_wait(self._occupancy(agent.role))
                    continue
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), remaining)
                self._check_open()
        finally:
            if waiting:
                self._waiting -= 1
                self._waiters.pop(id(waiter_key), None)
                self._emit()

    def release(self, session_id: str) -> None:
        """Give a leased session back: it is idle from now (cold ones are reaped after
        idle_timeout). A session that ended while leased was already dropped: a no-op."""
        entry = self._entries.get(session_id)
        if entry is None:
            if session_id in self._ended:
                log.info("pool: release of %s, which %s", session_id, self._ended[session_id])
                return
            raise NotInPool(f"session {session_id!r} is not in the pool; nothing to release")
        if not entry.leased:
            raise NotLeased(
                f"session {session_id} ({entry.role}) is not leased; it was released already "
                "or never acquired"
            )
        entry.leased_at = None
        entry.task_id = None
        entry.released_at = self.clock()
        log.info("pool: %s session %s released", entry.role, session_id)
        self._emit()

    def adopt(
        self, session: AgentSession, agent: Agent, worktree: Worktree | None, *, warm: bool = False
    ) -> PooledSession:
        """A session started outside the pool (a Claude Code conversation an engine restart
        resumed, semo.engine.control.resume) becomes a session of it: listed, leased to tasks of its
        agent (first to its worktree's task). A cold one is reaped once idle, and `worktree`
        removed then unless another session of the pool uses the folder. With `warm` (it runs in
        its role's warm worktree), it is the role's warm session when the role is warm and has
        none yet: the pool starts no other one for the role (adopt it before :meth:`start`)."""
        self._check_open()
        now = self.clock()
        warm = warm and agent.role in self.warm_roles and not self._has_warm(agent.role)
        if warm:
            self._down.pop(agent.role, None)
        entry = PooledSession(
            session=session,
            agent=agent,
            role=agent.role,
            warm=warm,
            created_at=now,
            folder=session.cwd,
            worktree=worktree,
            ready_since=now if session.state == AgentState.READY else None,
        )
        self._entries[session.session_id] = entry
        log.info(
            "pool: %s %s session %s adopted (%s)",
            "warm" if warm else "cold",
            agent.role,
            session.session_id,
            session.cwd,
        )
        self._emit()
        return entry

    def get(self, session_id: str) -> PooledSession:
        try:
            return self._entries[session_id]
        except KeyError:
            raise NotInPool(f"session {session_id!r} is not in the pool") from None

    @property
    def sessions(self) -> list[PooledSession]:
        return list(self._entries.values())

    # -- status --------------------------------------------------------------------------------

    def status(self) -> PoolStatus:
        now = self.clock()
        entries = sorted(self._entries.values(), key=lambda e: (not e.warm, e.created_at))
        sessions: dict[str, PooledSessionStatus] = {}
        for entry in entries:
            idle = entry.idle_since()
            sessions[entry.session_id] = PooledSessionStatus(
                session_id=entry.session_id,
                role=entry.role,
                agent_id=entry.agent.id,
                warm=entry.warm,
                leased=entry.leased,
                task_id=entry.task_id,
                state=entry.session.state,
                pid=entry.session.pid,
                folder=str(entry.folder) if entry.folder is not None else None,
                age_s=round(max(0.0, now - entry.created_at), 3),
                idle_s=round(max(0.0, now - idle), 3) if idle is not None else None,
                leased_s=(
                    round(max(0.0, now - entry.leased_at), 3)
                    if entry.leased_at is not None
                    else None
                ),
            )
        starting = sum(self._pending.values())
        breakers = {
            role: RoleBreakerStatus(
                state=self.breaker.state(role),
                failures=self.breaker.failures(role),
                retry_after_s=round(self.breaker.retry_after(role), 3),
            )
            for role in sorted(self._known_roles())
        }
        return PoolStatus(
            max_sessions=self.max_sessions,
            warm_roles=list(self.warm_roles),
            sessions=sessions,
            total=len(entries) + starting,
            starting=starting,
            warm=sum(e.warm for e in entries),
            cold=sum(not e.warm for e in entries),
            leased=sum(e.leased for e in entries),
            idle=sum(e.idle_since() is not None for e in entries),
            waiting=self._waiting,
            waiters=[
                PoolWaiter(role=role, task_id=task, waited_s=round(max(0.0, now - since), 3))
                for role, task, since in sorted(self._waiters.values(), key=lambda w: w[2])
            ],
            down=dict(self._down),
            breakers=breakers,
            closed=self._closed,
        )

    # -- acquire's parts -----------------------------------------------------------------------

    def _resolve(self, role: str | None, agent_id: str | None) -> Agent:
        if role is None and agent_id is None:
            raise ValueError("acquire needs a role or an agent_id")
        if isinstance(self.agents, Mapping):
            if agent_id is not None:
                agent = next((a for a in self.agents.values() if a.id == agent_id), None)
            else:
                agent = self.agents.get(role or "")
        else:
            agent = self.agents(role, agent_id)
        if agent is None:
            if agent_id is not None:
                raise UnknownRole(agent_id, self._known_roles(), what="id")
            raise UnknownRole(role or "", self._known_roles())
        if role is not None and agent.role != role:
            raise ValueError(f"agent {agent_id} has role {agent.role}, not {role}")
        return agent

    def _known_roles(self) -> set[str]:
        roles = set(self.warm_roles) | {e.role for e in self._entries.values()}
        tripped = self.breaker.keys()  # roles with failures on record
        roles |= {str(key) for key in tripped}
        if isinstance(self.agents, Mapping):
            roles |= set(self.agents)
        return roles

    def _take_idle(self, agent: Agent, task_id: str | None) -> PooledSession | None:
        free = [
            e
            for e in self._entries.values()
            if e.agent.id == agent.id and e.idle_since() is not None
        ]
        if not free:
            return None
        entry = min(
            free,
            key=lambda e: (
                not e.warm,
                task_id is None or e.worktree is None or e.worktree.task_id != task_id,
                -(e.released_at or e.created_at),
            ),
        )
        self._lease(entry, task_id)
        return entry

    def _lease(self, entry: PooledSession, task_id: str | None) -> None:
        entry.leased_at = self.clock()
        entry.task_id = task_id
        log.info(
            "pool: %s %s session %s leased (task %s)",
            "warm" if entry.warm else "cold",
            entry.role,
            entry.session_id,
            task_id,
        )
        self._emit()

    def _check_breaker(self, role: str) -> None:
        state = self.breaker.state(role)
        if state == BreakerState.OPEN:
            retry_after = self.breaker.retry_after(role)
            if retry_after > 0:
                raise BreakerOpen(
                    role,
                    retry_after,
                    f"{role} sessions keep failing (circuit breaker open): no {role} session "
                    f"is started for {retry_after:.1f} s more; retry after that",
                )
        elif state == BreakerState.HALF_OPEN:
            raise self._trial_under_way(role)

    def _trial_under_way(self, role: str) -> BreakerOpen:
        return BreakerOpen(
            role,
            0.0,
            f"{role} sessions kept failing (circuit breaker half-open): a trial {role} session "
            "is being started; retry in a moment",
        )

    def _live(self) -> int:
        return len(self._entries) + sum(self._pending.values())

    def _reserve_start(self, agent: Agent) -> _Start | None:
        """Reserve a slot for a new session of `agent` (evicting the longest-idle cold session
        of another agent when the office is full), or None when there is no slot."""
        evict = None
        if self._live() >= self.max_sessions:
            idle = [(e.idle_since(), e) for e in self._entries.values() if not e.warm]
            idle_cold = [(since, e) for since, e in idle if since is not None]
            if not idle_cold:
                return None
            since, victim = min(idle_cold, key=lambda item: item[0])
            reason = f"{EVICTED} for a {agent.role} session (idle {self.clock() - since:.0f} s)"
            log.warning(
                "pool: full (%d/%d): idle cold %s session %s %s",
                self._live(),
                self.max_sessions,
                victim.role,
                victim.session_id,
                reason,
            )
            evict = (victim, reason)
        if not self.breaker.allow(agent.role):
            raise self._trial_under_way(agent.role)
        if evict is not None:
            evict[0].closing = True
            del self._entries[evict[0].session_id]
        warm = agent.role in self.warm_roles and not self._has_warm(agent.role)
        self._reserve(agent.role, warm)
        return _Start(warm, evict)

    def _reserve(self, role: str, warm: bool) -> None:
        self._pending[role] = self._pending.get(role, 0) + 1
        if warm:
            self._warm_starting.add(role)
            self._hold.discard(role)

    def _unreserve(self, role: str, warm: bool) -> None:
        self._pending[role] -= 1
        if not self._pending[role]:
            del self._pending[role]
        if warm:
            self._warm_starting.discard(role)

    def _has_warm(self, role: str) -> bool:
        return role in self._warm_starting or any(
            e.warm and e.role == role for e in self._entries.values()
        )

    async def _start_leased(
        self, agent: Agent, task_id: str | None, start: _Start
    ) -> PooledSession:
        task = self._spawn(
            self._start(agent, task_id, warm=start.warm, lease=True, evict=start.evict),
            f"pool start {agent.role}",
        )
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():  # the caller gave up; the session must not stay leased
                task.add_done_callback(self._release_orphan)
            raise

    def _release_orphan(self, task: asyncio.Task[PooledSession]) -> None:
        if task.cancelled() or task.exception() is not None:
            return
        entry = task.result()
        if entry.session_id in self._entries and entry.leased:
            self.release(entry.session_id)

    def _exhausted_message(self, role: str, wait: float) -> str:
        waited = f" (waited {wait:g} s)" if wait > 0 else ""
        return f"{self._occupancy(role)}{waited}; release one or raise [pool] max_sessions"

    def _occupancy(self, role: str) -> str:
        """What the office's sessions are doing, for a request of `role` that found none free:
        "office has 6/6 sessions, all busy"."""
        entries = self._entries.values()
        leased = sum(e.leased for e in entries)
        starting = sum(self._pending.values())
        total = self._live()
        if leased + starting == total:
            what = "all busy"
        else:
            parts = [f"{leased} leased"]
            if starting:
                parts.append(f"{starting} starting")
            warm_idle = sum(e.warm and not e.leased and e.role != role for e in entries)
            if warm_idle:
                parts.append(f"{warm_idle} warm of other roles")
            other = total - leased - starting - warm_idle
            if other:
                parts.append(f"{other} not ready")
            what = f"none free for {role} ({', '.join(parts)})"
        return f"office has {total}/{self.max_sessions} sessions, {what}"

    # -- starting sessions ---------------------------------------------------------------------

    async def _start(
        self,
        agent: Agent,
        task_id: str | None,
        *,
        warm: bool,
        lease: bool,
        evict: tuple[PooledSession, str] | None = None,
    ) -> PooledSession:
        """Start a session in a reserved slot; the caller reserved it (and got the breaker's
        permission). Reports the outcome to the breaker."""
        role = agent.role
        session: AgentSession | None = None
        worktree: Worktree | None = None
        folder_task = self._warm_task(agent) if warm else task_id or f"pool-{new_id()[:8]}"
        try:
            if evict is not None:
                await self._retire(*evict)
            self._check_open()
            folder, worktree = await self._folder(agent, folder_task)
            self._check_open()
            session = await self.manager.create(
                agent, working_dir=folder, task_id=folder_task, **self._peers()
            )
            self._starting[session.session_id] = session
            try:
                self._check_open()  # close() terminates what is in _starting: this was not
                await session.wait_ready(self.ready_timeout)
            finally:
                self._starting.pop(session.session_id, None)
            self._check_open()
        except BaseException as error:
            failed = not self._closed and isinstance(error, Exception)
            if failed or self.breaker.state(role) == BreakerState.HALF_OPEN:
                self.breaker.record_failure(role)
            if session is not None:
                with contextlib.suppress(Exception):
                    await self.manager.terminate(session.session_id, reason="did not start")
            if worktree is not None and not warm and task_id is None:
                await self._remove_worktree(worktree)  # made for this start only
            self._unreserve(role, warm)
            if isinstance(error, PoolClosed | asyncio.CancelledError) or self._closed:
                self._emit()
                if isinstance(error, Exception):
                    raise PoolClosed("the session pool was closed") from error
                raise
            reason = _start_error(error, session)
            log.warning("pool: %s session did not start: %s", role, reason)
            if warm:
                self._down[role] = f"did not start: {reason}"
                self._ensure_warm()  # again, while the breaker allows
            self._emit()
            raise SessionStartFailed(f"a {role} session did not start: {reason}") from error
        now = self.clock()
        entry = PooledSession(
            session=session,
            agent=agent,
            role=role,
            warm=warm,
            created_at=now,
            folder=session.cwd,
            worktree=worktree,
            ready_since=now,
        )
        self._unreserve(role, warm)
        self._entries[session.session_id] = entry
        if warm:
            self._down.pop(role, None)
        self.breaker.record_success(role)
        log.info(
            "pool: %s %s session %s ready (pid %s)",
            "warm" if warm else "cold",
            role,
            session.session_id,
            session.pid,
        )
        if lease:
            self._lease(entry, task_id)  # emits
        else:
            self._emit()
        return entry

    def _warm_task(self, agent: Agent) -> str:
        """The task id of the agent's warm session here (`warm_task_id`)."""
        worktrees = self.manager.worktrees
        if worktrees is None:
            return warm_task_id(agent.role)
        return warm_task_id(agent.role, warm_place(agent.office_id, worktrees.workspace_root))

    async def _folder(self, agent: Agent, task_id: str) -> tuple[Path | None, Worktree | None]:
        folder = self.folder_for(agent, task_id)
        if folder is not None:
            return Path(folder), None
        worktrees = self.manager.worktrees
        if worktrees is None:
            raise ValueError(
                f"no folder for {agent.role}: folder_for gave none and no repository is "
                "configured for worktrees"
            )
        worktree = await worktrees.create(agent.role, task_id)
        return worktree.path, worktree

    def _peers(self) -> dict[str, Any]:
        """The office's agents as the persona's peers; with a resolver, the manager's own."""
        if isinstance(self.agents, Mapping):
            return {"peers": list(self.agents.values())}
        return {}

    def _ensure_warm(self) -> None:
        """Start the warm roles that have no session, as far as slots and the breaker allow."""
        if self._closed or not self._started:
            return
        for role in self.warm_roles:
            if role not in self._down or role in self._hold or self._has_warm(role):
                continue
            if self._live() >= self.max_sessions:
                continue
            try:
                agent = self._resolve(role, None)
            except (UnknownRole, ValueError) as error:
                self._down[role] = str(error)
                continue
            if not self.breaker.allow(role):
                continue
            self._reserve(role, warm=True)
            log.info("pool: starting the warm %s session (%s)", role, self._down[role])
            self._spawn(self._start(agent, None, warm=True, lease=False), f"pool warm start {role}")

    # -- ending sessions -----------------------------------------------------------------------

    async def _housekeeping(self) -> None:
        while True:
            await asyncio.sleep(self.period)
            # a round is not cut short by close(), which waits for it (a reap in progress)
            await asyncio.shield(self._spawn(self._housekeeping_round(), "pool housekeeping"))

    async def _housekeeping_round(self) -> None:
        if self._closed:
            return
        try:
            await self._reap()
            self._ensure_warm()
        except Exception:
            log.exception("pool housekeeping failed")

    async def _reap(self) -> None:
        now = self.clock()
        expired = []
        for entry in list(self._entries.values()):
            since = entry.idle_since()
            if not entry.warm and since is not None and now - since >= self.idle_timeout:
                entry.closing = True
                del self._entries[entry.session_id]
                expired.append((entry, now - since))
        await asyncio.gather(
            *(self._retire(entry, f"idle for {idle:.0f} s") for entry, idle in expired)
        )

    async def _retire(self, entry: PooledSession, reason: str) -> None:
        """Terminate a cold session the pool no longer needs, and its worktree."""
        log.info("pool: %s session %s terminated: %s", entry.role, entry.session_id, reason)
        await self._terminate(entry, reason)
        if entry.worktree is not None and not any(
            e.folder == entry.folder for e in self._entries.values()
        ):
            await self._remove_worktree(entry.worktree)
        self._emit()

    async def _terminate(
        self, entry: PooledSession, reason: str, grace: float = TERMINATE_GRACE
    ) -> None:
        try:
            await self.manager.terminate(entry.session_id, reason=reason, grace=grace)
        except UnknownSession:
            await entry.session.terminate(reason, grace)
        except Exception:
            log.exception("pool: terminating %s failed", entry.session_id)

    async def _remove_worktree(self, worktree: Worktree) -> None:
        """Remove a worktree the pool made, only when that loses nothing: git refuses a
        worktree with modified or untracked files (it is kept, for `semo worktrees`), and the
        branch is deleted only when it is merged (`git branch -d`)."""
        if self.manager.worktrees is None:
            return
        try:
            await self.manager.worktrees.remove(worktree)
        except (WorktreeError, OSError) as error:
            log.warning("pool: worktree %s kept: %s", worktree.path, error)

    def _on_session_event(self, session: AgentSession, event: SessionEvent) -> None:
        if not isinstance(event, StateChange):
            return
        entry = self._entries.get(session.session_id)
        if entry is None or entry.closing:
            return
        if event.state == AgentState.READY:
            entry.ready_since = self.clock()
        if event.state == AgentState.TERMINATED:
            self._dropped(entry, event)
        self._emit()

    def _dropped(self, entry: PooledSession, event: StateChange) -> None:
        """A session of the pool ended without the pool ending it."""
        del self._entries[entry.session_id]
        crashed = event.source == "process"  # the process ended on its own
        why = f"ended: {event.reason}" if crashed else f"was terminated: {event.reason}"
        self._ended[entry.session_id] = why
        while len(self._ended) > _ENDED_MEMORY:
            self._ended.popitem(last=False)
        log.warning(
            "pool: %s %s session %s %s%s",
            "warm" if entry.warm else "cold",
            entry.role,
            entry.session_id,
            why,
            " (was leased)" if entry.leased else "",
        )
        if self._closed:
            return
        if not crashed:  # terminated through the manager: not restarted on its own
            if entry.warm:
                self._down[entry.role] = f"terminated: {event.reason}"
                self._hold.add(entry.role)
            return
        self.breaker.record_failure(entry.role)
        self._spawn(self._forget(entry, event.reason), f"pool cleanup {entry.session_id}")
        if entry.warm:
            self._down[entry.role] = f"crashed: {event.reason}"
            self._ensure_warm()

    async def _forget(self, entry: PooledSession, reason: str) -> None:
        """The manager's part of a crashed session (hook token, store row)."""
        with contextlib.suppress(UnknownSession):
            await self.manager.terminate(entry.session_id, reason=reason)

    # -- helpers -------------------------------------------------------------------------------

    def _spawn(self, coro: Coroutine[Any, Any, _T], name: str) -> asyncio.Task[_T]:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            error = task.exception()
            if not isinstance(error, PoolError):
                log.error("pool task %s failed", task.get_name(), exc_info=error)

    def _check_open(self) -> None:
        if self._closed:
            raise PoolClosed("the session pool is closed")

    def _emit(self) -> None:
        """Wake waiting acquires and report the new status."""
        self._changed.set()
        self._changed = asyncio.Event()
        if self.on_change is not None:
            try:
                self.on_change(self.status())
            except Exception:
                log.exception("pool on_change callback failed")


def _start_error(error: BaseException, session: AgentSession | None) -> str:
    if isinstance(error, TimeoutError):
        return f"not ready in time ({error})"
    if isinstance(error, SessionEnded) and session is not None and session.exit_status:
        return f"{session.exit_status.describe()} before it was ready"
    return str(error) or type(error).__name__
