"""An engine with a configured `[engine] id` SIGKILLed, then started again on the same machine.

The store still says the killed run is alive (its row runs out only after a few beats). The
office's control info file, left behind by the killed run, names that very run (engine id and
the heartbeat row's start), its pid has exited and its socket is closed: the next engine starts
without watching the row (before, it waited two heartbeat intervals, 20 s by default). A run of
the same id that is still alive is refused as before, and so is one the info file does not name.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from semo.engine.control.paths import OfficePaths
from semo.engine.liveness import killed_run_of_office
from tests.control.office import Office, wait_until

pytestmark = pytest.mark.timeout(180)

SKIPPED = "the run the store says alive is gone"
WATCHED = "watching its heartbeat"


@pytest.fixture
def office(tmp_path: Path) -> Office:
    office = Office(tmp_path)
    config = office.folder / "semo.toml"
    config.write_text(config.read_text().replace("[engine]\n", '[engine]\nid = "fixed"\n'))
    yield office  # type: ignore[misc]
    office.cleanup()


def _serving(office: Office, pid: int) -> bool:
    try:
        return office.engine_pid() == pid and (office.runtime / "semo").is_dir()
    except (ValueError, OSError, json.JSONDecodeError):
        return False


def test_a_killed_engine_with_a_fixed_id_is_replaced_without_watching_its_row(
    office: Office,
) -> None:
    log = office.folder / "engine.log"
    first = office.engine(log)
    second = None
    try:
        wait_until(lambda: _serving(office, first.pid), "the first engine's socket")
        info = office.info()
        assert info["engine_id"] == "fixed" and info["heartbeat_started_at"]
        first.send_signal(signal.SIGKILL)
        first.wait(30)
        [row] = json.loads(office.semo("engines", "--office", "ctl", "--json").stdout)
        # its heartbeat has not run out (the new engine does not wait for it), yet the
        # listing says dead from this machine's facts: never "running"
        assert datetime.fromisoformat(row["alive_until"]) > datetime.now(UTC)
        assert (row["engine_id"], row["status"], row["pid"]) == ("fixed", "dead", first.pid)

        second = office.engine(log)
        wait_until(lambda: _serving(office, second.pid), "the second engine's socket")
        text = log.read_text()
        assert SKIPPED in text and WATCHED not in text
        assert second.poll() is None
        assert "stopped" in office.semo("stop").stdout
        assert second.wait(30) == 0
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(30)  # reaped: no zombie left in pytest


def test_the_info_file_names_only_its_own_run(tmp_path: Path) -> None:
    """The check trusts the info file only for the run it names: another engine id, another
    heartbeat start (a later run, or one elsewhere), a live pid or an answering socket all
    say "not known gone" (the row is then watched as before)."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    paths = OfficePaths(
        office="o", socket=tmp_path / "o.sock", info=tmp_path / "o.json", log=tmp_path / "o.log"
    )

    def write(**fields: object) -> None:
        base = {"pid": dead.pid, "engine_id": "fixed", "heartbeat_started_at": "T1"}
        paths.info.write_text(json.dumps(base | fields))

    assert killed_run_of_office(paths, "fixed", "T1") is None  # no file
    write()
    assert killed_run_of_office(paths, "fixed", "T1") is not None
    assert killed_run_of_office(paths, "other", "T1") is None
    assert killed_run_of_office(paths, "fixed", "T2") is None
    write(pid=os.getpid())
    assert killed_run_of_office(paths, "fixed", "T1") is None
    write(heartbeat_started_at=None)
    assert killed_run_of_office(paths, "fixed", "None") is None
    paths.info.write_text("{not json")
    assert killed_run_of_office(paths, "fixed", "T1") is None


def test_the_engine_says_who_stopped_it(office: Office) -> None:
    """`semo stop` (and the console's "Stop the office") is the reason the engine gives its
    consoles and its log; a SIGTERM from elsewhere (systemd) is "stopped by signal"."""
    log = office.folder / "engine.log"
    for how, reason in ((("stop",), "stopped by an operator"), (None, "stopped by signal")):
        proc = office.engine(log)
        try:
            wait_until(lambda pid=proc.pid: _serving(office, pid), "the engine's socket")
            if how is None:
                proc.send_signal(signal.SIGTERM)
            else:
                assert "stopped" in office.semo(*how).stdout
            assert proc.wait(30) == 0
            stopping = [line for line in log.read_text().splitlines() if "stopping:" in line]
            assert reason in stopping[-1], stopping
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
