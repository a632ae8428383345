"""SessionPoolManager on real processes: bash in a PTY as each role's (generic) agent.

What is checked: the warm sessions (FE, BE, QA) are ready after start; acquire prefers the warm
session, release/re-acquire gives the same one, a busy role gets a cold one; the 7th request of
an office of 6 raises PoolExhausted at once, or with `wait` gets the session another task
releases; a full office evicts an idle cold session of another role; an idle cold session is
reaped after idle_timeout (its worktree removed), a warm or leased one is not; a killed warm
session is restarted (new pid), a killed leased cold one is dropped; a role that keeps failing
(a command exiting 1, or a warm session killed again and again) opens its breaker (no more
restarts, acquire raises BreakerOpen) and a half-open trial after the cooldown closes it, through
acquire and through the housekeeping loop; unknown roles and bad releases get clear errors;
agents from a resolver; from_config; close() leaves no process behind and fails waiting
acquires.

Ages and idle clocks run on a fake clock where a test needs time to pass; nothing sleeps in
place of an event: tests wait for the pool's own status reports.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path

import pytest

from semo.engine.config import PoolConfig
from semo.engine.protocol.state import AgentState
from semo.engine.sessions.agent_session import SessionEnded
from semo.engine.sessions.breaker import BreakerState, CircuitBreaker
from semo.engine.sessions.manager import SessionManager
from semo.engine.sessions.pool import (
    BreakerOpen,
    NotInPool,
    NotLeased,
    PoolClosed,
    PooledSession,
    PoolError,
    PoolExhausted,
    PoolStatus,
    SessionPoolManager,
    SessionStartFailed,
    UnknownRole,
    warm_place,
    warm_task_id,
)
from semo.engine.sessions.worktrees import WorktreeManager
from semo.engine.store.models import Agent
from tests.support.waiting import eventually

TIMEOUT = 10.0
BASH = ["bash", "--norc", "--noprofile", "-i"]
#: exits with code 1 at once, unless the file `ok` is in its folder: then it is a normal shell
FLAKY = ["bash", "-c", "test -e ok || exit 1; PS1='$ ' exec bash --norc --noprofile -i"]
ROLES = ("FE", "BE", "QA", "DOC", "OPS")


def bash_env() -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PS1": "$ ",
        "HOME": os.environ.get("HOME", "/tmp"),
    }


def agents(commands: dict[str, list[str]] | None = None) -> dict[str, Agent]:
    commands = commands or {}
    return {
        role: Agent(
            office_id="office", name=role.lower(), role=role, command=commands.get(role, BASH)
        )
        for role in ROLES
    }


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Watch:
    """The pool's on_change: lets a test wait for a status it expects."""

    def __init__(self) -> None:
        self.reports = 0
        self._changed = asyncio.Event()
        self.pool: SessionPoolManager | None = None

    def __call__(self, status: PoolStatus) -> None:
        self.reports += 1
        self._changed.set()

    async def until(self, check: Callable[[PoolStatus], bool], what: str) -> PoolStatus:
        assert self.pool is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + TIMEOUT
        while not check(status := self.pool.status()):
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise AssertionError(f"pool never got to: {what}; status: {status}")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                continue
        return status


def of_role(status: PoolStatus, role: str, *, warm: bool | None = None) -> list[str]:
    return [
        sid
        for sid, s in status.sessions.items()
        if s.role == role and (warm is None or s.warm == warm)
    ]


def ready_warm(status: PoolStatus, role: str) -> str | None:
    for sid, s in status.sessions.items():
        if s.role == role and s.warm and s.state == AgentState.READY:
            return sid
    return None


@pytest.fixture
async def manager() -> AsyncIterator[SessionManager]:
    runtime = Path(tempfile.mkdtemp(prefix="semo-pool-"))  # short: it holds a unix socket
    try:
        async with SessionManager(agent_env=bash_env(), runtime_dir=runtime) as manager:
            yield manager
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


MakePool = Callable[..., tuple[SessionPoolManager, Watch]]


