"""Property-based fuzzing of the API's OpenAPI document with schemathesis: no 5xx, responses as
documented.

Two runs against a live server and a real engine (a harmless raw-mode echo agent as a generic
agent, so fuzzed prompts are only ever bytes to it, never commands to a shell):

- **open**: the document as served; every parameter as generated (offices, sessions...).
- **pinned**: the same document with the path ids narrowed to a live office, a live session
  (and one to delete), a pending question and a real command, next to unknown ids, so generated
  bodies and queries reach the engine (prompts typed, sessions created from the pool and
  ended, output read, questions answered, with any `timeout`: one that runs out first is the
  documented 202).

Deterministic (`derandomize`) with few examples per operation; all of schemathesis's checks
run (server errors, status codes, content types, response schemas, headers, auth, schema-valid
requests accepted and schema-invalid ones rejected), none excluded: the schema is the API's
validation (an answer that does not fit its question's options is a 409, not a 422).
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from semo.engine.store.models import Job, UserQuestion
from tests.api.conftest import TOKEN, Live, wait_ready

EXAMPLES = 15
FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(scope="module")
def fuzz_live(live_factory: Any) -> Live:
    return live_factory(["ECHO"], ["ECHO"])


@pytest.fixture(scope="module")
def document(fuzz_live: Live) -> dict[str, Any]:
    response = httpx.get(f"{fuzz_live.url}/openapi.json", timeout=10)
    response.raise_for_status()
    return response.json()


def with_token(schema: Any) -> Any:
    """The schema, authenticating every request with the live office's token (schemathesis
    leaves it out itself where a check needs a request without one)."""

    @schema.auth(refresh_interval=None)
    class Token:
        def get(self, case: Any, ctx: Any) -> str:
            return TOKEN

        def set(self, case: Any, data: str, ctx: Any) -> None:
            case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}

    return schema


@pytest.fixture(scope="module")
def open_schema(document: dict[str, Any]) -> Any:
    return with_token(schemathesis.openapi.from_dict(document))


@pytest.fixture(scope="module")
def pinned_schema(fuzz_live: Live, document: dict[str, Any]) -> Any:
    ids = asyncio.run(_live_ids(fuzz_live))
    doc = copy.deepcopy(document)
    for operations in doc["paths"].values():
        for method, operation in operations.items():
            for param in operation.get("parameters", []):
                if param["in"] != "path":
                    continue
                key = param["name"]
                if key == "session_id" and method == "delete":
                    key = "victim_id"
                param["schema"] = {"type": "string", "enum": ids[key]}
    create = doc["components"]["schemas"]["CreateSession"]["properties"]
    create["role"] = {"anyOf": [{"type": "string", "enum": ["ECHO"]}, {"type": "null"}]}
    agent = [ids["agent_id"]]
    create["agent_id"] = {"anyOf": [{"type": "string", "enum": agent}, {"type": "null"}]}
    # a job for a real role would run on the live engine for the rest of the run and hold its
    # sessions: jobs are created for a role nobody has (404; the API's job tests run real ones)
    job = doc["components"]["schemas"]["JobRequest"]["properties"]
    job["role"] = {"type": "string", "enum": ["NOBODY"]}
    return with_token(schemathesis.openapi.from_dict(doc))


async def _live_ids(live: Live) -> dict[str, list[str]]:
    echo = await wait_ready(live, "ECHO")
    store = live.engine.store
    agent = live.engine.agents["ECHO"]

    async def prepare() -> dict[str, str]:
        assert live.engine.pool is not None
        warm = await live.engine.pool.acquire(role="ECHO")  # the warm one (echo)...
        victim = await live.engine.pool.acquire(role="ECHO")  # ...so this one is a cold one
        live.engine.pool.release(warm.session_id)
        assert warm.session_id == echo != victim.session_id
        question = UserQuestion(
            office_id=live.office_id,
            agent_id=agent.id,
            session_id=echo,
            question_type="choice",
            question="Which one?",
            options=["left", "right"],
        )
        await store.create_question(question)
        command = await store.insert_command(live.office_id, "get_output", {}, session_id=echo)
        job = await store.create_job(Job(office_id=live.office_id, agent_id=agent.id, task="x"))
        return {
            "victim": victim.session_id,
            "question": question.id,
            "command": command.id,
            "job": job.id,
        }

    made = await live.run(prepare())
    return {
        "office_id": [live.office_id],
        "session_id": [echo, "no-such-session"],
        "victim_id": [made["victim"], "no-such-session"],
        "question_id": [made["question"], "no-such-question"],
        "command_id": [made["command"], "no-such-command"],
        "job_id": [made["job"], "no-such-job"],
        "agent_id": agent.id,  # type: ignore[dict-item]
    }


open_api = schemathesis.pytest.from_fixture("open_schema")
pinned_api = schemathesis.pytest.from_fixture("pinned_schema")


@open_api.parametrize()
@FUZZ_SETTINGS
def test_fuzz_the_open_document(case: Any, fuzz_live: Live) -> None:
    response = case.call_and_validate(base_url=fuzz_live.url, timeout=60)
    assert response.status_code < 500


@pinned_api.parametrize()
@FUZZ_SETTINGS
def test_fuzz_against_live_sessions(case: Any, fuzz_live: Live) -> None:
    response = case.call_and_validate(base_url=fuzz_live.url, timeout=60)
    assert response.status_code < 500
