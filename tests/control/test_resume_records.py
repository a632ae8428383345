"""The record of Claude Code sessions a killed engine left, read by the next engine (real
engine, bash agents): what it resumes and what it refuses.

The ids come from the agents' own hook reports, so they are untrusted: an id that is not a
Claude Code session id (a UUID) is never put on a command line (`--resume
--dangerously-skip-permissions` would be a flag), a record for an agent that is no longer
configured or whose folder is gone is dropped; every record read is removed from the file.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from engine.config import parse_config
from engine.control.paths import office_paths
from engine.control.resume import conversations_path, save
from engine.engine import Engine
from tests.control.office import CONFIG
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(120)

UUID = "0d9c1b7e-3f41-4b8e-9c55-2a1e6f0b7d31"


async def test_records_are_checked_before_anything_is_resumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = Path(tempfile.mkdtemp(prefix="semo-ctl-"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    # B's bash takes what follows `--` as its positional parameters: `--resume <id>` keeps it
    # running, so the test sees the session it started
    bash = 'command = ["bash", "--norc", "--noprofile", "-i"'
    text = CONFIG.replace(
        f'role = "B"\nprofile = "generic"\n{bash}]',
        f'role = "B"\nprofile = "generic"\n{bash}, "-s", "--"]',
    )
    assert text != CONFIG
    config = parse_config(text, tmp_path / "semo.toml")
    folder = tmp_path / "work"
    folder.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    engine = Engine(config, control=True, agent_env=env, folder_for=lambda _a, _t: folder)
    record = conversations_path(office_paths("ctl", config.store_config()))
    # the agents' ids as the store has them: the office's agents are synced at start, so the
    # records name them by what the first start gave them
    await engine.start()
    agents = {role: agent.id for role, agent in engine.agents.items()}
    await engine.stop("records written")
    engine = Engine(config, control=True, agent_env=env, folder_for=lambda _a, _t: folder)
    save(
        record,
        {
            "forged": {"claude_session_id": "--dangerously-skip-permissions", "role": "A",
                       "agent_id": agents["A"], "folder": str(folder)},
            "no-agent": {"claude_session_id": UUID, "role": "GONE", "agent_id": "x",
                         "folder": str(folder)},
            "no-folder": {"claude_session_id": UUID, "role": "B", "agent_id": agents["B"],
                          "folder": str(tmp_path / "deleted")},
            "good": {"claude_session_id": UUID, "role": "B", "agent_id": agents["B"],
                     "folder": str(folder)},
        },
    )  # fmt: skip
    await engine.start()
    try:
        await eventually(lambda: json.loads(record.read_text()) == {}, 20)
        resumed = [s for s in engine.sessions() if "--resume" in s.terminal.argv]
        assert [s.terminal.argv[-2:] for s in resumed] == [["--resume", UUID]]
        assert [(s.role, s.cwd) for s in resumed] == [("B", folder)]
        assert all(
            "--dangerously-skip-permissions" not in s.terminal.argv for s in engine.sessions()
        )
    finally:
        await engine.stop("test over")
        shutil.rmtree(runtime, ignore_errors=True)
