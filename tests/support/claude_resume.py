"""Helpers of test_claude_resume that other test modules use too."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from tests.control.office import SEMO, alive, start_engine, wait_until
from tests.support.office_toml import sqlite_office_toml

MARKER = "pineapple-8812"


ASKED = "Which colour should the pineapple button be?"


FIRST_REPLY = f"Noted the word, it is safe with me.\n[ASK_USER] {ASKED}"


CONFIG = (
    sqlite_office_toml("resume")
    + """
[engine]
command_timeout = 120

[pool]
max_sessions = 4
warm_roles = ["BE"]

[[agents]]
role = "BE"
cols = 100
rows = 30
env = {{ ANTHROPIC_BASE_URL = "{base_url}", ANTHROPIC_AUTH_TOKEN = "scripted-dummy-token" }}
"""
)


def semo(env: dict[str, str], folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SEMO), *args], env=env, cwd=folder, capture_output=True, text=True, timeout=180
    )


def ready_session(env: dict[str, str], folder: Path) -> dict[str, object] | None:
    listed = semo(env, folder, "sessions", "--office", "resume", "--json")
    rows = json.loads(listed.stdout or "[]")
    return next((r for r in rows if r["status"] == "ready"), None)


def first_engine(tmp_path: Path, env: dict[str, str]) -> dict[str, object]:
    """Run `semo engine`, give BE a turn, SIGKILL the engine; BE's session row."""
    first = start_engine(tmp_path, env, tmp_path / "first.log")
    try:
        wait_until(lambda: ready_session(env, tmp_path), "BE ready", 120)
        row = ready_session(env, tmp_path)
        assert row is not None
        payload = json.dumps({"prompt": f"Remember the word {MARKER}."})
        sent = semo(
            env, tmp_path, "command", "send_prompt", "--office", "resume",
            "--session", str(row["session_id"]), "--payload", payload, "--wait",
            "--timeout", "120",
        )  # fmt: skip
        assert sent.returncode == 0, sent

        def asked() -> bool:
            listed = semo(env, tmp_path, "questions", "--office", "resume", "--json")
            return listed.returncode == 0 and ASKED in listed.stdout

        wait_until(asked, "the question recorded")  # the router writes it after the turn
        records = tmp_path / "state" / "semo"
        wait_until(lambda: list(records.glob("resume-*.json")), "the conversation recorded")
        [record] = records.glob("resume-*.json")
        assert row["session_id"] in json.loads(record.read_text())
        time.sleep(1.0)  # the CLI writes its transcript after the turn's hooks
        first.kill()
        first.wait(30)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(30)  # reaped: no zombie left in pytest
    agent_pid = int(row["pid"])  # type: ignore[call-overload]
    wait_until(lambda: not alive(agent_pid), "the agent to go with its engine", 30)
    return row


def make_repo(folder: Path) -> None:
    repo = folder / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "init"], check=True)
