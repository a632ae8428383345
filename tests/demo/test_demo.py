"""`semo demo` runs the three demo agents in real PTYs and each finishes its task."""

from __future__ import annotations

import subprocess
import sys


def test_demo_agents_finish_their_tasks():
    result = subprocess.run(
        [sys.executable, "-m", "engine.cli", "demo", "--seconds", "5", "--no-live"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3/3 demo agents finished" in result.stdout
    for role in ("FE", "BE", "QA"):
        assert f"── {role} " in result.stdout
    assert result.stdout.count("[SEMO:DONE]") == 3
    for role in ("FE", "BE", "QA"):  # the protocol pipeline saw each agent work and finish
        assert f"{role}: state ready" in result.stdout
        assert "message step_complete → message step_complete" in result.stdout
        assert "message done" in result.stdout


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
