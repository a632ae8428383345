"""`semo engine --http` and `semo api` as real processes.

The engine serves the API beside itself (bash as a generic agent in a worktree); a second
process, `semo api`, serves the same store alone and its writes are run by that engine. The
token comes from SEMO_API_TOKEN and never shows in a log line; SIGTERM stops both cleanly;
without a token (or with a bad address) nothing starts.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx

from tests.support.api_serve import TIMEOUT, TOKEN, env_with, ready_session, semo, serving, stop
from tests.support.daemon_office import make_office


async def test_engine_http_and_semo_api_serve_the_office(tmp_path: Path) -> None:
    config = make_office(tmp_path)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        serving(config, "engine", "--http", "127.0.0.1:0") as engine,
        httpx.AsyncClient(headers=headers, timeout=TIMEOUT) as client,
    ):
        session = await ready_session(client, engine.url)
        base = f"{engine.url}/api/offices/daemon-test/sessions/{session}"
        sent = await client.post(
            f"{base}/prompt", json={"prompt": "echo via-$((40+2))", "wait": True, "timeout": 10}
        )
        assert sent.status_code == 200 and "via-42" in sent.json()["result"]["text"], sent.text
        anonymous = await client.get(
            f"{engine.url}/api/offices/daemon-test/sessions", headers={"Authorization": ""}
        )
        assert anonymous.status_code == 401

        async with serving(config, "api", "--listen", "127.0.0.1:0") as api:
            assert api.url != engine.url
            other = f"{api.url}/api/offices/daemon-test/sessions/{session}"
            sent = await client.post(
                f"{other}/prompt", json={"prompt": "echo alone-$((6*7))", "wait": True}
            )
            assert sent.status_code == 200 and "alone-42" in sent.json()["result"]["text"]
            output = await client.get(f"{other}/output", params={"lines": 10})
            assert output.status_code == 200 and "alone-42" in output.json()["lines"]
            assert await stop(api) == 0

        assert await stop(engine) == 0
    for served in (engine, api):
        assert TOKEN not in served.log
        records = [json.loads(line) for line in served.log.splitlines() if line.strip()]
        assert any("API stopped" in r["msg"] for r in records)


async def test_nothing_starts_without_a_token_or_with_a_bad_address(tmp_path: Path) -> None:
    config = make_office(tmp_path)
    for args, token, message in (
        (["engine", "--http", "127.0.0.1:0"], None, "the API needs a token"),
        (["api", "--listen", "127.0.0.1:0"], None, "the API needs a token"),
        (["api", "--listen", "127.0.0.1:0"], "short", "at least 16 characters"),
        (["engine", "--http", "nowhere"], TOKEN, "is not HOST:PORT"),
        (["api"], TOKEN, "give --listen HOST:PORT"),
    ):
        process = await asyncio.create_subprocess_exec(
            semo(),
            *args,
            "--config",
            str(config),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env=env_with(token),
            cwd=config.parent,
        )
        async with asyncio.timeout(TIMEOUT):
            _, stderr = await process.communicate()
        assert process.returncode == 2, (args, stderr.decode())
        assert message in stderr.decode(), (args, stderr.decode())
    assert not (tmp_path / "semo.db").exists()  # nothing was started
