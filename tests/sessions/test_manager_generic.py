"""SessionManager on a real program in a real PTY: bash as a `generic` agent.

What is checked: a session reaches its prompt and is `ready`; a prompt runs and its output is
the turn's text; a prompt sent while the agent is busy is typed only after the turn ends, and
once; the queue keeps order; cancel (Ctrl+C) ends a running turn; get_output and resize; an
agent never sees the engine's SEMO_* / SUPABASE_* variables; a crashed agent (kill -9) fails
its queued prompts and ends as error -> terminated, recorded in the store; operations on an
unknown or ended session get clear errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from semo.engine.agents.generic import GENERIC
from semo.engine.protocol.messages import AskUser
from semo.engine.protocol.monitor import Signal
from semo.engine.protocol.observer import MessageFound
from semo.engine.protocol.state import AgentState, StateChange
from semo.engine.sessions.agent_session import AgentSession, SessionEnded, SessionError
from semo.engine.sessions.manager import LaunchOptions, SessionManager, UnknownSession
from semo.engine.store.models import Agent, Office
from semo.engine.store.sqlite import SqliteStore
from tests.support.claude_screen import wait_screen
from tests.support.waiting import eventually

TIMEOUT = 10.0
BASH = ["bash", "--norc", "--noprofile", "-i"]


def bash_agent(office_id: str = "office") -> Agent:
    return Agent(office_id=office_id, name="shell", role="SH", command=BASH)


def bash_env() -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PS1": "$ ",
        "HOME": os.environ.get("HOME", "/tmp"),
        "SEMO_DATABASE_URL": "postgresql://secret@db/semo",
        "SUPABASE_SERVICE_ROLE_KEY": "service-role-secret",
    }


@pytest.fixture
async def manager(tmp_path: Path) -> AsyncIterator[SessionManager]:
    runtime = tmp_path / "run"
    async with SessionManager(agent_env=bash_env(), runtime_dir=runtime) as manager:
        yield manager


def has_child(pid: int, name: str) -> bool:
    """Whether process `pid` has a child called `name` (read from /proc)."""
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        with contextlib.suppress(FileNotFoundError):  # a child that has just exited
            if Path(f"/proc/{child}/comm").read_text().strip() == name:
                return True
    return False


async def wait_for_child(pid: int | None, name: str) -> None:
    assert pid is not None
    await eventually(lambda: has_child(pid, name), TIMEOUT, what=f"{name} under pid {pid}")


async def start(manager: SessionManager, folder: Path, agent: Agent | None = None) -> AgentSession:
    agent = agent or bash_agent()
    session = await manager.create(agent, working_dir=folder, cols=80, rows=24)
    await session.wait_ready(TIMEOUT)
    return session


async def test_prompt_runs_and_its_output_is_the_turn_text(
    manager: SessionManager, tmp_path: Path
) -> None:
    session = await start(manager, tmp_path)
    assert session.profile is GENERIC
    result = await session.execute("echo $((6 * 7))", timeout=TIMEOUT)
    assert result.state == AgentState.READY
    assert "42" in result.text.splitlines()
    assert session.delivered == 1


async def test_agent_runs_in_its_folder_without_engine_credentials(
    manager: SessionManager, tmp_path: Path
) -> None:
    session = await start(manager, tmp_path)
    result = await session.execute(
        'echo "cwd=$PWD db=[$SEMO_DATABASE_URL] key=[$SUPABASE_SERVICE_ROLE_KEY]"',
        timeout=TIMEOUT,
    )
    assert f"cwd={tmp_path.resolve()} db=[] key=[]" in result.text  # noqa: ASYNC240


async def test_prompt_sent_while_busy_waits_for_the_turn_and_is_typed_once(
    manager: SessionManager, tmp_path: Path
) -> None:
    session = await start(manager, tmp_path)
    first = session.submit("sleep 0.6; echo first-done")
    await first
    assert session.state == AgentState.EXECUTING
    second = session.submit("echo second-done")
    third = session.submit("echo third-done")
    await asyncio.sleep(0.3)
    assert not second.done(), "typed into a busy agent"
    assert session.queued == 2
    await asyncio.wait_for(asyncio.gather(second, third), TIMEOUT)
    await session.wait_ready(TIMEOUT)
    lines = session.last_lines(50)
    done = [line for line in lines if line.endswith("-done") and not line.startswith("$")]
    assert done == ["first-done", "second-done", "third-done"]
    typed = [line for line in lines if line.startswith("$ echo second-done")]
    assert len(typed) == 1
    assert session.delivered == 3


async def test_cancel_interrupts_the_running_turn(manager: SessionManager, tmp_path: Path) -> None:
    session = await start(manager, tmp_path)
    await session.submit("echo sleeping; sleep 30")
    assert session.state == AgentState.EXECUTING
    # Ctrl+C before bash has started `sleep` interrupts bash itself, and sleep then runs on:
    # wait for the sleep process, not only for the echo before it (a loaded machine forks late)
    await wait_screen(session.terminal, lambda s: "\nsleeping\n" in s, TIMEOUT, "sleeping")
    await wait_for_child(session.pid, "sleep")
    await manager.cancel(session.session_id)
    await session.wait_ready(TIMEOUT)
    result = await session.execute("echo after-cancel", timeout=TIMEOUT)
    assert "after-cancel" in result.text


async def test_get_output_and_resize(manager: SessionManager, tmp_path: Path) -> None:
    session = await start(manager, tmp_path)
    await session.execute("for i in $(seq 1 60); do echo line-$i; done", timeout=TIMEOUT)
    screen = manager.get_output(session.session_id)
    assert (screen.cols, screen.rows) == (80, 24)
    assert len(screen.lines) == 24
    last = manager.get_output(session.session_id, lines=40)
    assert last.lines[-1] == "$"
    assert last.lines[0] == "line-22"  # 40 lines back reaches into the scrollback
    manager.resize(session.session_id, 100, 30)
    result = await session.execute("stty size", timeout=TIMEOUT)
    assert "30 100" in result.text
    with pytest.raises(ValueError, match="out of range"):
        manager.resize(session.session_id, 0, 30)


async def test_crash_fails_queued_prompts_and_ends_the_session(
    manager: SessionManager, tmp_path: Path
) -> None:
    session = await start(manager, tmp_path)
    states: list[AgentState] = []
    session.add_listener(
        lambda _s, e: states.append(e.state) if isinstance(e, StateChange) else None
    )
    await session.submit("sleep 30")
    waiting = session.submit("echo never")
    assert session.pid is not None
    os.kill(session.pid, signal.SIGKILL)
    with pytest.raises(SessionEnded, match="exited"):
        await asyncio.wait_for(waiting, TIMEOUT)
    assert states[-2:] == [AgentState.ERROR, AgentState.TERMINATED]
    with pytest.raises(SessionEnded):
        session.submit("echo too late")
    with pytest.raises(SessionEnded):
        manager.send_text(session.session_id, "x")


async def test_bad_input_gets_clear_errors(manager: SessionManager, tmp_path: Path) -> None:
    with pytest.raises(UnknownSession, match="no session 'nope'"):
        manager.get_output("nope")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        await manager.create(bash_agent(), working_dir=tmp_path / "missing")
    with pytest.raises(ValueError, match="no working directory"):
        await manager.create(bash_agent())
    session = await start(manager, tmp_path)
    with pytest.raises(SessionError, match="empty prompt"):
        session.submit("   ")
    await manager.terminate(session.session_id, reason="test over")
    with pytest.raises(UnknownSession):
        await manager.send_keys(session.session_id, "<Enter>")


async def test_terminate_fails_queued_prompts(manager: SessionManager, tmp_path: Path) -> None:
    session = await start(manager, tmp_path)
    await session.submit("sleep 30")
    queued = session.submit("echo queued")
    await manager.terminate(session.session_id, reason="operator said so")
    with pytest.raises(SessionEnded, match="operator said so"):
        await queued
    assert session.state == AgentState.TERMINATED
    assert session.exit_status is not None


async def test_store_rows_follow_the_session(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with SqliteStore(tmp_path / "semo.db") as store:
        office = await store.create_office(Office(name="o"))
        agent = await store.upsert_agent(bash_agent(office.id))
        async with SessionManager(
            store=store,
            office_id=office.id,
            engine_id="engine-1",
            agent_env=bash_env(),
            runtime_dir=tmp_path / "run",
        ) as manager:
            session = await start(manager, tmp_path, agent)
            await session.execute("true", timeout=TIMEOUT)
            await manager.terminate(session.session_id, reason="done here")
        row = await store.get_session(session.session_id)
        assert row.status == "terminated"
        assert row.end_reason == "done here"
        # the end is written once (its state change, then terminate's own write, which the
        # store refuses as already ended): nothing worth a warning
        assert "not recorded" not in caplog.text
        assert row.engine_id == "engine-1"
        assert row.agent_id == agent.id
        assert row.pid == session.pid


async def test_a_prompt_whose_caller_gave_up_is_never_typed(
    manager: SessionManager, tmp_path: Path
) -> None:
    session = await start(manager, tmp_path)
    await session.submit("sleep 1")
    with pytest.raises(TimeoutError):
        await manager.execute(session.session_id, "echo gave-up", timeout=0.2)
    assert session.queued == 0
    result = await session.execute("echo still-here", timeout=TIMEOUT)
    assert "still-here" in result.text
    assert not any("gave-up" in line for line in session.last_lines(30))


async def test_a_resize_does_not_cut_lines_the_observer_has_not_read(
    manager: SessionManager, tmp_path: Path
) -> None:
    """The console resizes a session as soon as its pane is laid out; a line printed at the old
    width just before must still be read whole (pyte cuts rows on a resize)."""
    session = await start(manager, tmp_path)
    found: list[AskUser] = []
    session.add_listener(
        lambda _s, e: (
            found.append(e.message)
            if isinstance(e, MessageFound) and isinstance(e.message, AskUser)
            else None
        )
    )

    def shrink_on_output(chunk: str) -> None:
        printed = "[ASK_USER] Name" in chunk and "printf" not in chunk  # not the echo
        if printed and session.terminal.screen.columns == 80:
            session.resize(20, 24)  # before the observer's next frame

    session.terminal.add_listener(shrink_on_output)
    # a styled gutter keeps the row off the plain fast path (whose deferred rows keep their text)
    session.post(
        "printf '\\033[1m●\\033[0m %s\\n' '[ASK_USER] Name the endpoint for the health check?'"
    )
    await session.wait_for_state(AgentState.WAITING_INPUT, TIMEOUT)
    assert [m.question for m in found] == ["Name the endpoint for the health check?"]


async def test_a_busy_silent_agent_is_reported_stale_after_the_configured_time(
    tmp_path: Path,
) -> None:
    """[engine] stale_after / [[agents]] stale_after reach the session (LaunchOptions)."""
    options = LaunchOptions(stale_after=0.5)
    async with SessionManager(
        agent_env=bash_env(), runtime_dir=tmp_path / "run", launch_options=lambda _a: options
    ) as manager:
        session = await start(manager, tmp_path)
        signals: list[Signal] = []
        session.add_listener(
            lambda _session, event: signals.append(event) if isinstance(event, Signal) else None
        )
        started = asyncio.get_running_loop().time()
        session.post("sleep 4")
        await session.wait_for_state(AgentState.EXECUTING, TIMEOUT)
        while not any(s.kind == "stale" for s in signals):
            assert asyncio.get_running_loop().time() - started < 3.5, "no stale signal"
            await asyncio.sleep(0.05)
        stale = next(s for s in signals if s.kind == "stale")
        assert stale.source == "screen" and "no output" in stale.text
        assert session.state == AgentState.EXECUTING  # stale is a warning, never "done"
