"""`semo sessions`, `semo engines` and the REST API's sessions say at once that an engine of
this machine is gone (its process exited, or its pid is another process now), as `semo answer`
does, instead of listing its sessions "ready" and it "alive" until its heartbeat runs out.

Real `semo engine` processes (tests/control/office.py: two bash agents), SIGKILLed; the CLI run
as a user runs it; the API app in this process on the same SQLite file. Engines of other
machines, and ids the local facts say nothing about, keep the heartbeat rule.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from semo.engine.api.app import create_app
from semo.engine.api.settings import ApiSettings
from semo.engine.store.models import Agent, AgentSession
from semo.engine.store.models import Office as OfficeRow
from semo.engine.store.sqlite import SqliteStore, ts
from tests.control.office import Office, wait_until
from tests.support import waiting

pytestmark = pytest.mark.timeout(240)

TOKEN = "liveness-listing-token-0123456789abcdef"
EXITED = "on this machine has exited"


@pytest.fixture
def office(tmp_path: Path) -> Iterator[Office]:
    office = Office(tmp_path)
    yield office
    office.cleanup()


def _json(office: Office, *args: str) -> Any:
    done = office.semo(*args, "--office", "ctl", "--json")
    return json.loads(done.stdout)


def _both_ready(office: Office) -> bool:
    listed = office.semo("sessions", "--office", "ctl", "--json", check=False)
    if listed.returncode != 0:  # no office in the store yet
        return False
    rows = json.loads(listed.stdout)
    return sorted((r["role"], r["status"]) for r in rows) == [("A", "ready"), ("B", "ready")]


async def _api_sessions(office: Office) -> list[dict[str, Any]]:
    """GET /api/offices/ctl/sessions from the API app, on the office's SQLite file."""
    store = SqliteStore(office.folder / "semo.db")
    await store.open()
    try:
        app = create_app(store, ApiSettings(tokens={"ctl": SecretStr(TOKEN)}))
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://t", headers=headers
        ) as client:
            listed = await client.get("/api/offices/ctl/sessions")
            assert listed.status_code == 200, listed.text
            rows: list[dict[str, Any]] = listed.json()
            one = await client.get(f"/api/offices/ctl/sessions/{rows[0]['session_id']}")
            assert one.status_code == 200, one.text
            assert one.json()["state"] == rows[0]["state"]
            return rows
    finally:
        await store.close()


async def _heartbeat_row(office: Office) -> Any:
    store = SqliteStore(office.folder / "semo.db")
    await store.open()
    try:
        [office_row] = await store.list_offices()
        [row] = await store.list_engines(office_row.id)
        return row
    finally:
        await store.close()


def _kill(engine: subprocess.Popen[bytes]) -> None:
    engine.send_signal(signal.SIGKILL)
    engine.wait(30)  # reaped: its pid is free


