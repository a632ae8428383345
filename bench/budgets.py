"""Two agents trading results under a real `semo engine`: memory and disk with and without
the per-agent budgets (issue 21 #2).

    python bench/budgets.py [--seconds 20] [--size 30000] [--per 5]

Two flooding agents (tests/support/flood_agent.py, generic, `reads_prompts = true`) answer
every prompt with `--per` results of `--size` characters for the other; one prompt to A starts
it. Run twice: with the default `[budgets]`, and with budgets so large they never bind (what
the engine did before them). Printed for each: results stored, the engine's RSS (VmRSS) and the
SQLite store's size (with its WAL) before the kick and `--seconds` later, and the growth rates.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.control.office import Office, ctl_config, wait_until  # noqa: E402

FLOOD = ROOT / "tests" / "support" / "flood_agent.py"
UNBOUNDED = (
    "\n[budgets]\nmessages = 1000000\nresults = 1000000\nbytes = 1099511627776\n"
    "queued_prompts = 100000\n"
)


def agent(peer: str, log: Path, per: int, size: int) -> str:
    command = [sys.executable, str(FLOOD), peer, str(per), str(size), str(log)]
    return f"command = {json.dumps(command)}\nreads_prompts = true"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def disk_mb(db: Path) -> float:
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*")) / 1e6


def results(db: Path) -> int:
    with sqlite3.connect(db) as connection:
        return int(connection.execute("SELECT count(*) FROM agent_results").fetchone()[0])


def run(label: str, extra: str, args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="semo-budgets-"))
    office = Office(folder)
    logs = [folder / "a.jsonl", folder / "b.jsonl"]
    config = ctl_config(
        1, agent("B", logs[0], args.per, args.size), agent("A", logs[1], args.per, args.size)
    )
    (folder / "semo.toml").write_text(config + extra)
    db = folder / "semo.db"
    engine = office.engine(folder / "engine.log")
    try:
        wait_until(office.both_ready, "both agents ready", timeout=60)
        [a] = [s for s in office.sessions() if s["role"] == "A"]
        rss0, disk0, n0 = rss_mb(engine.pid), disk_mb(db), results(db)
        payload = json.dumps({"prompt": "start trading results with B"})
        office.semo(
            "command", "send_prompt", "--office", "ctl", "--session", str(a["session_id"]),
            "--payload", payload,
        )  # fmt: skip
        start = time.monotonic()
        peak = rss0
        while time.monotonic() - start < args.seconds:
            time.sleep(0.5)
            peak = max(peak, rss_mb(engine.pid))
        took = time.monotonic() - start
        rss1, disk1, n1 = rss_mb(engine.pid), disk_mb(db), results(db)
        print(
            f"{label:<18} results {n1 - n0:>6}  RSS {rss0:6.1f} -> {rss1:6.1f} MB "
            f"(peak {peak:6.1f}, {(rss1 - rss0) / took:+6.2f} MB/s)  store {disk0:7.2f} -> "
            f"{disk1:7.2f} MB ({(disk1 - disk0) / took:+6.2f} MB/s)  over {took:.0f} s"
        )
    finally:
        engine.terminate()
        try:
            engine.wait(60)
        except subprocess.TimeoutExpired:
            engine.kill()
        office.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--size", type=int, default=30000)
    parser.add_argument("--per", type=int, default=5)
    args = parser.parse_args()
    print(f"two agents, {args.per} results of {args.size} chars per prompt, {args.seconds:g} s")
    run("default budgets", "", args)
    run("no budgets", UNBOUNDED, args)


if __name__ == "__main__":
    main()
