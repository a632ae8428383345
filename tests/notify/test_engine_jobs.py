"""A real engine (in process, sqlite, a scripted agent in a PTY) runs two jobs: the one its
agent finishes reaches a webhook as `job_done`, the one whose turn ends on an error reaches the
webhook, an ntfy-like server and a mail server (aiosmtpd, STARTTLS and login) as `job_failed`,
with the command that shows it. The job events the engine publishes are the ones the notifier
reads (a renamed step would reach no one)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from semo.engine.config import parse_config
from tests.support.control_engine import serving_engine
from tests.support.notify_servers import (
    SMTP_PASSWORD,
    SMTP_USER,
    HttpReceiver,
    SmtpReceiver,
)
from tests.support.office_toml import sqlite_office_toml
from tests.support.waiting import eventually

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(120)


async def test_a_job_done_and_a_job_failed_reach_the_sinks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "be.json"
    turns = ["[SEMO:DONE] built the page", "fatal: not a git repository (or any parent)"]
    script.write_text(json.dumps(turns))
    command = [sys.executable, "-m", "tests.support.script_agent", "--script", str(script)]
    command += ["--log", str(tmp_path / "be.log")]
    monkeypatch.setenv("SMTP_PASS", SMTP_PASSWORD)
    with HttpReceiver() as hook, HttpReceiver() as ntfy, SmtpReceiver(tmp_path) as smtp:
        config = parse_config(
            sqlite_office_toml("jobs")
            + f"""
[pool]
warm_roles = ["BE"]

[[agents]]
role = "BE"
profile = "generic"
reads_prompts = true
command = {json.dumps(command)}

[[notify]]
sink = "webhook"
url = "{hook.url}/hook"
events = ["job_done", "job_failed"]

[[notify]]
sink = "ntfy"
url = "{ntfy.url}/semo-jobs"
events = ["job_failed"]

[[notify]]
sink = "email"
host = "127.0.0.1"
port = {smtp.port}
username = "{SMTP_USER}"
password = "${{SMTP_PASS}}"
from_addr = "semo@example.com"
to = ["ops@example.com"]
ca_file = "{smtp.cert}"
events = ["job_failed"]
""",
            tmp_path / "semo.toml",
        )
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "HOME": str(tmp_path)}
        async with serving_engine(config, tmp_path, monkeypatch, env, "semo-nj-") as engine:
            done = await engine.create_job("BE", "Build the page")
            await eventually(lambda: len(hook.requests) == 1, timeout=60)
            failed = await engine.create_job("BE", "Commit it")
            await eventually(
                lambda: len(hook.requests) == 2 and ntfy.requests and smtp.messages, timeout=60
            )
        first, second = hook.bodies()
        assert (first["kind"], first["agent"], first["office"]) == ("job_done", "BE", "jobs")
        assert first["needed"] == "built the page"
        assert first["answer"] == f"semo job show {done.id}"
        assert second["kind"] == "job_failed" and "not a git repository" in second["needed"]
        assert second["answer"] == f"semo job show {failed.id}"
        [published] = ntfy.bodies()
        assert published["topic"] == "semo-jobs"
        assert published["title"] == "semo jobs: a job of BE failed"
        [mail] = smtp.messages
        assert mail["Subject"] == "semo jobs: a job of BE failed"
        assert f"semo job show {failed.id}" in mail.get_content()
