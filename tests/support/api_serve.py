"""`semo api` / `semo engine --http` run as processes for tests: start, stop, wait for a session."""

from __future__ import annotations

import asyncio
import contextlib
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