def test_a_sigkilled_engine_is_dead_at_once_in_every_listing(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(office.runtime))  # the API app's machine facts
    engine = office.engine(office.folder / "engine.log")
    try:
        wait_until(lambda: _both_ready(office), "both agents ready")
        pid = office.engine_pid()
        engine_id = f"{socket.gethostname()}-{pid}"

        # alive: every listing says so
        sessions = office.sessions()
        assert {(s["state"], s["lost_reason"], s["engine_id"]) for s in sessions} == {
            ("ready", None, engine_id)
        }
        [row] = _json(office, "engines")
        assert (row["status"], row["state"], row["alive"], row["pid"], row["dead_reason"]) == (
            "running", "alive", True, pid, None
        )  # fmt: skip
        api = asyncio.run(_api_sessions(office))
        assert {(s["state"], s["lost_reason"]) for s in api} == {("ready", None)}
        table = office.semo("sessions", "--office", "ctl").stdout
        assert table.splitlines()[0].split() == [
            "session_id", "role", "name", "state", "engine_id", "last_activity_at", "lost_reason"
        ]  # fmt: skip

        _kill(engine)
        # the store still says alive: only the local facts can tell now
        heartbeat = asyncio.run(_heartbeat_row(office))
        assert heartbeat.alive and heartbeat.status == "running"

        why = f"its process {pid} {EXITED}"
        sessions = office.sessions()
        assert {(s["status"], s["state"], s["lost_reason"]) for s in sessions} == {
            ("ready", "lost", why)  # the row is left as it was; the listing says lost
        }
        [row] = _json(office, "engines")
        assert (row["status"], row["state"], row["alive"], row["pid"], row["dead_reason"]) == (
            "dead", "dead", False, pid, why
        )  # fmt: skip
        api = asyncio.run(_api_sessions(office))
        assert {(s["status"], s["state"], s["lost_reason"]) for s in api} == {
            ("ready", "lost", why)
        }
        table = office.semo("sessions", "--office", "ctl").stdout.splitlines()
        assert len(table) == 3 and all(" lost " in line and why in line for line in table[1:])
        engines = office.semo("engines", "--office", "ctl").stdout.splitlines()
        assert engines[0].split()[:4] == ["engine_id", "state", "alive", "pid"]
        assert engines[1].split()[:4] == [engine_id, "dead", "false", str(pid)]
        assert why in engines[1]
        # the same judgement as `semo answer` / prompts
        prompt = office.semo(
            "command",
            "send_prompt",
            "--office",
            "ctl",
            "--session",
            sessions[0]["session_id"],
            "--payload",
            '{"prompt": "hi"}',
            check=False,
        )
        assert prompt.returncode == 2 and why in prompt.stderr
    finally:
        if engine.poll() is None:
            _kill(engine)


def _reuse_pid(pid: int) -> subprocess.Popen[bytes] | None:
    """A new process (sleep) with the exited process's pid, by setting the kernel's last pid
    (root only); None when other processes kept taking it."""
    for _ in range(500):
        with open("/proc/sys/kernel/ns_last_pid", "w") as last:
            last.write(str(pid - 1))
        proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
        if proc.pid == pid:
            return proc
        proc.kill()
        proc.wait()
    return None


@pytest.mark.skipif(
    not os.access("/proc/sys/kernel/ns_last_pid", os.W_OK), reason="needs root (ns_last_pid)"
)
def test_a_killed_engines_pid_taken_by_another_process_is_not_the_engine(
    office: Office,
) -> None:
    config = office.folder / "semo.toml"
    config.write_text(config.read_text().replace("[engine]\n", "[engine]\nlease_seconds = 6\n"))
    engine = office.engine(office.folder / "engine.log")
    reused = None
    try:
        wait_until(lambda: _both_ready(office), "both agents ready")
        pid = office.engine_pid()

        def ran() -> float:
            row = asyncio.run(_heartbeat_row(office))
            return float((row.last_seen - row.started_at).total_seconds())

        # a run long enough that a process started after it is younger than it was
        waiting.wait_until(lambda: ran() >= 8, "the engine to beat for 8 s", 60, interval=0.5)
        _kill(engine)
        last_seen = (asyncio.run(_heartbeat_row(office))).last_seen.timestamp()
        while time.time() < last_seen + 3:  # the new process starts after the last beat
            time.sleep(0.2)
        reused = _reuse_pid(pid)
        if reused is None:
            pytest.skip(f"pid {pid} was taken by other processes each time")

        why = f"its process {pid} {EXITED} (pid reused)"
        [row] = _json(office, "engines")
        assert (row["status"], row["state"], row["alive"], row["pid"], row["dead_reason"]) == (
            "dead", "dead", False, pid, why
        )  # fmt: skip
        assert {(s["state"], s["lost_reason"]) for s in office.sessions()} == {("lost", why)}
    finally:
        for proc in (engine, reused):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(30)


