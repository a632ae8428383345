"""SQLite schema version 10 (migrations/0016): the command type `ship_job`.

A version 9 file (its agent_commands CHECK did not know ship_job) is upgraded in place: its
commands and their results are kept (the results still reference agent_commands), the table's
wake-up triggers and indexes are there again, and a ship_job command can be stored.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from semo.engine.store.models import Office
from semo.engine.store.sqlite import SCHEMA, SCHEMA_VERSION, SqliteStore

_NEW = "'get_output', 'cancel', 'terminate', 'run_job', 'ship_job')"
_OLD = "'get_output', 'cancel', 'terminate', 'run_job')"


def downgrade_to_9(path: Path) -> None:
    """Rebuild agent_commands as schema version 9 had it (its rows copied)."""
    start = SCHEMA.index("CREATE TABLE IF NOT EXISTS agent_commands")
    table = SCHEMA[start : SCHEMA.index(");", start) + 2].replace(_NEW, _OLD)
    assert _OLD in table
    conn = sqlite3.connect(path)
    try:
        conn.executescript(
            "PRAGMA legacy_alter_table = ON;"
            "DROP TRIGGER semo_agent_commands_insert_wake;"
            "DROP TRIGGER semo_agent_commands_requeue_wake;"
            "ALTER TABLE agent_commands RENAME TO c9;"
            f"{table}"
            "INSERT INTO agent_commands SELECT * FROM c9; DROP TABLE c9;"
            "PRAGMA user_version = 9;"
        )
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'agent_commands'")
        assert "'ship_job'" not in sql.fetchone()[0]
    finally:
        conn.close()


async def test_a_version_9_file_is_upgraded_and_takes_ship_job(tmp_path: Path) -> None:
    path = tmp_path / "semo.db"
    async with SqliteStore(path) as store:
        office = await store.create_office(Office(name="o"))
        done = await store.insert_command(office.id, "run_job", {"job_id": "j1"})
        pending = await store.insert_command(office.id, "run_job", {"job_id": "j2"})
        claimed = await store.claim_next_command(office.id, "engine-1")
        assert claimed is not None and claimed.id == done.id
        result = await store.complete_command(done.id, "engine-1", success=True, result={"a": 1})
        before = [await store.get_command(c.id) for c in (done, pending)]
    downgrade_to_9(path)
    async with SqliteStore(path) as upgraded:
        assert [await upgraded.get_command(c.id) for c in (done, pending)] == before
        assert await upgraded.get_result(done.id) == result
        ship = await upgraded.insert_command(office.id, "ship_job", {"job_id": "j1", "push": True})
        assert (await upgraded.get_command(ship.id)).command_type == "ship_job"
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 10
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        assert {
            "semo_agent_commands_insert_wake",
            "semo_agent_commands_requeue_wake",
            "agent_commands_claim_idx",
        } <= names
        assert "agent_commands_v9" not in names
        results = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'agent_command_results'"
        ).fetchone()[0]
        assert "REFERENCES agent_commands (id)" in results
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        conn.close()