@pytest.fixture
async def make_pool(manager: SessionManager, tmp_path: Path) -> AsyncIterator[MakePool]:
    pools: list[SessionPoolManager] = []

    def make(
        *,
        commands: dict[str, list[str]] | None = None,
        warm_roles: Iterable[str] = ("FE", "BE", "QA"),
        **options: object,
    ) -> tuple[SessionPoolManager, Watch]:
        watch = Watch()
        options.setdefault("ready_timeout", TIMEOUT)
        options.setdefault("period", 0.05)
        options.setdefault("folder_for", lambda _agent, _task: tmp_path)
        pool = SessionPoolManager(
            manager,
            agents(commands),
            warm_roles=warm_roles,
            on_change=watch,
            **options,  # type: ignore[arg-type]
        )
        watch.pool = pool
        pools.append(pool)
        return pool, watch

    yield make
    for pool in pools:
        await pool.close()


# -- warm sessions, leases ------------------------------------------------------------------------


async def test_warm_sessions_are_ready_after_start(make_pool: MakePool) -> None:
    pool, _ = make_pool()
    await pool.start()
    status = pool.status()
    assert sorted(s.role for s in status.sessions.values()) == ["BE", "FE", "QA"]
    assert all(s.warm and not s.leased for s in status.sessions.values())
    assert all(s.state == AgentState.READY for s in status.sessions.values())
    assert (status.total, status.warm, status.cold, status.idle) == (3, 3, 0, 3)
    assert status.down == {}
    assert status.breakers["FE"].state == BreakerState.CLOSED
    assert status.summary() == (  # the engine's minute status line in a text log
        f"3/{status.max_sessions} sessions (warm 3, cold 0; leased 0, idle 3, starting 0); "
        "0 waiting"
    )
    pids = [s.pid for s in status.sessions.values()]
    assert len(set(pids)) == 3
    assert all(pid is not None and alive(pid) for pid in pids)


async def test_acquire_prefers_warm_and_release_gives_the_same_session_back(
    make_pool: MakePool,
) -> None:
    pool, _ = make_pool()
    await pool.start()
    warm_fe = of_role(pool.status(), "FE", warm=True)[0]

    lease = await pool.acquire(role="FE", task_id="task-1")
    assert isinstance(lease, PooledSession)
    assert (lease.session_id, lease.role, lease.warm, lease.task_id) == (
        warm_fe,
        "FE",
        True,
        "task-1",
    )
    assert lease.leased_at is not None
    result = await lease.session.execute("echo $((6 * 7))", timeout=TIMEOUT)
    assert "42" in result.text.splitlines()
    shown = pool.status().sessions[warm_fe]
    assert shown.leased and shown.task_id == "task-1" and shown.idle_s is None
    assert shown.leased_s is not None

    busy = await pool.acquire(role="FE")  # the warm one is leased: a cold one is started
    assert not busy.warm and busy.session_id != warm_fe
    assert busy.session.state == AgentState.READY
    assert pool.status().cold == 1

    pool.release(lease.session_id)
    shown = pool.status().sessions[warm_fe]
    assert not shown.leased and shown.idle_s is not None and shown.leased_s is None
    again = await pool.acquire(role="FE")
    assert again is lease  # the same session, warm first (the idle cold one is not leased)
    assert pool.status().total == 4

    pool.release(again.session_id)
    with pytest.raises(NotLeased, match="is not leased"):
        pool.release(again.session_id)
    with pytest.raises(NotInPool, match="'nope' is not in the pool"):
        pool.release("nope")


async def test_unknown_role_and_agent_are_clear_errors(make_pool: MakePool) -> None:
    pool, _ = make_pool(warm_roles=())
    await pool.start()
    with pytest.raises(
        UnknownRole, match=r"no agent with role 'NOPE' \(roles: BE, DOC, FE, OPS, QA\)"
    ):
        await pool.acquire(role="NOPE")
    with pytest.raises(UnknownRole, match="no agent with id 'x'"):
        await pool.acquire(agent_id="x")
    be = agents()["BE"]
    lease = await pool.acquire(agent_id=pool.agents["BE"].id)  # type: ignore[index]
    assert lease.role == be.role and not lease.warm