async def _office_with_rows(folder: Path) -> None:
    """Office ctl: engines `elsewhere-1` and `fixed`, alive by their heartbeat rows, a ready
    session each."""
    store = SqliteStore(folder / "semo.db")
    await store.open()
    try:
        office = await store.create_office(OfficeRow(name="ctl"))
        agent = await store.upsert_agent(Agent(office_id=office.id, name="A", role="A"))
        for engine_id in ("elsewhere-1", "fixed"):
            await store.record_heartbeat(office.id, engine_id, dead_after=600, starting=True)
            await store.upsert_session(
                AgentSession(
                    office_id=office.id, agent_id=agent.id, status="ready", engine_id=engine_id
                )
            )
    finally:
        await store.close()


def _run_of(path: Path, engine_id: str, started: datetime, last: datetime) -> None:
    """Make the heartbeat row say the engine ran from `started` to its last beat `last`."""
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE engines SET started_at = ?, last_seen = ? WHERE engine_id = ?",
            (ts(started), ts(last), engine_id),
        )


def test_local_facts_decide_only_for_this_machines_runs(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`fixed`: an id the control info file ties to a pid. The pid of a process started before
    the run (init) may be the engine; a process started after its last beat (a new sleep) is
    not; a file written by another run of the id is not used. `elsewhere-1`: a default id
    of another machine with a pid that does not run here: its heartbeat decides (alive)."""
    asyncio.run(_office_with_rows(office.folder))
    info = office.runtime / "semo" / "control-ctl-x.json"
    info.parent.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(office.runtime))
    now = datetime.now(UTC)  # a run of ten minutes, last seen five seconds ago
    _run_of(
        office.folder / "semo.db", "fixed", now - timedelta(minutes=10), now - timedelta(seconds=5)
    )
    run = asyncio.run(_heartbeat_row_of(office, "fixed")).started_at.isoformat()

    def write(pid: int, heartbeat_started_at: str = run) -> None:
        fields = {"pid": pid, "engine_id": "fixed", "heartbeat_started_at": heartbeat_started_at}
        info.write_text(json.dumps(fields))

    def states() -> dict[str, tuple[str, bool, str | None]]:
        rows = _json(office, "engines")
        return {r["engine_id"]: (r["state"], r["alive"], r["dead_reason"]) for r in rows}

    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        alive = ("alive", True, None)
        assert states() == {"elsewhere-1": alive, "fixed": alive}  # no info file
        write(sleeper.pid)
        why = f"its process {sleeper.pid} {EXITED} (pid reused)"
        assert states() == {"elsewhere-1": alive, "fixed": ("dead", False, why)}
        lost = {s["engine_id"]: (s["state"], s["lost_reason"]) for s in office.sessions()}
        assert lost == {"elsewhere-1": ("ready", None), "fixed": ("lost", why)}
        write(1)  # init started before the run: may be the engine
        assert states() == {"elsewhere-1": alive, "fixed": alive}
        pids = {r["engine_id"]: r["pid"] for r in _json(office, "engines")}
        assert pids == {"elsewhere-1": None, "fixed": 1}  # another machine's pid: not ours
        write(sleeper.pid, heartbeat_started_at="2001-01-01T00:00:00+00:00")  # another run
        assert states() == {"elsewhere-1": alive, "fixed": alive}
        sleeper.kill()
        sleeper.wait()
        write(sleeper.pid)
        gone = f"its process {sleeper.pid} {EXITED}"
        assert states() == {"elsewhere-1": alive, "fixed": ("dead", False, gone)}
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait()


async def _heartbeat_row_of(office: Office, engine_id: str) -> Any:
    store = SqliteStore(office.folder / "semo.db")
    await store.open()
    try:
        [office_row] = await store.list_offices()
        rows = await store.list_engines(office_row.id)
        return next(r for r in rows if r.engine_id == engine_id)
    finally:
        await store.close()
