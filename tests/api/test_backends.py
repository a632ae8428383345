"""The API on the other store backends: a real engine and the API on a fresh Postgres database,
and on Supabase through the emulator (PostgREST rows, Realtime wake-ups), with the unmodified
`supabase` client on both sides. The full endpoint suite runs on SQLite (test_endpoints.py);
here one flow per backend: read sessions, prompt and wait, read output, answer a question,
another office's token, and 202 (a `timeout` that ran out first) then polling.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from semo.engine.store.models import UserQuestion
from tests.api.conftest import OTHER_TOKEN, Live, auth, wait_ready

TIMEOUT = 40.0


@pytest.fixture(scope="module", params=["postgres", "supabase"])
def live(request: pytest.FixtureRequest, live_factory: Any) -> Live:
    return live_factory(["SH"], ["SH"], backend=request.param)


async def test_the_api_on_this_backend(live: Live) -> None:
    sh = await wait_ready(live, "SH")
    backend = live.engine.store.backend
    async with httpx.AsyncClient(headers=live.headers, timeout=TIMEOUT) as client:
        health = (await client.get(f"{live.url}/api/health")).json()
        assert health == {"status": "ok", "store": backend}
        listed = (await client.get(f"{live.base()}/sessions")).json()
        assert [s["role"] for s in listed if s["session_id"] == sh] == ["SH"]

        url = f"{live.base()}/sessions/{sh}"
        sent = await client.post(
            f"{url}/prompt", json={"prompt": "echo on-$((40+2))", "wait": True, "timeout": 10}
        )
        assert sent.status_code == 200, sent.text
        assert "on-42" in sent.json()["result"]["text"]
        output = await client.get(f"{url}/output", params={"lines": 20})
        assert output.status_code == 200 and "on-42" in output.json()["lines"]

        question = UserQuestion(
            office_id=live.office_id,
            agent_id=live.engine.agents["SH"].id,
            session_id=sh,
            question_type="choice",
            question="Which store?",
            options=["postgres", "sqlite"],
        )
        await live.run(live.engine.store.create_question(question))
        answer = f"{live.base()}/questions/{question.id}/answer"
        bad = await client.post(answer, json={"text": "perhaps"})
        assert bad.status_code == 409 and bad.json()["error"]["code"] == "invalid_answer"
        # a shell does not read prompts: it is typed the option's number only (a confirm's
        # "yes" would start yes(1) and keep the shell busy for good)
        good = await client.post(answer, json={"option": 2})
        assert good.status_code == 200 and good.json()["answer"] == "sqlite"

        slow = await client.post(
            f"{url}/prompt",
            params={"timeout": 0.3},
            json={"prompt": "sleep 1; echo late", "wait": True, "timeout": 10},
        )
        assert slow.status_code == 202, slow.text
        command_id = slow.json()["command_id"]
        for _ in range(200):
            polled = (await client.get(f"{live.base()}/commands/{command_id}")).json()
            if polled["result"] is not None:
                break
            await asyncio.sleep(0.05)
        assert polled["result"]["success"] and "late" in polled["result"]["result"]["text"]

    async with httpx.AsyncClient(headers=auth(OTHER_TOKEN), timeout=TIMEOUT) as other:
        denied = await other.get(f"{live.base()}/sessions")
        assert denied.status_code == 403
        hidden = await other.get(f"{live.base('other')}/sessions/{sh}")
        assert hidden.status_code == 404
        assert (await other.get(f"{live.base('other')}/sessions?all=true")).json() == []