async def test_agents_may_come_from_a_resolver(manager: SessionManager, tmp_path: Path) -> None:
    office = agents()
    asked: list[tuple[str | None, str | None]] = []

    def resolve(role: str | None, agent_id: str | None) -> Agent | None:
        asked.append((role, agent_id))
        return office.get(role or "") if role != "DOC" else None

    pool = SessionPoolManager(
        manager, resolve, warm_roles=("FE",), folder_for=lambda _a, _t: tmp_path, period=0.05
    )
    async with pool:
        lease = await pool.acquire(role="BE")
        assert lease.agent is office["BE"] and not lease.warm
        with pytest.raises(UnknownRole, match=r"role 'DOC' \(roles: BE, FE\)"):
            await pool.acquire(role="DOC")
    assert ("FE", None) in asked and ("BE", None) in asked


async def test_from_config_takes_the_pool_section(manager: SessionManager) -> None:
    config = PoolConfig(
        max_sessions=4, warm_roles=["BE"], idle_timeout=60, restart_failures=2,
        restart_window=10, restart_cooldown=5,
    )  # fmt: skip
    pool = SessionPoolManager.from_config(manager, agents(), config, period=0.1)
    assert (pool.max_sessions, pool.warm_roles, pool.idle_timeout) == (4, ["BE"], 60)
    breaker = pool.breaker
    assert (breaker.failure_threshold, breaker.window_seconds, breaker.reset_timeout) == (2, 10, 5)
    with pytest.raises(ValueError, match="3 warm roles do not fit in max_sessions = 2"):
        SessionPoolManager(manager, agents(), max_sessions=2)
    with pytest.raises(PoolError, match="not started"):
        await pool.acquire(role="BE")


# -- the limit ------------------------------------------------------------------------------------


async def test_seventh_request_fails_at_once_or_waits_for_a_release(make_pool: MakePool) -> None:
    pool, watch = make_pool(max_sessions=6)
    await pool.start()
    warm = {role: await pool.acquire(role=role) for role in ("FE", "BE", "QA")}
    assert all(lease.warm for lease in warm.values())
    cold = [await pool.acquire(role=role) for role in ("FE", "BE", "DOC")]
    assert not any(lease.warm for lease in cold)
    assert (pool.status().total, pool.status().leased) == (6, 6)

    with pytest.raises(
        PoolExhausted,
        match=r"^office has 6/6 sessions, all busy; release one or raise \[pool\] max_sessions$",
    ):
        await pool.acquire(role="QA")

    waiter = asyncio.create_task(pool.acquire(role="QA", task_id="task-7", wait=TIMEOUT))
    await watch.until(lambda s: s.waiting == 1, "one acquire waiting")
    assert not waiter.done()
    # the pool view names the waiting request: its role and task
    assert [(w.role, w.task_id) for w in pool.status().waiters] == [("QA", "task-7")]

    async def another_task_releases() -> None:
        pool.release(warm["QA"].session_id)

    await asyncio.create_task(another_task_releases())
    got = await asyncio.wait_for(waiter, TIMEOUT)
    assert got is warm["QA"] and got.task_id == "task-7"
    status = pool.status()
    assert (status.total, status.leased, status.waiting) == (6, 6, 0)
    assert status.waiters == []

    with pytest.raises(PoolExhausted, match=r"all busy \(waited 0.2 s\)"):
        await pool.acquire(role="FE", wait=0.2)


