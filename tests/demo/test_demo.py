"""`semo demo --headless`: the demo office runs its job through every protocol, on real PTYs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def run_semo(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "semo.engine.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_demo_job_goes_through_question_invocations_and_results(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEMO_")}
    env |= {"SEMO_SQLITE_PATH": str(tmp_path / "semo.db"), "XDG_STATE_HOME": str(tmp_path)}
    result = run_semo(env, "demo", "--headless")
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "job done: 'build the login page'" in out
    steps = [
        "FE: question asked: Which database should the login page use?",
        "FE: question answered: postgres",
        "FE: invoked: FE -> BE",
        "BE: result created",
        "FE: invoked: FE -> QA",
        "QA: result created",
        "job done (done) login page built on postgres",
    ]
    positions = [out.index(step) for step in steps]
    # every role changed a file: the job's branch holds the three (F5 then d in the console)
    assert "semo demo: the job's work is on semo/job/" in out
    for changed in ("web/login.html", "api/login.py", "tests/test_login.py"):
        assert changed in out.split("the job's work is on")[1]
    assert positions == sorted(positions), out
    questions = json.loads(run_semo(env, "questions", "--office", "demo", "--all", "--json").stdout)
    assert [(q["status"], q["answer"]) for q in questions] == [("answered", "postgres")]
    sessions = json.loads(run_semo(env, "sessions", "--office", "demo", "--all", "--json").stdout)
    assert len(sessions) == 3 and {s["status"] for s in sessions} == {"terminated"}
    # a second run reuses the office and its agents
    assert run_semo(env, "demo", "--headless").returncode == 0


def test_demo_agent_says_it_is_scripted() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "semo.engine.demo.agent",
            "--role",
            "QA",
            "--steps",
            "1",
            "--delay",
            "0",
        ],
        input="check\nexit\n",
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert "(scripted, not an AI)" in result.stdout
    assert "check" in result.stdout and '"check"' not in result.stdout  # the task, once, short
    assert "[SEMO:DONE]" in result.stdout


async def test_a_demo_engine_started_again_does_not_open_a_second_demo_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A demo engine SIGKILLed while FE works leaves its job running; the next demo engine's
    recovery retries it, so no new one is made (there were two jobs and every question was
    asked twice). Once that job has ended, a new demo engine starts a new one."""
    from semo.engine.demo.office import demo_config, new_demo_job, prepare_demo_repository
    from semo.engine.engine import Engine

    monkeypatch.setenv("SEMO_SQLITE_PATH", str(tmp_path / "semo.db"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    prepare_demo_repository()
    engine = Engine(demo_config())
    await engine.start()
    try:
        job = await new_demo_job(engine)
        assert job is not None and job.status == "pending"
        assert await new_demo_job(engine) is None
        await engine.store.update_job(job.id, status="running")
        assert await new_demo_job(engine) is None
        await engine.store.update_job(job.id, status="done")
        again = await new_demo_job(engine)
        assert again is not None and again.id != job.id
    finally:
        await engine.stop("test over")
