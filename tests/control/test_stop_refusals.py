"""Refusals around a stopped or unusable engine, through the real `semo` command.

- `semo command cancel --session S`, S a session of an engine that is not running (a process of
  this machine that has exited, as after a SIGKILL): refused like send_prompt and send_text
  (exit 2, "was not queued"), and no command row is written; send_prompt is refused the same way.
- `semo console` when the runtime folder (the /tmp fallback, no XDG_RUNTIME_DIR) belongs to
  another uid: one clear line, exit 1, no traceback, and no engine started.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
from pathlib import Path

import pytest

from semo.engine.store.models import Agent, AgentSession, Office
from semo.engine.store.sqlite import SqliteStore
from tests.control.office import office_folder, run_console, run_semo
from tests.support.semo_process import environment_without_semo

pytestmark = pytest.mark.timeout(120)


def _exited_pid() -> int:
    gone = subprocess.Popen(["true"])
    gone.wait()
    return gone.pid


def test_cancel_for_a_dead_engines_session_is_refused_like_a_prompt(tmp_path: Path) -> None:
    db = tmp_path / "semo.db"
    engine_id = f"{socket.gethostname()}-{_exited_pid()}"

    async def prepare() -> tuple[str, str]:
        async with SqliteStore(db) as store:
            office = await store.create_office(Office(name="o"))
            agent = await store.upsert_agent(Agent(office_id=office.id, name="SH", role="SH"))
            session = await store.upsert_session(
                AgentSession(
                    office_id=office.id, agent_id=agent.id, status="ready", engine_id=engine_id
                )
            )
            return office.id, session.session_id

    office_id, session_id = asyncio.run(prepare())
    env = environment_without_semo() | {
        "SEMO_SQLITE_PATH": str(db),
        "HOME": str(tmp_path),
        "XDG_RUNTIME_DIR": str(tmp_path),
    }
    for kind, payload in (("cancel", "{}"), ("send_prompt", '{"prompt": "hi"}')):
        args = ["command", kind, "--office", "o", "--session", session_id, "--payload", payload]
        refused = run_semo(*args, env=env, cwd=tmp_path, timeout=60)
        assert refused.returncode == 2, refused
        assert "is not running" in refused.stderr, refused
        assert f"the {kind} command was not queued" in refused.stderr, refused

    async def commands() -> list[object]:
        async with SqliteStore(db) as store:
            return list(await store.list_commands(office_id))

    assert asyncio.run(commands()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to hand a folder to another uid")
def test_console_with_a_runtime_folder_of_another_uid_says_so_in_one_line(
    tmp_path: Path,
) -> None:
    temp = tmp_path / "tmp"
    foreign = temp / f"semo-{os.getuid()}"
    foreign.mkdir(parents=True)
    os.chown(foreign, 65534, 65534)
    office_folder(tmp_path)
    env = {k: v for k, v in environment_without_semo().items() if k != "XDG_RUNTIME_DIR"} | {
        "TMPDIR": str(temp),
        "HOME": str(tmp_path),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "SEMO_SQLITE_PATH": str(tmp_path / "semo.db"),
    }
    console = run_console("console", "--config", "semo.toml", env=env, cwd=tmp_path)
    assert console.returncode == 1, console
    assert "Traceback" not in console.stderr + console.stdout
    lines = console.stderr.strip().splitlines()
    assert len(lines) == 1, console.stderr
    assert f"{foreign} belongs to uid 65534" in lines[0]
    assert "XDG_RUNTIME_DIR" in lines[0]
    assert list(foreign.iterdir()) == []  # nothing was made in it
    logs = list((tmp_path / "state").rglob("engine-*.log"))
    assert all("starting" not in log.read_text() for log in logs)  # no engine was started
