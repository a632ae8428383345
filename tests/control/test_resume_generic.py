"""Generic agents are restarted fresh after an engine SIGKILL, as before: their sessions are
never recorded for a resume (they have no Claude Code conversation), and the next engine starts
new sessions for them (real `semo engine` processes, bash agents)."""

from __future__ import annotations

import json

import pytest

from tests.control.office import Office, alive, office_fixture, wait_until

pytestmark = pytest.mark.timeout(180)


office = office_fixture()


def _ready(office: Office) -> list[dict[str, object]]:
    listed = office.semo("sessions", "--office", "ctl", "--json", check=False)
    if listed.returncode != 0:  # the engine has not written the office yet
        return []
    rows = [r for r in json.loads(listed.stdout) if r["status"] == "ready"]
    return rows if sorted(str(r["role"]) for r in rows) == ["A", "B"] else []


def test_generic_sessions_are_not_resumed_but_started_fresh(office: Office) -> None:
    log = office.folder / "engine.log"
    first = office.engine(log)
    second = None
    try:
        wait_until(lambda: _ready(office), "A and B ready")
        before = _ready(office)
        records = list((office.folder / "state" / "semo").glob("resume-*.json"))
        assert all(json.loads(r.read_text() or "{}") == {} for r in records)  # none recorded
        first.kill()
        first.wait(30)
        for row in before:
            wait_until(lambda row=row: not alive(int(str(row["pid"]))), "agents gone", 30)

        second = office.engine(log)
        old = {r["session_id"] for r in before}
        wait_until(lambda: _ready(office) and not old & {r["session_id"] for r in _ready(office)},
                   "new A and B sessions")  # fmt: skip
        text = log.read_text()
        assert "resumed" not in text and "not resumed" not in text
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(30)  # reaped: no zombie left in pytest