async def test_full_office_evicts_an_idle_cold_session_of_another_role(
    make_pool: MakePool,
) -> None:
    pool, _ = make_pool(max_sessions=4, warm_roles=("FE",))
    await pool.start()
    leases = [await pool.acquire(role=role) for role in ("FE", "BE", "QA", "DOC")]
    doc = leases[-1]
    doc_pid = doc.session.pid
    assert doc_pid is not None
    pool.release(doc.session_id)
    pool.release(leases[0].session_id)  # the warm FE: idle, but never evicted
    ops = await pool.acquire(role="OPS")
    assert ops.role == "OPS" and not ops.warm
    status = pool.status()
    assert doc.session_id not in status.sessions
    assert leases[0].session_id in status.sessions
    assert status.total == 4
    assert doc.session.state == AgentState.TERMINATED
    assert not alive(doc_pid)
    with pytest.raises(PoolExhausted, match=r"4/4 sessions, none free for QA \(3 leased, 1 warm"):
        await pool.acquire(role="QA")


# -- the reaper -----------------------------------------------------------------------------------


async def test_idle_cold_session_is_reaped_warm_and_leased_ones_are_not(
    make_pool: MakePool, manager: SessionManager
) -> None:
    clock = FakeClock()
    pool, watch = make_pool(warm_roles=("FE",), idle_timeout=600, clock=clock)
    await pool.start()
    idle = await pool.acquire(role="BE")
    busy = await pool.acquire(role="DOC")
    pid = idle.session.pid
    assert pid is not None
    pool.release(idle.session_id)
    clock.advance(599)
    assert pool.status().sessions[idle.session_id].idle_s == 599

    clock.advance(2)
    status = await watch.until(
        lambda s: idle.session_id not in s.sessions, "the idle cold BE session reaped"
    )
    assert idle.session.state == AgentState.TERMINATED
    assert idle.session.observer.tracker.history[-1].reason == "idle for 601 s"
    assert not alive(pid)
    assert idle.session_id not in manager.sessions
    warm = of_role(status, "FE", warm=True)
    assert len(warm) == 1 and status.sessions[warm[0]].idle_s is not None
    assert status.sessions[warm[0]].idle_s >= 600  # type: ignore[operator]
    assert busy.session_id in status.sessions and status.sessions[busy.session_id].leased
    with pytest.raises(NotInPool):
        pool.release(idle.session_id)


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True)


async def test_reaped_cold_session_loses_the_worktree_the_pool_made(
    manager: SessionManager, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q",
        "--allow-empty", "-m", "init")  # fmt: skip
    workspace = tmp_path.resolve() / "workspace"  # noqa: ASYNC240
    manager.worktrees = WorktreeManager(repo, workspace)
    clock, watch = FakeClock(), Watch()
    pool = SessionPoolManager(
        manager, agents(), warm_roles=("FE",), idle_timeout=600, ready_timeout=TIMEOUT,
        period=0.05, clock=clock, on_change=watch,
    )  # fmt: skip
    watch.pool = pool
    async with pool:
        warm = pool.sessions[0]
        assert warm.worktree is not None
        place = warm_place(warm.agent.office_id, workspace)
        assert warm.folder == workspace / "agent" / "FE" / warm_task_id("FE", place)
        assert warm.folder.name.startswith("warm-fe-")
        lease = await pool.acquire(role="BE", task_id="task-9")
        assert lease.worktree is not None and lease.folder == lease.worktree.path
        result = await lease.session.execute("pwd; git branch --show-current", timeout=TIMEOUT)
        assert result.text.splitlines()[-2:] == [str(lease.folder), "semo/BE/task-9"]
        pool.release(lease.session_id)
        clock.advance(600)
        await watch.until(lambda s: lease.session_id not in s.sessions, "BE reaped")
        assert lease.folder is not None and not lease.folder.exists()
        assert warm.folder is not None and warm.folder.is_dir()


