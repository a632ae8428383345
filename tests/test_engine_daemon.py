"""`semo engine` as a real process: config file, warm pool, commands from the store, SIGTERM,
and reconciling after a SIGKILL.

The office's agent is bash as a `generic` agent, in a worktree of a real git repository.
Checked: the warm session comes up and is recorded; a send_prompt command runs in it and the
result holds the output; the agent does not see the engine's SEMO_* credentials; a command for
an unknown session fails with a clear error; logs are JSON lines without the database secret;
SIGTERM fails the in-flight command ("engine stopping"), ends the sessions, records the engine
stopped (its heartbeat row) and exits 0; after a SIGKILL the engine's heartbeat row still says
running, and the next start marks the dead run's sessions terminated and fails its in-flight
command.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

from semo.engine.store.models import AgentCommandResult, AgentSession
from semo.engine.store.sqlite import SqliteStore
from tests.support.daemon_office import make_office
from tests.support.semo_process import environment_without_semo, semo_engine
from tests.support.waiting import eventually_value

TIMEOUT = 20.0
SECRET = "hunter2-db-password"
T = TypeVar("T")


@asynccontextmanager
async def engine_process(config: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    env = environment_without_semo()
    env["SEMO_DATABASE_URL"] = f"postgresql://semo:{SECRET}@db.invalid/semo"
    async with semo_engine(config, env, asyncio.subprocess.PIPE) as process:
        yield process


async def ready_session(store: SqliteStore, other_than: str | None = None) -> AgentSession:
    async def probe() -> AgentSession | None:
        offices = [o for o in await store.list_offices() if o.name == "daemon-test"]
        if not offices:
            return None
        sessions = await store.list_sessions(offices[0].id)
        ready = [s for s in sessions if s.status == "ready" and s.session_id != other_than]
        return ready[0] if ready else None

    return await eventually_value(probe, "a ready warm session")


async def result_of(store: SqliteStore, command_id: str) -> AgentCommandResult:
    return await eventually_value(lambda: store.get_result(command_id), f"result of {command_id}")


async def test_engine_runs_commands_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    config = make_office(tmp_path)
    async with engine_process(config) as engine, SqliteStore(tmp_path / "semo.db") as store:
        session = await ready_session(store)
        assert session.worktree_id is not None and "/ws/agent/SH/" in session.worktree_id
        office = session.office_id

        prompt = {"prompt": "echo db=[$SEMO_DATABASE_URL]", "wait": True, "timeout": 10}
        ok = await store.insert_command(
            office, "send_prompt", prompt, session_id=session.session_id
        )
        result = await result_of(store, ok.id)
        assert result.success, result.error
        assert "db=[]" in json.dumps(result.result)

        bad = await store.insert_command(office, "send_keys", {"keys": "x"}, session_id="nope")
        failed = await result_of(store, bad.id)
        assert not failed.success and "no session 'nope'" in (failed.error or "")

        slow = {"prompt": "sleep 30", "wait": True, "timeout": 60}
        busy = await store.insert_command(
            office, "send_prompt", slow, session_id=session.session_id
        )
        await eventually_value(
            lambda: _status_is(store, busy.id, "processing"), "the slow command claimed"
        )
        engine.send_signal(signal.SIGTERM)
        async with asyncio.timeout(TIMEOUT):
            _, stderr = await engine.communicate()
        assert engine.returncode == 0, stderr.decode()

        stopped = await store.get_result(busy.id)
        assert stopped is not None and not stopped.success
        assert "engine stopping" in (stopped.error or "")
        row = await store.get_session(session.session_id)
        assert row.status == "terminated"
        [heartbeat] = await store.list_engines(office)
        assert heartbeat.engine_id == f"{socket.gethostname()}-{engine.pid}"
        assert (heartbeat.status, heartbeat.alive) == ("stopped", False)

    log = stderr.decode()
    assert SECRET not in log
    records = [json.loads(line) for line in log.splitlines() if line.strip()]
    assert all({"ts", "level", "logger", "msg"} <= set(r) for r in records)
    assert any("stopped" in r["msg"] for r in records)


async def _status_is(store: SqliteStore, command_id: str, status: str) -> bool | None:
    return True if (await store.get_command(command_id)).status == status else None


async def test_next_start_reconciles_what_a_killed_engine_left(tmp_path: Path) -> None:
    config = make_office(tmp_path)
    async with SqliteStore(tmp_path / "semo.db") as store:
        async with engine_process(config) as engine:
            first = await ready_session(store)
            slow = {"prompt": "sleep 30", "wait": True, "timeout": 60}
            busy = await store.insert_command(
                first.office_id, "send_prompt", slow, session_id=first.session_id
            )
            await eventually_value(lambda: _status_is(store, busy.id, "processing"), "claimed")
            engine.kill()
            await engine.wait()
        assert (await store.get_session(first.session_id)).status != "terminated"
        [heartbeat] = await store.list_engines(first.office_id)
        assert heartbeat.status == "running"  # no clean stop recorded

        async with engine_process(config) as engine:
            await ready_session(store, other_than=first.session_id)
            failed = await result_of(store, busy.id)
            assert not failed.success and "stopped while running" in (failed.error or "")
            row = await store.get_session(first.session_id)
            assert row.status == "terminated" and "stopped without ending it" in (
                row.end_reason or ""
            )
            engine.send_signal(signal.SIGTERM)
            await engine.wait()
            assert engine.returncode == 0
