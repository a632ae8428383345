"""`semo demo` runs the three demo agents in real PTYs and each finishes its task."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def run_semo(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_demo_agents_finish_their_tasks(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEMO_")}
    env["SEMO_SQLITE_PATH"] = str(tmp_path / "semo.db")
    result = run_semo(env, "demo", "--seconds", "8", "--no-live")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3/3 demo agents finished" in result.stdout
    for role in ("FE", "BE", "QA"):
        assert f"── {role} " in result.stdout
    assert result.stdout.count("[SEMO:DONE]") == 3
    for role in ("FE", "BE", "QA"):  # the protocol pipeline saw each agent work and finish
        assert f"{role}: state ready" in result.stdout
        assert "message step_complete → message step_complete" in result.stdout
        assert "message done" in result.stdout
    # the office and its sessions are rows in the embedded store; a second run reuses the office
    assert run_semo(env, "demo", "--seconds", "8", "--no-live").returncode == 0
    sessions = json.loads(run_semo(env, "sessions", "--office", "demo", "--all", "--json").stdout)
    assert len(sessions) == 6
    assert {s["status"] for s in sessions} == {"terminated"}
    assert len({s["agent_id"] for s in sessions}) == 3


def test_demo_agent_says_it_is_scripted():
    result = subprocess.run(
        [sys.executable, "-m", "engine.demo.agent", "--role", "QA", "--steps", "1", "--delay", "0"],
        input="check\nexit\n",
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert "scripted stand-in, not an AI" in result.stdout
    assert "[STEP_COMPLETE] step 1 of 'check'" in result.stdout
    assert "[SEMO:DONE]" in result.stdout