async def semo_branches(repo: Path) -> str:
    """`git branch --list semo/*` of `repo`."""
    proc = await asyncio.create_subprocess_exec(
        "git", "-C", str(repo), "branch", "--list", "semo/*", stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    return out.decode()


async def test_a_reaped_session_never_deletes_uncommitted_work_or_an_unmerged_branch(
    manager: SessionManager, tmp_path: Path
) -> None:
    """Issue 21 item 4: the reaper used `git worktree remove --force`."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q",
        "--allow-empty", "-m", "init")  # fmt: skip
    workspace = tmp_path.resolve() / "workspace"  # noqa: ASYNC240
    manager.worktrees = WorktreeManager(repo, workspace)
    clock, watch = FakeClock(), Watch()
    pool = SessionPoolManager(
        manager, agents(), warm_roles=(), idle_timeout=600, ready_timeout=TIMEOUT,
        period=0.05, clock=clock, on_change=watch,
    )  # fmt: skip
    watch.pool = pool
    async with pool:
        dirty = await pool.acquire(role="BE", task_id="task-dirty")
        committed = await pool.acquire(role="FE", task_id="task-committed")
        await dirty.session.execute("echo draft > draft.txt", timeout=TIMEOUT)
        await committed.session.execute(
            "echo done > done.txt && git add done.txt && git -c user.name=t "
            "-c user.email=t@e commit -qm work",
            timeout=TIMEOUT,
        )
        pool.release(dirty.session_id)
        pool.release(committed.session_id)
        clock.advance(600)
        await watch.until(lambda s: not s.sessions, "both reaped")
        assert dirty.folder is not None and committed.folder is not None
        gone = committed.folder
        await eventually(lambda: not gone.exists(), TIMEOUT)  # the reaper removed it
        assert (dirty.folder / "draft.txt").read_text() == "draft\n"
        branches = await semo_branches(repo)
        assert "semo/FE/task-committed" in branches  # unmerged: kept
        assert "semo/BE/task-dirty" in branches


# -- crashes and the breaker ----------------------------------------------------------------------


async def test_killed_warm_session_is_restarted(make_pool: MakePool) -> None:
    pool, watch = make_pool(warm_roles=("FE", "BE"))
    await pool.start()
    lease = await pool.acquire(role="FE")
    old_pid = lease.session.pid
    assert lease.warm and old_pid is not None
    os.kill(old_pid, signal.SIGKILL)
    status = await watch.until(
        lambda s: ready_warm(s, "FE") not in (None, lease.session_id), "a new warm FE session"
    )
    new = status.sessions[ready_warm(status, "FE")]  # type: ignore[index]
    assert new.pid != old_pid and not new.leased
    assert not alive(old_pid)
    assert status.breakers["FE"].state == BreakerState.CLOSED
    assert status.breakers["FE"].failures == 1
    assert status.down == {}
    with pytest.raises(SessionEnded):
        lease.session.submit("echo too late")
    pool.release(lease.session_id)  # it ended while leased: a no-op, not an error
    again = await pool.acquire(role="FE")
    assert again.warm and again.session_id == new.session_id


async def test_killed_leased_cold_session_is_dropped(make_pool: MakePool) -> None:
    pool, watch = make_pool(warm_roles=("FE",))
    await pool.start()
    lease = await pool.acquire(role="BE")
    pid = lease.session.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    status = await watch.until(lambda s: lease.session_id not in s.sessions, "BE dropped")
    assert of_role(status, "BE") == [] and status.cold == 0  # a cold one is not restarted
    assert status.breakers["BE"].failures == 1
    with pytest.raises(SessionEnded):
        await lease.session.execute("echo too late", timeout=TIMEOUT)
    pool.release(lease.session_id)  # a no-op


async def test_repeated_kills_open_the_breaker_and_stop_the_restarts(
    make_pool: MakePool,
) -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(failure_threshold=2, window_seconds=60, reset_timeout=5, clock=clock)
    pool, watch = make_pool(warm_roles=("FE",), breaker=breaker)
    await pool.start()
    first = pool.sessions[0]
    assert first.session.pid is not None
    os.kill(first.session.pid, signal.SIGKILL)
    status = await watch.until(
        lambda s: ready_warm(s, "FE") not in (None, first.session_id), "FE restarted"
    )
    second = pool.get(ready_warm(status, "FE"))  # type: ignore[arg-type]
    assert second.session.pid is not None
    os.kill(second.session.pid, signal.SIGKILL)
    status = await watch.until(
        lambda s: s.breakers["FE"].state == BreakerState.OPEN and not s.sessions, "FE given up"
    )
    assert status.down["FE"] == "crashed: process ended (signal 9)"
    assert status.starting == 0
    assert status.summary().endswith("; down: FE; breakers: FE open (5 s)")
    with pytest.raises(BreakerOpen):
        await pool.acquire(role="FE")
    clock.advance(5)  # the cooldown is over: the housekeeping loop's trial brings FE back
    await watch.until(lambda s: ready_warm(s, "FE") is not None, "FE back after the cooldown")


async def test_breaker_opens_for_a_failing_role_and_a_trial_acquire_closes_it(
    make_pool: MakePool, tmp_path: Path
) -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(failure_threshold=2, window_seconds=60, reset_timeout=5, clock=clock)
    pool, _ = make_pool(warm_roles=(), commands={"BE": FLAKY}, breaker=breaker)
    await pool.start()
    for _ in range(2):
        with pytest.raises(
            SessionStartFailed,
            match=r"a BE session did not start: exited with code 1 before it was ready",
        ):
            await pool.acquire(role="BE")
    status = pool.status()
    assert status.breakers["BE"].state == BreakerState.OPEN
    assert status.breakers["BE"].retry_after_s == 5
    assert status.total == 0  # the failed sessions are gone
    with pytest.raises(BreakerOpen, match=r"no BE session is started for 5\.0 s more") as caught:
        await pool.acquire(role="BE", wait=TIMEOUT)
    assert caught.value.retry_after == 5
    assert (await pool.acquire(role="FE")).role == "FE"  # other roles are not affected

    (tmp_path / "ok").touch()
    clock.advance(5)
    lease = await pool.acquire(role="BE")  # the half-open trial
    assert lease.session.state == AgentState.READY
    assert pool.status().breakers["BE"].state == BreakerState.CLOSED


async def test_breaker_stops_warm_restarts_and_the_loop_makes_the_trial(
    make_pool: MakePool, tmp_path: Path
) -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(failure_threshold=2, window_seconds=60, reset_timeout=5, clock=clock)
    pool, watch = make_pool(warm_roles=("FE", "QA"), commands={"FE": FLAKY}, breaker=breaker)
    await pool.start()  # FE fails: not fatal
    status = await watch.until(
        lambda s: s.breakers["FE"].state == BreakerState.OPEN, "FE breaker open"
    )
    assert status.down["FE"] == "did not start: exited with code 1 before it was ready"
    assert status.breakers["FE"].failures == 2  # the start and one restart, then no more
    assert ready_warm(status, "QA") is not None and ready_warm(status, "FE") is None
    with pytest.raises(BreakerOpen, match="FE sessions keep failing"):
        await pool.acquire(role="FE")

    (tmp_path / "ok").touch()
    clock.advance(5)
    status = await watch.until(
        lambda s: ready_warm(s, "FE") is not None, "the housekeeping loop's trial FE session"
    )
    assert status.breakers["FE"].state == BreakerState.CLOSED
    assert status.down == {}
    assert (await pool.acquire(role="FE")).warm


# -- close ----------------------------------------------------------------------------------------


async def test_close_leaves_no_process_and_fails_waiting_acquires(
    make_pool: MakePool, manager: SessionManager
) -> None:
    pool, watch = make_pool(max_sessions=4)
    await pool.start()
    leases = [await pool.acquire(role=role) for role in ("FE", "BE", "QA", "DOC")]
    waiter = asyncio.create_task(pool.acquire(role="OPS", wait=TIMEOUT))
    await watch.until(lambda s: s.waiting == 1, "one acquire waiting")
    pids = [lease.session.pid for lease in leases]
    assert all(pid is not None and alive(pid) for pid in pids)

    await pool.close()
    with pytest.raises(PoolClosed):
        await waiter
    assert not any(alive(pid) for pid in pids if pid is not None)
    assert all(lease.session.state == AgentState.TERMINATED for lease in leases)
    assert manager.sessions == {}
    status = pool.status()
    assert status.closed and status.sessions == {} and status.total == 0
    with pytest.raises(PoolClosed):
        await pool.acquire(role="FE")
