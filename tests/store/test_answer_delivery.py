"""An answer's delivery is recorded (migration 0008, sqlite schema version 6).

Checked on sqlite, postgres and supabase (the emulator): `mark_answer_delivered` marks an
answered question once (False again, False for a pending or cancelled one or an unknown id, and
it changes nothing else); `list_questions(undelivered=True)` returns only answered questions
whose answer was not marked, narrowed to sessions as before. A version-5 sqlite file is upgraded
with its answers undelivered.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from semo.engine.store.base import Store
from semo.engine.store.models import Office, UserQuestion
from semo.engine.store.sqlite import SCHEMA_VERSION, SqliteStore
from tests.support.sqlite_downgrades import downgrade_to_5


async def _answered(store: Store, office_id: str, session_id: str, answer: str) -> UserQuestion:
    asked = await store.create_question(
        UserQuestion(office_id=office_id, agent_id="a", session_id=session_id, question="?")
    )
    return await store.answer_question(asked.id, answer)


async def test_an_answer_is_marked_delivered_once(store: Store) -> None:
    office = await store.create_office(Office(name="answers"))
    first = await _answered(store, office.id, "s1", "one")
    second = await _answered(store, office.id, "s1", "two")
    other = await _answered(store, office.id, "s2", "three")
    pending = await store.create_question(
        UserQuestion(office_id=office.id, agent_id="a", session_id="s1", question="still?")
    )
    assert first.answer_delivered_at is None

    def ids(rows: list[UserQuestion]) -> list[str]:
        return [row.id for row in rows]

    undelivered = await store.list_questions(office.id, status="answered", undelivered=True)
    assert ids(undelivered) == [first.id, second.id, other.id]
    assert await store.mark_answer_delivered(first.id) is True
    assert await store.mark_answer_delivered(first.id) is False  # once
    marked = await store.get_question(first.id)
    assert marked.answer_delivered_at is not None
    assert marked.model_copy(update={"answer_delivered_at": None}) == first  # nothing else
    assert ids(await store.list_questions(office.id, status="answered", undelivered=True)) == [
        second.id,
        other.id,
    ]
    assert ids(
        await store.list_questions(
            office.id, status="answered", session_ids=["s1"], undelivered=True
        )
    ) == [second.id]
    # the full history is still there for whoever asks for it
    assert ids(await store.list_questions(office.id, status="answered")) == [
        first.id,
        second.id,
        other.id,
    ]
    # only an answered question is marked; a pending one stays pending and unmarked
    assert await store.mark_answer_delivered(pending.id) is False
    assert (await store.get_question(pending.id)).answer_delivered_at is None
    cancelled = await store.create_question(
        UserQuestion(office_id=office.id, agent_id="a", session_id="s1", question="gone?")
    )
    await store.cancel_question(cancelled.id, "session ended")
    assert await store.mark_answer_delivered(cancelled.id) is False
    assert await store.mark_answer_delivered("no-such-question") is False


async def test_a_version_5_file_is_upgraded_with_its_answers_undelivered(tmp_path: Path) -> None:
    path = tmp_path / "semo.db"
    async with SqliteStore(path) as store:
        office = await store.create_office(Office(name="o"))
        answered = await _answered(store, office.id, "s", "yes")
    downgrade_to_5(path)
    async with SqliteStore(path) as upgraded:
        [row] = await upgraded.list_questions(office.id, status="answered", undelivered=True)
        assert row == answered
        assert await upgraded.mark_answer_delivered(answered.id) is True
        assert await upgraded.list_questions(office.id, status="answered", undelivered=True) == []
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        conn.close()
