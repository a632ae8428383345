"""The REST API refuses an answer, or a prompt, for a session whose engine is gone (real API
app, real SQLite store): 409 with the reason, the question stays pending and no command is
queued. The engine here is a process of this machine that has exited (known at once, without
waiting for its heartbeat row to run out), as after a SIGKILL.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import httpx
from pydantic import SecretStr

from semo.engine.api.app import create_app
from semo.engine.api.settings import ApiSettings
from semo.engine.store.models import Agent, AgentSession, Office, UserQuestion
from semo.engine.store.sqlite import SqliteStore

TOKEN = "dead-engine-token-0123456789abcdef"


def _exited_pid() -> int:
    gone = subprocess.Popen(["true"])
    gone.wait()
    return gone.pid


async def test_answers_and_prompts_to_a_dead_engines_session_are_refused(tmp_path: Path) -> None:
    engine_id = f"{socket.gethostname()}-{_exited_pid()}"
    store = SqliteStore(tmp_path / "semo.db")
    await store.open()
    try:
        office = await store.create_office(Office(name="o"))
        agent = await store.upsert_agent(Agent(office_id=office.id, name="SH", role="SH"))
        session = await store.upsert_session(
            AgentSession(
                office_id=office.id, agent_id=agent.id, status="ready", engine_id=engine_id
            )
        )
        question = await store.create_question(
            UserQuestion(
                office_id=office.id,
                agent_id=agent.id,
                session_id=session.session_id,
                question_type="confirm",
                question="Go on?",
            )
        )
        app = create_app(store, ApiSettings(tokens={"o": SecretStr(TOKEN)}))
        headers = {"Authorization": f"Bearer {TOKEN}"}
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://t", headers=headers
        ) as client:
            base = f"/api/offices/{office.id}"
            answered = await client.post(
                f"{base}/questions/{question.id}/answer", json={"text": "yes"}
            )
            assert answered.status_code == 409, answered.text
            assert "is not running" in answered.text and "not recorded" in answered.text
            prompt = await client.post(
                f"{base}/sessions/{session.session_id}/prompt", json={"prompt": "hi"}
            )
            assert prompt.status_code == 409, prompt.text
            assert "is not running" in prompt.text
        still = await store.get_question(question.id)
        assert still.status == "pending" and still.answer is None
        assert await store.list_commands(office.id) == []
    finally:
        await store.close()
