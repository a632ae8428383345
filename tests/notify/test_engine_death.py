"""A `semo engine` SIGKILLed is reported once, by the next engine of the office, to a webhook;
an engine stopped cleanly is not reported. Real processes: the engines, their bash agents, the
store (sqlite), a loopback webhook."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from tests.control.office import BASH, CONFIG, Office, ctl_config, office_fixture, wait_until
from tests.support.notify_servers import HttpReceiver

pytestmark = pytest.mark.timeout(240)

office = office_fixture()


def _ready(office: Office, pid: int) -> bool:
    """Agents A and B ready in sessions of the engine with this pid (id <host>-<pid>)."""
    listed = office.semo("sessions", "--office", "ctl", "--json", check=False)
    if listed.returncode != 0:
        return False  # the engine has not made the office yet
    sessions = json.loads(listed.stdout)
    mine = [s for s in sessions if str(s.get("engine_id", "")).endswith(f"-{pid}")]
    return sorted(str(s["role"]) for s in mine if s["status"] == "ready") == ["A", "B"]


def _start(office: Office, log: Path) -> subprocess.Popen[bytes]:
    engine = office.engine(log)
    wait_until(lambda: _ready(office, engine.pid), "the engine's agents")
    return engine


def test_a_killed_engine_is_reported_once_by_the_next_one(office: Office, tmp_path: Path) -> None:
    with HttpReceiver() as hook:
        notify = (
            f'\n[[notify]]\nsink = "webhook"\nurl = "{hook.url}/hook"\nevents = ["engine_died"]\n'
        )
        (office.folder / "semo.toml").write_text(CONFIG + notify)
        log = tmp_path / "engines.log"
        first = _start(office, log)
        first.send_signal(signal.SIGKILL)
        first.wait()

        second = _start(office, log)
        wait_until(lambda: hook.requests, "the report of the killed engine")
        [report] = hook.bodies()
        assert report["kind"] == "engine_died" and report["office"] == "ctl"
        assert report["ref"].endswith(f"-{first.pid}")  # <host>-<pid> of the killed run
        assert "found on start by" in report["needed"] and "session(s)" in report["needed"]

        second.send_signal(signal.SIGTERM)  # a clean stop: nothing to report
        assert second.wait(timeout=60) == 0
        third = _start(office, log)
        third.send_signal(signal.SIGTERM)
        assert third.wait(timeout=60) == 0
        assert len(hook.requests) == 1, hook.bodies()  # reported once, by the second engine


def test_an_agent_that_keeps_crashing_opens_its_breaker_and_says_so(
    office: Office, tmp_path: Path
) -> None:
    crashing = ctl_config(1, BASH, 'command = ["sh", "-c", "exit 3"]')
    with HttpReceiver() as hook:
        notify = (
            f'\n[[notify]]\nsink = "webhook"\nurl = "{hook.url}/hook"\nevents = ["breaker_open"]\n'
        )
        (office.folder / "semo.toml").write_text(crashing + notify)
        engine = office.engine(tmp_path / "engine.log")
        try:
            wait_until(lambda: hook.requests, "the breaker's notification")
        finally:
            engine.send_signal(signal.SIGTERM)
            engine.wait(timeout=60)
        [body] = hook.bodies()
    assert body["kind"] == "breaker_open" and body["agent"] == "B"
    assert body["title"] == "B sessions keep crashing"
    assert "circuit breaker open" in body["needed"]
