"""Jobs on the REST API (engine/api/jobs.py) against a live engine and API server
(tests/api/conftest.py): create, list, follow the timeline, cancel; bad requests and other
offices' jobs."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from semo.engine.config import AgentConfig
from tests.api import conftest as api_conftest
from tests.api.conftest import OTHER_TOKEN, Live, auth, wait_ready
from tests.support.waiting import eventually

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 30.0


@pytest.fixture(scope="module")
def scripts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("job-api")
    script = [{"match": "Say done", "text": "[SEMO:DONE] said it"}]
    (folder / "fe.json").write_text(json.dumps(script))
    command = [sys.executable, "-m", "tests.support.script_agent"]
    command += ["--script", str(folder / "fe.json"), "--log", str(folder / "fe.log")]
    api_conftest.AGENTS["FE"] = AgentConfig(
        role="FE", profile="generic", command=command, env={"PYTHONPATH": str(REPO)}
    )
    try:
        yield folder
    finally:
        del api_conftest.AGENTS["FE"]


@pytest.fixture(scope="module")
def live(live_factory: Any, scripts: Path) -> Live:
    return live_factory(["FE", "ECHO"], ["FE", "ECHO"])


async def until(client: httpx.AsyncClient, url: str, done: Any) -> dict[str, Any]:
    """The JSON body of GET `url`, once `done(body)` holds."""

    async def body() -> dict[str, Any]:
        return (await client.get(url)).json()

    found: dict[str, Any] = await eventually(
        body, TIMEOUT, what=f"GET {url}", until=done, interval=0.1
    )
    return found


async def test_a_job_created_on_the_api_runs_to_its_end(live: Live) -> None:
    await wait_ready(live, "FE")
    async with httpx.AsyncClient(headers=live.headers, timeout=TIMEOUT) as client:
        created = await client.post(
            f"{live.base()}/jobs", json={"role": "FE", "task": "Say done", "context": {"n": 1}}
        )
        assert created.status_code == 201, created.text
        body = created.json()
        job_id = body["job"]["id"]
        assert (body["job"]["status"], body["job"]["role"]) == ("pending", "FE")
        command = (await client.get(f"{live.base()}/commands/{body['command_id']}")).json()
        assert command["command"]["command_type"] == "run_job"
        assert command["command"]["payload"] == {"job_id": job_id}

        timeline = await until(
            client, f"{live.base()}/jobs/{job_id}", lambda b: b["job"]["status"] == "done"
        )
        steps = [e["step"] for e in timeline["entries"]]
        assert steps == ["created", "started", "session", "delivered", "done"]
        assert timeline["entries"][-1]["detail"] == "said it"
        assert timeline["job"]["context"] == {"n": 1}

        assert (await client.get(f"{live.base()}/jobs")).json() == []
        listed = (await client.get(f"{live.base()}/jobs", params={"all": "true"})).json()
        assert job_id in [j["id"] for j in listed]
        again = await client.post(f"{live.base()}/jobs/{job_id}/cancel", json={"reason": "late"})
        assert again.status_code == 409
        assert "has ended (done)" in again.json()["error"]["message"]


async def test_a_running_job_is_cancelled_on_the_api(live: Live) -> None:
    await wait_ready(live, "ECHO")
    async with httpx.AsyncClient(headers=live.headers, timeout=TIMEOUT) as client:
        created = await client.post(f"{live.base()}/jobs", json={"role": "ECHO", "task": "never"})
        job_id = created.json()["job"]["id"]
        await until(
            client,
            f"{live.base()}/jobs/{job_id}",
            lambda b: "delivered" in [e["step"] for e in b["entries"]],
        )
        cancelled = await client.post(f"{live.base()}/jobs/{job_id}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["cancel_reason"] == "cancelled by an operator (API)"
        timeline = await until(
            client, f"{live.base()}/jobs/{job_id}", lambda b: b["job"]["status"] == "failed"
        )
        assert timeline["job"]["failure_reason"] == "cancelled: cancelled by an operator (API)"
        assert [e["step"] for e in timeline["entries"]][-3:] == [
            "cancel_requested",
            "cancelling",
            "failed",
        ]


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"role": "NOBODY", "task": "x"}, 404, "no agent with role 'NOBODY'"),
        ({"role": "FE", "task": ""}, 422, "task"),
        ({"role": "FE", "task": "x", "context": [1]}, 422, "context"),
        ({"role": "FE", "task": "x", "extra": 1}, 422, "extra"),
    ],
)
async def test_bad_job_requests(live: Live, body: Any, status: int, message: str) -> None:
    async with httpx.AsyncClient(headers=live.headers, timeout=TIMEOUT) as client:
        response = await client.post(f"{live.base()}/jobs", json=body)
        assert response.status_code == status, response.text
        assert message in json.dumps(response.json())
        assert (await client.get(f"{live.base()}/jobs/no-such-job")).status_code == 404
        assert (await client.post(f"{live.base()}/jobs/no-such-job/cancel")).status_code == 404


async def test_another_offices_jobs_are_not_shown(live: Live) -> None:
    async with httpx.AsyncClient(headers=live.headers, timeout=TIMEOUT) as client:
        created = await client.post(f"{live.base()}/jobs", json={"role": "FE", "task": "Say done"})
        job_id = created.json()["job"]["id"]
    other = live.base(live.other.id)
    async with httpx.AsyncClient(headers=auth(OTHER_TOKEN), timeout=TIMEOUT) as client:
        assert (await client.get(f"{other}/jobs/{job_id}")).status_code == 404
        assert (await client.post(f"{other}/jobs/{job_id}/cancel")).status_code == 404
        assert (await client.get(f"{other}/jobs", params={"all": "true"})).json() == []
    async with httpx.AsyncClient(headers=auth(OTHER_TOKEN), timeout=TIMEOUT) as client:
        mine = await client.get(f"{live.base()}/jobs")
        assert mine.status_code == 403
