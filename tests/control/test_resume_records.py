"""The record of Claude Code sessions a killed engine left, read by the next engine (real
engine, bash agents): what it resumes and what it refuses.

The ids come from the agents' own hook reports, so they are untrusted: an id that is not a
Claude Code session id (a UUID) is never put on a command line (`--resume
--dangerously-skip-permissions` would be a flag), an id whose transcript is not a regular file
in the session's own Claude projects folder (another worktree's conversation, a symlink planted
there) is refused with a `resume_failed` step, a record for an agent that is no longer
configured or whose folder is gone is dropped; every record read is removed from the file.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from semo.engine.agents.claude.transcript import project_slug
from semo.engine.config import parse_config
from semo.engine.control.paths import office_paths
from semo.engine.control.resume import conversations_path, save
from semo.engine.engine import Engine
from semo.engine.events import BaseEvent, RoutingStep
from tests.control.office import CONFIG
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(120)

UUID = "0d9c1b7e-3f41-4b8e-9c55-2a1e6f0b7d31"
OTHERS = "5b7d8f0e-1a2c-4e6b-8d9f-0a1b2c3d4e5f"  # a conversation of another worktree
PLANTED = "7c2e4a6b-8d0f-4b1d-9e3f-5a7c9e1b3d5f"  # a symlink in the right folder


def transcript(home: Path, folder: Path, claude_id: str) -> Path:
    """Where Claude Code keeps conversation `claude_id` of a session started in `folder`."""
    project = home / ".claude" / "projects" / project_slug(str(folder.resolve()))
    project.mkdir(parents=True, exist_ok=True)
    return project / f"{claude_id}.jsonl"


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
    transcript(tmp_path, folder, UUID).write_text("{}\n")
    elsewhere = tmp_path / "other-worktree"
    elsewhere.mkdir()
    transcript(tmp_path, elsewhere, OTHERS).write_text("{}\n")  # not B's folder's
    (tmp_path / "planted.jsonl").write_text("{}\n")
    transcript(tmp_path, folder, PLANTED).symlink_to(tmp_path / "planted.jsonl")
    save(
        record,
        {
            "forged": {"claude_session_id": "--dangerously-skip-permissions", "role": "A",
                       "agent_id": agents["A"], "folder": str(folder)},
            "no-agent": {"claude_session_id": UUID, "role": "GONE", "agent_id": "x",
                         "folder": str(folder)},
            "no-folder": {"claude_session_id": UUID, "role": "B", "agent_id": agents["B"],
                          "folder": str(tmp_path / "deleted")},
            "someone-elses": {"claude_session_id": OTHERS, "role": "A", "agent_id": agents["A"],
                              "folder": str(folder)},
            "planted": {"claude_session_id": PLANTED, "role": "A", "agent_id": agents["A"],
                        "folder": str(folder)},
            "good": {"claude_session_id": UUID, "role": "B", "agent_id": agents["B"],
                     "folder": str(folder)},
        },
    )  # fmt: skip
    steps: list[RoutingStep] = []

    def listen(event: BaseEvent) -> None:
        if isinstance(event, RoutingStep) and event.step == "resume_failed":
            steps.append(event)

    engine.bus.add_listener(listen)
    await engine.start()
    try:
        await eventually(lambda: json.loads(record.read_text()) == {}, 20)
        resumed = [s for s in engine.sessions() if "--resume" in s.terminal.argv]
        assert [s.terminal.argv[-2:] for s in resumed] == [["--resume", UUID]]
        assert [(s.role, s.cwd) for s in resumed] == [("B", folder)]
        assert all(
            "--dangerously-skip-permissions" not in s.terminal.argv for s in engine.sessions()
        )
        # the two ids that name no transcript of A's own folder: refused, said so
        assert sorted(step.session_id or "" for step in steps) == ["planted", "someone-elses"]
        assert all("no transcript of conversation" in step.detail for step in steps)
    finally:
        await engine.stop("test over")
        shutil.rmtree(runtime, ignore_errors=True)


def _make_repo(repo: Path) -> None:
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "init"], check=True)


async def test_a_resumed_session_is_a_pool_session_reaped_with_its_worktree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The resumed session joins the pool: listed in its status (the console's pool panel),
    reaped once idle like any cold session, and the worktree it ran in (a job's) removed."""
    runtime = Path(tempfile.mkdtemp(prefix="semo-ctl-"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    repo = tmp_path / "repo"
    await asyncio.to_thread(_make_repo, repo)
    bash = 'command = ["bash", "--norc", "--noprofile", "-i"'
    text = CONFIG.replace(
        f'role = "B"\nprofile = "generic"\n{bash}]',
        f'role = "B"\nprofile = "generic"\n{bash}, "-s", "--"]',
    ).replace("max_sessions = 4\n", "max_sessions = 4\nidle_timeout = 1\n")
    assert "idle_timeout = 1" in text and '"-s", "--"' in text
    config = parse_config(text, tmp_path / "semo.toml")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    engine = Engine(config, control=True, agent_env=env)
    await engine.start()
    agent_id = engine.agents["B"].id
    assert engine.manager is not None and engine.manager.worktrees is not None
    worktree = await engine.manager.worktrees.create("B", "job-left-behind")
    await engine.stop("a job's session left a conversation behind")
    record = conversations_path(office_paths("ctl", config.store_config()))
    entry = {"claude_session_id": UUID, "role": "B", "agent_id": agent_id}
    save(record, {"old": entry | {"folder": str(worktree.path)}})
    transcript(tmp_path, worktree.path, UUID).write_text("{}\n")

    engine = Engine(config, control=True, agent_env=env)
    await engine.start()
    try:
        assert engine.pool is not None

        def resumed() -> list[str]:
            return [s.session_id for s in engine.sessions() if "--resume" in s.terminal.argv]

        await eventually(lambda: resumed(), 30)
        [session_id] = resumed()
        await eventually(lambda: session_id in engine.pool.status().sessions, 10)
        status = engine.pool.status().sessions[session_id]
        assert status.role == "B"
        # idle once it is ready: reaped by the pool, and the job's worktree with it
        await eventually(lambda: session_id not in engine.pool.status().sessions, 60)
        await eventually(lambda: session_id not in resumed(), 30)
        await eventually(lambda: not worktree.path.exists(), 30)
        assert (repo / ".git").is_dir()
    finally:
        await engine.stop("test over")
        shutil.rmtree(runtime, ignore_errors=True)
