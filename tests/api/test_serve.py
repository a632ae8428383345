"""`semo engine --http` and `semo api` as real processes.

The engine serves the API beside itself (bash as a generic agent in a worktree); a second
process, `semo api`, serves the same store alone and its writes are run by that engine. The
token comes from SEMO_API_TOKEN and never shows in a log line; SIGTERM stops both cleanly;
without a token (or with a bad address) nothing starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.support.waiting import eventually
from tests.test_engine_daemon import make_office

TOKEN = "serve-test-token-0123456789abcdef"
LISTENING = re.compile(r"API listening on (http://\S+)")
TIMEOUT = 30.0


@dataclass
class Served:
    process: asyncio.subprocess.Process
    url: str = ""
    lines: list[str] = field(default_factory=list)
    reader: asyncio.Task[None] | None = None

    @property
    def log(self) -> str:
        return "\n".join(self.lines)


def env_with(token: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SEMO_", "SUPABASE_"))}
    if token is not None:
        env["SEMO_API_TOKEN"] = token
    return env


def semo() -> str:
    return str(Path(sys.executable).with_name("semo"))


@asynccontextmanager
async def serving(config: Path, *args: str, token: str | None = TOKEN) -> AsyncIterator[Served]:
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
    served = Served(process)
    found: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def read() -> None:
        assert process.stderr is not None
        async for raw in process.stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            served.lines.append(line)
            if (match := LISTENING.search(line)) and not found.done():
                found.set_result(match.group(1))
        if not found.done():
            found.set_exception(AssertionError("exited before listening:\n" + served.log))

    served.reader = asyncio.create_task(read())
    try:
        served.url = await asyncio.wait_for(found, TIMEOUT)
        yield served
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        with contextlib.suppress(Exception):
            await served.reader


async def stop(served: Served) -> int:
    served.process.send_signal(signal.SIGTERM)
    async with asyncio.timeout(TIMEOUT):
        code = await served.process.wait()
        assert served.reader is not None
        await served.reader
    return code


async def ready_session(client: httpx.AsyncClient, url: str) -> str:

    async def ready() -> list[str]:
        listed = await client.get(f"{url}/api/offices/daemon-test/sessions")
        assert listed.status_code == 200, listed.text
        return [s["session_id"] for s in listed.json() if s["status"] == "ready"]

    sessions: list[str] = await eventually(ready, TIMEOUT, what="a ready session", interval=0.1)
    return sessions[0]


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
