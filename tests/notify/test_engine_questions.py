"""A real engine (in process, sqlite, a scripted agent in a PTY) notifies a webhook of a
question that waited past the sink's delay, with the command that answers it, and never of a
question answered before its delay (answered through the store, as `semo answer` does from
another process)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from semo.engine.config import parse_config
from semo.engine.engine import Engine
from semo.engine.notify.sources import probe_notice
from semo.engine.office.operations import answer_question
from semo.engine.store.models import UserQuestion
from tests.support.control_engine import serving_engine
from tests.support.notify_servers import HttpReceiver
from tests.support.office_toml import sqlite_office_toml
from tests.support.waiting import eventually, eventually_value

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(120)


def ask(question: str) -> str:
    body = {"type": "choice", "question": question, "options": ["yes", "no"]}
    return f"[ASK_USER]\n{json.dumps(body)}\n[/ASK_USER]"


async def test_a_question_past_its_delay_is_sent_and_one_answered_in_time_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "fe.json"
    script.write_text(json.dumps([ask("Use postgres?"), ask("Ship it now?"), "thanks"]))
    command = [sys.executable, "-m", "tests.support.script_agent", "--script", str(script)]
    command += ["--log", str(tmp_path / "fe.log")]
    with HttpReceiver() as hook:
        config = parse_config(
            sqlite_office_toml("notes")
            + f"""
[pool]
warm_roles = ["FE"]

[[agents]]
role = "FE"
profile = "generic"
reads_prompts = true
command = {json.dumps(command)}

[[notify]]
sink = "webhook"
url = "{hook.url}/hook"
events = ["question"]
delay = 0.5
""",
            tmp_path / "semo.toml",
        )
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "HOME": str(tmp_path)}
        async with serving_engine(config, tmp_path, monkeypatch, env, "semo-nq-") as engine:
            [session] = engine.sessions()
            engine.send_prompt(session.session_id, "start")
            first = await eventually_value(_pending(engine), "the first question")
            await eventually(lambda: hook.requests, timeout=30)
            [body] = hook.bodies()
            assert body["kind"] == "question" and body["agent"] == "FE"
            assert body["office"] == "notes" and body["needed"] == "Use postgres?"
            assert body["answer"].startswith(f"semo answer {first.id} ")

            await engine.answer(first.id, option=1)  # FE asks again at once
            second = await eventually_value(_pending(engine), "the second question")
            assert second.id != first.id
            await answer_question(engine.store, second.id, option=2)  # within its delay

            await asyncio.sleep(1.0)  # past the second question's delay: its timer has fired
            assert engine.notices is not None
            engine.notices.notify(probe_notice("notes"))  # a marker behind it
            await eventually(lambda: len(hook.requests) == 2, timeout=30)
        assert [b["kind"] for b in hook.bodies()] == ["question", "test"]


def _pending(engine: Engine) -> Callable[[], Awaitable[UserQuestion | None]]:
    """A probe for the engine's first pending question."""

    async def probe() -> UserQuestion | None:
        questions = await engine.pending_questions()
        return questions[0] if questions else None

    return probe
