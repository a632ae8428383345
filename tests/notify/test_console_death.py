"""An engine that dies under attached consoles reaches the office's remote sinks once.

Real processes: a `semo engine` with two bash agents (sqlite store), two `semo console`s
attached to it (each in its own tmux server), loopback servers for a webhook, an ntfy-like
server and SMTP (aiosmtpd, STARTTLS and login). The engine is SIGKILLed: both consoles see
its socket drop without a goodbye, and the remote sinks get exactly one `engine_died` notice
each, saying an attached console saw it, before any next engine exists. The next engine of the
office then ends what the dead one left and does not report it again."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
from pathlib import Path

import pytest

from semo.engine.config import load_config
from semo.engine.control.paths import office_paths
from semo.engine.notify.death import claim_report, report_seen_death
from tests.control.office import Console, Office, consoles, office_fixture, ready, wait_until
from tests.support.notify_servers import SMTP_PASSWORD, SMTP_USER, HttpReceiver, SmtpReceiver
from tests.support.office_toml import sqlite_office_toml

pytestmark = pytest.mark.timeout(240)

office = office_fixture()


def notify_toml(hook: HttpReceiver, ntfy: HttpReceiver, smtp: SmtpReceiver) -> str:
    return f"""
[[notify]]
sink = "console"

[[notify]]
sink = "webhook"
url = "{hook.url}/hook"
events = ["engine_died"]

[[notify]]
sink = "ntfy"
url = "{ntfy.url}/semo-office"
events = ["engine_died"]

[[notify]]
sink = "email"
host = "127.0.0.1"
port = {smtp.port}
username = "{SMTP_USER}"
password = "${{SMTP_PASS}}"
from_addr = "semo@example.com"
to = ["ops@example.com"]
ca_file = "{smtp.cert}"
events = ["engine_died"]
"""


def test_consoles_report_an_engine_death_once_and_the_next_engine_not_again(
    office: Office, tmp_path: Path
) -> None:
    with HttpReceiver() as hook, HttpReceiver() as ntfy, SmtpReceiver(tmp_path) as smtp:
        config = office.folder / "semo.toml"
        config.write_text(config.read_text() + notify_toml(hook, ntfy, smtp))
        office.env["SMTP_PASS"] = SMTP_PASSWORD
        with consoles() as opened:
            first = Console(office, "console")
            opened.append(first)
            first.wait(lambda s: ready(s, "A") and ready(s, "B"), "both agents ready")
            second = Console(office, "console")
            opened.append(second)
            second.wait(lambda s: ready(s, "A") and ready(s, "B"), "the second console")
            engine_id = str(office.info()["engine_id"])
            os.kill(office.engine_pid(), signal.SIGKILL)
            for console in (first, second):
                console.wait_for("Engine gone")
            wait_until(lambda: hook.requests and ntfy.requests and smtp.messages, "the reports")
            time.sleep(3.0)  # whatever a second report would take
            assert (len(hook.requests), len(ntfy.requests), len(smtp.messages)) == (1, 1, 1)
        [body] = hook.bodies()
        assert body["kind"] == "engine_died" and body["office"] == "ctl"
        assert body["ref"] == engine_id
        assert "seen by an attached console" in body["needed"]
        assert "has exited" in body["needed"]  # this machine confirmed the process is gone
        [published] = ntfy.bodies()
        assert published["topic"] == "semo-office" and engine_id in published["title"]
        [mail] = smtp.messages
        assert mail["Subject"] == f"semo ctl: engine {engine_id} died"
        assert smtp.logins == [f"{SMTP_USER}:ok"]

        log = tmp_path / "next.log"
        engine = office.engine(log)
        try:
            wait_until(office.both_ready, "the next engine's agents")
            wait_until(lambda: "reported already" in log.read_text(), "the next engine's check")
        finally:
            engine.send_signal(signal.SIGTERM)
            engine.wait(60)
        assert (len(hook.requests), len(ntfy.requests), len(smtp.messages)) == (1, 1, 1)


async def test_a_live_engine_is_not_reported_and_a_dead_one_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`report_seen_death` itself: an engine id whose process runs (this test's) sends nothing
    and claims nothing; a dead one is sent once, however often it is asked."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    with HttpReceiver() as hook:
        toml = sqlite_office_toml("ctl") + (
            f'\n[[notify]]\nsink = "webhook"\nurl = "{hook.url}/hook"\nevents = ["engine_died"]\n'
        )
        (tmp_path / "semo.toml").write_text(toml)
        config = load_config(tmp_path / "semo.toml")
        paths = office_paths("ctl", config.store_config())
        alive = f"{socket.gethostname()}-{os.getpid()}"
        assert await report_seen_death(config, paths, alive, "socket closed") == []
        exited = await asyncio.create_subprocess_exec("true")
        await exited.wait()
        dead = f"{socket.gethostname()}-{exited.pid}"
        [(label, ok, _detail)] = await report_seen_death(config, paths, dead, "socket closed")
        assert ok and label == "webhook #1"
        assert await report_seen_death(config, paths, dead, "socket closed") == []
        assert claim_report(paths, alive) is True  # the live one was never claimed
        [body] = hook.bodies()
    assert body["ref"] == dead and "seen by an attached console: socket closed" in body["needed"]
