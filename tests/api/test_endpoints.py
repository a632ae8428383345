"""The Sessions REST API against a running server and a real engine (bash as a generic agent).

Every endpoint's success and its failures: no or a bad token (401), another office's token
(403), an unknown office, session, question or command (404), bad JSON (400), a body that does
not validate (422), a body that is not JSON (415) or too large (413), an ended session and a
command the engine failed (409), and no result in time (504, then polling the command).
Every error has the same JSON shape.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from semo.engine.store.models import AgentSession, UserQuestion
from tests.api.conftest import (
    GHOST_TOKEN,
    OFFICE,
    OTHER_TOKEN,
    TOKEN,
    Live,
    auth,
    wait_ready,
)
from tests.support.waiting import eventually

HTTP_TIMEOUT = 40.0


@pytest.fixture(scope="module")
def live(live_factory: Any) -> Live:
    return live_factory(["SH", "ECHO"], ["SH"], max_body_bytes=64 * 1024)


@pytest.fixture
async def client(live: Live) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(headers=live.headers, timeout=HTTP_TIMEOUT) as client:
        yield client


@pytest.fixture
async def sh(live: Live) -> str:
    """The warm bash session's id."""
    return await wait_ready(live, "SH")


def error_of(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The error body, checked: the status, the stable shape and the code."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"status", "code", "message", "command_id", "details"}, error
    assert error["status"] == status and error["code"] == code, error
    assert isinstance(error["message"], str) and error["message"]
    return error


# -- meta ---------------------------------------------------------------------------------------


async def test_health_and_the_openapi_document_need_no_token(live: Live) -> None:
    async with httpx.AsyncClient() as anonymous:
        health = await anonymous.get(f"{live.url}/api/health")
        assert health.status_code == 200 and health.json() == {"status": "ok", "store": "sqlite"}
        schema = (await anonymous.get(f"{live.url}/openapi.json")).json()
    paths = schema["paths"]
    prefix = "/api/offices/{office_id}"
    assert set(paths[f"{prefix}/sessions"]) == {"get", "post"}
    assert set(paths[f"{prefix}/sessions/{{session_id}}"]) == {"get", "delete"}
    for tail in ("prompt", "cancel"):
        assert set(paths[f"{prefix}/sessions/{{session_id}}/{tail}"]) == {"post"}
    assert set(paths[f"{prefix}/sessions/{{session_id}}/output"]) == {"get"}
    assert set(paths[f"{prefix}/questions"]) == {"get"}
    assert set(paths[f"{prefix}/questions/{{question_id}}/answer"]) == {"post"}
    assert set(paths[f"{prefix}/commands/{{command_id}}"]) == {"get"}
    assert schema["components"]["securitySchemes"]["token"]["scheme"] == "bearer"
    prompt = paths[f"{prefix}/sessions/{{session_id}}/prompt"]["post"]
    assert prompt["security"] == [{"token": []}]
    assert {"202", "400", "401", "403", "404", "409", "413", "415", "422", "504"} <= set(
        prompt["responses"]
    )
    error_ref = prompt["responses"]["404"]["content"]["application/json"]["schema"]["$ref"]
    assert error_ref.endswith("/ErrorBody")
    pending = prompt["responses"]["202"]["content"]["application/json"]["schema"]["$ref"]
    assert pending.endswith("/CommandPending")


async def test_unknown_endpoint_and_method_are_json_errors(live: Live, client: Any) -> None:
    error_of(await client.get(f"{live.url}/api/nothing"), 404, "not_found")
    error_of(await client.put(f"{live.base()}/sessions", json={}), 405, "method_not_allowed")


# -- authentication and offices -----------------------------------------------------------------

ENDPOINTS = [
    ("GET", "/sessions"),
    ("POST", "/sessions"),
    ("GET", "/sessions/S"),
    ("DELETE", "/sessions/S"),
    ("POST", "/sessions/S/prompt"),
    ("POST", "/sessions/S/cancel"),
    ("GET", "/sessions/S/output"),
    ("GET", "/questions"),
    ("POST", "/questions/Q/answer"),
    ("GET", "/commands/C"),
]


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
async def test_every_endpoint_needs_a_valid_bearer_token(
    live: Live, sh: str, method: str, path: str
) -> None:
    url = live.base() + path.replace("/S", f"/{sh}")
    body = {"prompt": "echo no"} if method == "POST" else None
    async with httpx.AsyncClient(timeout=HTTP_TIMEOUT) as anonymous:
        for headers in (
            {},
            {"Authorization": TOKEN},  # no scheme
            {"Authorization": f"Basic {TOKEN}"},
            {"Authorization": "Bearer"},
            auth(TOKEN[:-1]),
            auth(TOKEN + "x"),
            auth("x" * len(TOKEN)),
        ):
            response = await anonymous.request(method, url, headers=headers, json=body)
            error = error_of(response, 401, "unauthorized")
            assert response.headers["www-authenticate"].startswith("Bearer")
            assert TOKEN not in error["message"]
    commands = await live.run(live.engine.store.list_commands(live.office_id))
    assert not [c for c in commands if c.payload.get("prompt") == "echo no"]


async def test_a_token_opens_its_own_office_only(live: Live, client: Any, sh: str) -> None:
    # by id and by name
    for office in (live.office_id, OFFICE):
        listed = await client.get(f"{live.base(office)}/sessions")
        assert listed.status_code == 200 and sh in [s["session_id"] for s in listed.json()]
    # another office, by name or id, existing or not: the same 403
    for office in ("other", live.other.id, "no-such-office"):
        error = error_of(await client.get(f"{live.base(office)}/sessions"), 403, "forbidden")
        assert "not for office" in error["message"]
    async with httpx.AsyncClient(headers=auth(OTHER_TOKEN), timeout=HTTP_TIMEOUT) as other:
        for office in (live.office_id, OFFICE):
            error_of(await other.get(f"{live.base(office)}/sessions"), 403, "forbidden")
            error_of(
                await other.post(f"{live.base(office)}/sessions/{sh}/prompt", json={"prompt": "x"}),
                403,
                "forbidden",
            )
        # its own office works, and does not show the first office's rows
        assert (await other.get(f"{live.base('other')}/sessions?all=true")).json() == []
        error_of(await other.get(f"{live.base('other')}/sessions/{sh}"), 404, "not_found")
        sent = await other.post(f"{live.base('other')}/sessions/{sh}/prompt", json={"prompt": "x"})
        error_of(sent, 404, "not_found")
        error_of(await other.get(f"{live.base('other')}/sessions/{sh}/output"), 404, "not_found")
        error_of(await other.delete(f"{live.base('other')}/sessions/{sh}"), 404, "not_found")
    assert await live.run(live.engine.store.list_commands(live.other.id)) == []
    # a token for an office the store does not have
    async with httpx.AsyncClient(headers=auth(GHOST_TOKEN), timeout=HTTP_TIMEOUT) as ghost:
        error = error_of(await ghost.get(f"{live.base('ghost')}/sessions"), 404, "not_found")
        assert "no office 'ghost'" in error["message"]


# -- sessions -----------------------------------------------------------------------------------


async def test_list_and_get_sessions(live: Live, client: Any, sh: str) -> None:
    listed = await client.get(f"{live.base()}/sessions")
    assert listed.status_code == 200
    (row,) = [s for s in listed.json() if s["session_id"] == sh]
    assert row["role"] == "SH" and row["agent_name"] == "SH" and row["status"] == "ready"
    assert row["office_id"] == live.office_id and row["engine_id"] == "api-test-engine"
    one = await client.get(f"{live.base()}/sessions/{sh}")
    assert one.status_code == 200 and one.json()["session_id"] == sh
    assert one.json()["role"] == "SH"
    error = error_of(await client.get(f"{live.base()}/sessions/nope"), 404, "not_found")
    assert "no session 'nope'" in error["message"]
    error_of(await client.get(f"{live.base()}/sessions?all=maybe"), 422, "invalid_request")


async def test_prompt_with_wait_returns_the_turn_and_output_shows_it(
    live: Live, client: Any, sh: str
) -> None:
    sent = await client.post(
        f"{live.base()}/sessions/{sh}/prompt",
        json={"prompt": "echo api-$((6*7))", "wait": True, "timeout": 10},
    )
    assert sent.status_code == 200, sent.text
    body = sent.json()
    assert body["command_type"] == "send_prompt" and body["command_id"]
    assert body["result"]["state"] == "ready" and "api-42" in body["result"]["text"]
    queued = await client.post(f"{live.base()}/sessions/{sh}/prompt", json={"prompt": "echo q-1"})
    assert queued.status_code == 200 and queued.json()["result"]["delivered"] is True

    async def shown() -> list[str]:
        output = await client.get(f"{live.base()}/sessions/{sh}/output", params={"lines": 50})
        assert output.status_code == 200, output.text
        data = output.json()
        assert data["cols"] == 80 and data["rows"] == 24 and len(data["cursor"]) == 2
        assert data["command_id"] and data["state"] in ("ready", "executing")
        return data["lines"]

    for _ in range(50):
        lines = await shown()
        if "q-1" in lines:
            break
        await asyncio.sleep(0.1)
    assert "api-42" in lines and "q-1" in lines
    screen = await client.get(f"{live.base()}/sessions/{sh}/output")
    assert len(screen.json()["lines"]) == 24
    # the command rows are the engine's
    command = await client.get(f"{live.base()}/commands/{body['command_id']}")
    assert command.status_code == 200
    state = command.json()
    assert state["command"]["status"] == "completed" and state["result"]["success"] is True
    assert state["command"]["payload"]["prompt"] == "echo api-$((6*7))"


async def test_prompt_failures(live: Live, client: Any, sh: str) -> None:
    url = f"{live.base()}/sessions/{sh}/prompt"
    json_type = {"Content-Type": "application/json"}
    error = error_of(
        await client.post(url, content=b'{"prompt": ', headers=json_type), 400, "bad_json"
    )
    assert "not valid JSON" in error["message"]
    error = error_of(await client.post(url, json=["echo"]), 422, "invalid_request")
    assert error["details"][0]["loc"] == ["body"]
    error = error_of(await client.post(url, json={"prompt": ""}), 422, "invalid_request")
    assert error["details"][0]["loc"] == ["body", "prompt"]
    error_of(await client.post(url, json={"prompt": "x", "colour": 1}), 422, "invalid_request")
    error_of(await client.post(url, json={"prompt": "x", "timeout": 0}), 422, "invalid_request")
    error_of(await client.post(url), 422, "invalid_request")
    error_of(
        await client.post(url, params={"timeout": -1}, json={"prompt": "x"}), 422, "invalid_request"
    )
    plain = await client.post(
        url, content=b'{"prompt": "x"}', headers={"Content-Type": "text/plain"}
    )
    error_of(plain, 415, "unsupported_media_type")
    huge = await client.post(url, json={"prompt": "x" * 70_000})
    error_of(huge, 413, "payload_too_large")

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"prompt": "'
        for _ in range(10):
            yield b"y" * 10_000
        yield b'"}'

    streamed = await client.post(url, content=chunks(), headers=json_type)
    error_of(streamed, 413, "payload_too_large")
    error = error_of(
        await client.post(f"{live.base()}/sessions/nope/prompt", json={"prompt": "x"}),
        404,
        "not_found",
    )
    assert "no session 'nope'" in error["message"]
    commands = await live.run(live.engine.store.list_commands(live.office_id))
    assert not [c for c in commands if c.session_id == "nope"]  # nothing was inserted


async def test_a_timeout_that_runs_out_first_is_202_with_the_command_to_poll(
    live: Live, client: Any, sh: str
) -> None:
    slow = await client.post(
        f"{live.base()}/sessions/{sh}/prompt",
        params={"timeout": 0.5},
        json={"prompt": "sleep 1.5; echo slept", "wait": True, "timeout": 10},
    )
    assert slow.status_code == 202, slow.text
    pending = slow.json()
    command_id = pending["command_id"]
    assert pending["status"] in ("pending", "processing")
    assert pending["poll"] == f"/api/offices/{live.office_id}/commands/{command_id}"
    assert pending["poll"] in pending["message"]

    async def poll() -> dict[str, Any]:
        polled: dict[str, Any] = (await client.get(f"{live.url}{pending['poll']}")).json()
        assert polled["result"] is not None or polled["command"]["status"] in (
            "pending",
            "processing",
        )
        return polled

    # generous: CI machines are shared
    polled = await eventually(
        poll, 30, what="the command's result", until=lambda p: p["result"] is not None
    )
    assert polled["command"]["status"] == "completed"
    assert polled["result"]["success"] is True and "slept" in polled["result"]["result"]["text"]
    error_of(await client.get(f"{live.base()}/commands/nope"), 404, "not_found")


async def test_a_command_the_engine_fails_is_409_with_its_id(live: Live, client: Any) -> None:
    sh_agent = live.engine.agents["SH"]
    stray = AgentSession(office_id=live.office_id, agent_id=sh_agent.id, status="ready")
    await live.run(live.engine.store.upsert_session(stray))  # a row no engine runs
    sent = await client.post(
        f"{live.base()}/sessions/{stray.session_id}/prompt", json={"prompt": "echo x"}
    )
    error = error_of(sent, 409, "command_failed")
    assert "no session" in error["message"] and "on this engine" in error["message"]
    polled = (await client.get(f"{live.base()}/commands/{error['command_id']}")).json()
    assert polled["command"]["status"] == "failed" and polled["result"]["success"] is False


async def test_cancel_interrupts_a_running_turn(live: Live, client: Any, sh: str) -> None:
    url = f"{live.base()}/sessions/{sh}"
    started = await client.post(f"{url}/prompt", json={"prompt": "sleep 30"})
    assert started.status_code == 200, started.text
    cancelled = await client.post(f"{url}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["command_type"] == "cancel"
    assert cancelled.json()["result"] == {"cancelled": True}
    after = await client.post(
        f"{url}/prompt", json={"prompt": "echo after-cancel", "wait": True, "timeout": 10}
    )
    assert after.status_code == 200 and "after-cancel" in after.json()["result"]["text"]
    error_of(await client.post(f"{live.base()}/sessions/nope/cancel"), 404, "not_found")


async def test_create_and_delete_a_session(live: Live, client: Any) -> None:
    created = await client.post(f"{live.base()}/sessions", json={"role": "ECHO"})
    assert created.status_code == 201, created.text
    session = created.json()["session"]
    assert created.json()["command_id"]
    assert session["role"] == "ECHO" and session["status"] in ("ready", "creating")
    session_id = session["session_id"]
    assert any(s.session_id == session_id for s in await live.run(_sessions(live)))

    by_agent = await client.post(
        f"{live.base()}/sessions", json={"agent_id": live.engine.agents["ECHO"].id}
    )
    assert by_agent.status_code == 201 and by_agent.json()["session"]["role"] == "ECHO"

    deleted = await client.delete(f"{live.base()}/sessions/{session_id}")
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["result"] == {"terminated": True}
    # deleted: gone as a resource, kept in the listing of every session
    error = error_of(await client.get(f"{live.base()}/sessions/{session_id}"), 409, "session_ended")
    assert "GET .../sessions?all=true" in error["message"]
    assert session_id not in [
        s["session_id"] for s in (await client.get(f"{live.base()}/sessions")).json()
    ]
    every = (await client.get(f"{live.base()}/sessions", params={"all": "true"})).json()
    [row] = [s for s in every if s["session_id"] == session_id]
    assert row["status"] == "terminated" and row["end_reason"]
    # an ended session
    for method, tail, body in (
        ("DELETE", "", None),
        ("POST", "/prompt", {"prompt": "x"}),
        ("POST", "/cancel", None),
        ("GET", "/output", None),
    ):
        response = await client.request(
            method, f"{live.base()}/sessions/{session_id}{tail}", json=body
        )
        error_of(response, 409, "session_ended")
    error_of(await client.delete(f"{live.base()}/sessions/nope"), 404, "not_found")
    await client.delete(f"{live.base()}/sessions/{by_agent.json()['session']['session_id']}")


async def test_create_session_failures(live: Live, client: Any) -> None:
    url = f"{live.base()}/sessions"
    error = error_of(await client.post(url, json={"role": "XX"}), 404, "not_found")
    assert "no agent with role 'XX'" in error["message"] and "SH" in error["message"]
    error_of(await client.post(url, json={"agent_id": "nope"}), 404, "not_found")
    error = error_of(await client.post(url, json={"role": ""}), 422, "invalid_request")
    assert error["details"][0]["loc"] == ["body", "role"]  # not a role: the schema says so
    error = error_of(await client.post(url, json={}), 422, "invalid_request")
    assert "agent_id or role" in error["message"]
    error_of(await client.post(url, json={"role": "SH", "x": 1}), 422, "invalid_request")
    error_of(
        await client.post(url, content=b"{", headers={"Content-Type": "application/json"}),
        400,
        "bad_json",
    )


async def _sessions(live: Live) -> list[Any]:
    return list(live.engine.sessions())


# -- questions ----------------------------------------------------------------------------------


async def test_questions_list_and_answer(live: Live, client: Any, sh: str) -> None:
    agent = live.engine.agents["SH"]
    question = UserQuestion(
        office_id=live.office_id,
        agent_id=agent.id,
        session_id=sh,
        question_type="choice",
        question="Which database?",
        options=["postgres", "sqlite"],
    )
    await live.run(live.engine.store.create_question(question))
    pending = (await client.get(f"{live.base()}/questions")).json()
    assert [q["id"] for q in pending if q["id"] == question.id] == [question.id]
    url = f"{live.base()}/questions/{question.id}/answer"
    error = error_of(await client.post(url, json={"option": 3}), 409, "invalid_answer")
    assert "1..2" in error["message"]
    error_of(await client.post(url, json={"text": "mysql"}), 409, "invalid_answer")
    error_of(await client.post(url, json={}), 422, "invalid_request")
    error_of(await client.post(url, json={"text": "x", "option": 1}), 422, "invalid_request")
    answered = await client.post(url, json={"option": 2})
    assert answered.status_code == 200, answered.text
    assert answered.json()["status"] == "answered" and answered.json()["answer"] == "sqlite"
    error = error_of(await client.post(url, json={"option": 1}), 409, "conflict")
    assert "already answered" in error["message"]
    assert question.id not in [
        q["id"] for q in (await client.get(f"{live.base()}/questions")).json()
    ]
    done = (await client.get(f"{live.base()}/questions", params={"status": "answered"})).json()
    assert question.id in [q["id"] for q in done]
    every = (await client.get(f"{live.base()}/questions", params={"status": "all"})).json()
    assert question.id in [q["id"] for q in every]
    error_of(await client.get(f"{live.base()}/questions?status=odd"), 422, "invalid_request")
    error_of(
        await client.post(f"{live.base()}/questions/nope/answer", json={"text": "x"}),
        404,
        "not_found",
    )
    async with httpx.AsyncClient(headers=auth(OTHER_TOKEN), timeout=HTTP_TIMEOUT) as other:
        error_of(
            await other.post(
                f"{live.base('other')}/questions/{question.id}/answer", json={"text": "x"}
            ),
            404,
            "not_found",
        )
        assert (await other.get(f"{live.base('other')}/questions?status=all")).json() == []


async def test_a_question_with_any_number_of_options_is_answered_by_number(
    live: Live, client: Any, sh: str
) -> None:
    options = [f"option {n}" for n in range(1, 1501)]
    question = UserQuestion(
        office_id=live.office_id,
        agent_id=live.engine.agents["SH"].id,
        session_id=sh,
        question_type="choice",
        question="Which one of many?",
        options=options,
    )
    await live.run(live.engine.store.create_question(question))
    url = f"{live.base()}/questions/{question.id}/answer"
    error = error_of(await client.post(url, json={"option": 1501}), 409, "invalid_answer")
    assert "1..1500" in error["message"]
    error_of(await client.post(url, json={"option": 0}), 422, "invalid_request")
    error_of(await client.post(url, json={"option": 2.5}), 422, "invalid_request")
    # 1500.0 is an integer to JSON Schema, so to the API too
    answered = await client.post(url, json={"option": 1500.0})
    assert answered.status_code == 200, answered.text
    assert answered.json()["answer"] == "option 1500"


@pytest.fixture(scope="module")
def quick(live_factory: Any) -> Live:
    """An office whose API waits 0.5 s at least, for engines that give commands 1 s."""
    return live_factory(["SH"], ["SH"], wait_timeout=0.5, command_timeout=1)


async def test_the_wait_outlasts_the_commands_own_limit(quick: Live) -> None:
    """[api] wait_timeout shorter than a command's limit: the API waits for the engine's
    outcome (here send_prompt's own timeout into a busy agent) instead of a 504 racing it."""
    api = quick.server.app.state.api
    assert (api.default_wait(1), api.default_wait(20)) == (6, 25)
    sh = await wait_ready(quick, "SH")
    url = f"{quick.base()}/sessions/{sh}/prompt"
    async with httpx.AsyncClient(headers=quick.headers, timeout=HTTP_TIMEOUT) as client:
        busy = await client.post(url, json={"prompt": "sleep 4"})
        assert busy.status_code == 200, busy.text
        # not typed while the agent is busy: the engine gives up after 1.5 s, after the
        # API's 0.5 s, and that outcome is the answer
        late = await client.post(url, json={"prompt": "echo never", "timeout": 1.5})
        error = error_of(late, 409, "command_failed")
        assert "timed out" in error["message"]


async def test_no_engine_answering_is_504_after_the_commands_own_limit(quick: Live) -> None:
    """A live session of another engine (alive, so this one does not claim its commands) and
    that engine never answers: 504 once the command's own limit + 5 s have passed."""
    store = quick.engine.store
    await quick.run(store.record_heartbeat(quick.office_id, "elsewhere", dead_after=600))
    theirs = AgentSession(
        office_id=quick.office_id,
        agent_id=quick.engine.agents["SH"].id,
        status="ready",
        engine_id="elsewhere",
    )
    await quick.run(store.upsert_session(theirs))
    async with httpx.AsyncClient(headers=quick.headers, timeout=HTTP_TIMEOUT) as client:
        sent = await client.post(
            f"{quick.base()}/sessions/{theirs.session_id}/prompt",
            json={"prompt": "echo x", "timeout": 0.5},
        )
        error = error_of(sent, 504, "timeout")
        assert "no engine answered within 5.5 s" in error["message"]
        polled = await client.get(f"{quick.base()}/commands/{error['command_id']}")
        assert polled.json()["command"]["status"] == "pending"  # it keeps its place
