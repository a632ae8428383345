"""Audit of issue 12, display: agent text in the job commands' output.

A real `semo engine` runs a job for a hostile generic agent (tests/support/hostile_agent.py in a
real PTY); the agent answers the task with a question holding an OSC 52 clipboard write, an
OSC 2 title, an 8-bit CSI, a bidi override and Textual markup. `semo jobs`, `semo job show`
(text and --json) and `semo engines`, run as real processes, print no raw control character:
the text output shows the escapes made visible (`\\x1b]52;...`), the JSON reads back to the
exact question.
"""

from __future__ import annotations

import json
from pathlib import Path

from semo.engine.store.sqlite import SqliteStore
from tests.support.hostile_display import (
    HOSTILE_TEXT,
    TIMEOUT,
    assert_no_control_bytes,
    block,
    engine_process,
    make_office,
    semo,
)
from tests.support.waiting import eventually_value


async def test_job_listings_show_a_hostile_question_as_plain_text(tmp_path: Path) -> None:
    question = f"job {HOSTILE_TEXT}"
    script = [{"match": "build", "text": block({"type": "text", "question": question})}]
    config = make_office(tmp_path, script)
    async with (
        engine_process(config, "text") as engine,
        SqliteStore(tmp_path / "semo.db") as store,
    ):

        async def ready() -> bool | None:
            if engine.returncode is not None:
                raise AssertionError((tmp_path / "engine.log").read_text(errors="replace"))
            offices = [o for o in await store.list_offices() if o.name == "hostile-display"]
            sessions = await store.list_sessions(offices[0].id) if offices else []
            return any(s.status == "ready" for s in sessions) or None

        await eventually_value(ready, "the hostile agent ready", TIMEOUT)
        job_id = (
            (await semo(tmp_path, "job", "create", "--role", "EVIL", "--task", "build it"))
            .decode()
            .strip()
        )

        async def asked() -> str | None:
            offices = [o for o in await store.list_offices() if o.name == "hostile-display"]
            rows = await store.list_questions(offices[0].id) if offices else []
            return rows[0].question if rows else None

        assert await eventually_value(asked, "the hostile question", TIMEOUT) == question

        shown = await semo(tmp_path, "job", "show", job_id)
        assert_no_control_bytes(shown)
        assert "\\x1b]52;c;aGFja2Vk\\x07" in shown.decode()
        as_json = await semo(tmp_path, "job", "show", job_id, "--json")
        assert_no_control_bytes(as_json)
        assert [q["question"] for q in json.loads(as_json)["questions"]] == [question]
        for listing in (("jobs",), ("jobs", "--json"), ("engines",), ("engines", "--json")):
            assert_no_control_bytes(await semo(tmp_path, *listing))
