"""Agents cannot make the engine store or queue without bound (issue 21 #2).

The observer caps protocol messages per turn, but every result typed into a model agent starts
a new turn, so two agents trading plain results grew the store by thousands of rows in seconds.
Here two flooding agents (real PTYs under a real `semo engine`, generic, `reads_prompts = true`)
answer every prompt with five results for the other: each result typed starts five more. The
budgets (`[budgets]`, per agent, over time) stop it: each agent stores at most its `results`,
is told once, the rest is dropped at the door, and the engine keeps serving. The operator
starts it with one prompt to A.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

from tests.control.office import Office, ctl_config, wait_until

pytestmark = pytest.mark.timeout(180)

RESULTS = 10
FLOOD = Path(__file__).resolve().parents[1] / "support" / "flood_agent.py"


def flood_agent(peer: str, log: Path, per: int = 5, size: int = 200) -> str:
    command = [sys.executable, str(FLOOD), peer, str(per), str(size), str(log)]
    return f"command = {json.dumps(command)}\nreads_prompts = true"


def stored_results(db: Path) -> dict[str, int]:
    """Results stored, by the sender's role (none before the engine made its tables)."""
    if not db.exists():
        return {}
    with sqlite3.connect(db) as connection:
        tables = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        if "agent_results" not in {name for (name,) in tables}:
            return {}
        rows = connection.execute(
            "SELECT a.role, count(*) FROM agent_results r JOIN agents a"
            " ON a.id = r.sender_agent_id GROUP BY a.role"
        ).fetchall()
    return {role: count for role, count in rows}


def told(log: Path) -> bool:
    return log.exists() and "[budgets] results" in log.read_text()


def test_two_agents_trading_results_stay_within_their_budgets(tmp_path: Path) -> None:
    office = Office(tmp_path)
    logs = {role: tmp_path / f"prompts-{role}.jsonl" for role in ("A", "B")}
    config = ctl_config(1, flood_agent("B", logs["A"]), flood_agent("A", logs["B"]))
    config += f"\n[budgets]\nwindow = 3600\nresults = {RESULTS}\nmessages = 1000\n"
    (tmp_path / "semo.toml").write_text(config)
    db = tmp_path / "semo.db"
    engine = office.engine(tmp_path / "engine.log")
    try:
        wait_until(office.both_ready, "both agents at their prompts")
        [a] = [s for s in office.sessions() if s["role"] == "A"]
        office.semo(
            "command", "send_prompt", "--office", "ctl", "--session", str(a["session_id"]),
            "--payload", '{"prompt": "start trading results with B"}',
        )  # fmt: skip
        # either both agents were told they are over budget, or the flood got through
        wait_until(
            lambda: (
                (told(logs["A"]) and told(logs["B"]))
                or sum(stored_results(db).values()) > 10 * RESULTS
            ),
            "the budgets to hold or the flood to get through",
            timeout=120,
        )
        counts = stored_results(db)
        assert counts and all(count <= RESULTS for count in counts.values()), counts
        # each told once (one note per window), not once per refused result
        for log in logs.values():
            notes = [p for p in log.read_text().splitlines() if "[budgets] results" in p]
            assert len(notes) == 1, notes
        assert "over_budget" in (tmp_path / "engine.log").read_text()
        assert engine.poll() is None
        assert {s["role"] for s in office.sessions()} == {"A", "B"}  # still serving
        assert stored_results(db) == counts  # and nothing more got in
    finally:
        engine.terminate()
        engine.wait(60)
        office.cleanup()
