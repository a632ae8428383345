"""SQLite schema version 9 (migrations/0013): a question may be a permission request.

A version 8 file (its user_questions CHECK knew text, choice and confirm) is upgraded in place:
its questions are kept as they were, the table's wake-up trigger and indexes are there again,
and a permission request can be stored and answered.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from semo.engine.store.models import Office, UserQuestion
from semo.engine.store.sqlite import SCHEMA, SCHEMA_VERSION, SqliteStore

_OLD_CHECK = "CHECK (question_type IN ('text', 'choice', 'confirm'))"


def downgrade_to_8(path: Path) -> None:
    """Rebuild user_questions as schema version 8 had it (its rows copied)."""
    start = SCHEMA.index("CREATE TABLE IF NOT EXISTS user_questions")
    table = SCHEMA[start : SCHEMA.index(");", start) + 2]
    table = table.replace("question_type IN ('text', 'choice', 'confirm', 'permission')", "x")
    table = table.replace("CHECK (x)", _OLD_CHECK)
    table = table[: table.index(",\n    CHECK (question_type <> 'permission'")] + "\n);"
    conn = sqlite3.connect(path)
    try:
        conn.executescript(
            "DROP TRIGGER semo_user_questions_update_wake;"
            "ALTER TABLE user_questions RENAME TO q7;"
            f"{table.replace('user_questions', 'user_questions', 1)}"
            "INSERT INTO user_questions SELECT * FROM q7; DROP TABLE q7;"
            "PRAGMA user_version = 8;"
        )
        assert (
            _OLD_CHECK
            in conn.execute(
                "SELECT sql FROM sqlite_master WHERE name = 'user_questions'"
            ).fetchone()[0]
        )
    finally:
        conn.close()


async def test_a_version_8_file_is_upgraded_and_takes_permission_requests(tmp_path: Path) -> None:
    path = tmp_path / "semo.db"
    async with SqliteStore(path) as store:
        office = await store.create_office(Office(name="o"))
        asked = await store.create_question(
            UserQuestion(office_id=office.id, agent_id="a", question="Which?")
        )
        answered = await store.answer_question(asked.id, "postgres")
    downgrade_to_8(path)
    async with SqliteStore(path) as upgraded:
        assert await upgraded.get_question(asked.id) == answered
        permission = await upgraded.create_question(
            UserQuestion(
                office_id=office.id,
                agent_id="a",
                question_type="permission",
                question="Bash: make",
                options=["allow", "allow for this session", "deny"],
            )
        )
        assert (await upgraded.answer_question(permission.id, "deny: not now")).answer == (
            "deny: not now"
        )
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 10
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        assert {"semo_user_questions_update_wake", "user_questions_undelivered_idx"} <= names
        assert "user_questions_v8" not in names
    finally:
        conn.close()
