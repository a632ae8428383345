"""The PermissionRequest hook waits for the engine's decision and prints it for Claude Code.

The real shim (a `python -I -S hook_shim.py PermissionRequest` process, as Claude Code runs it)
against a real HookServer: a decision is printed as Claude Code's hook output; the engine
stopping while the request waits, no engine at all, or a server without a decider print
nothing (exit 0), so Claude Code's own dialog asks: never a silent allow. A hook that goes away
while it waits cancels the decision.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from semo.engine.protocol.hooks import HookEvent, HookServer, default_hook_command
from tests.support.temp_dirs import short_temp_dir

PAYLOAD = {
    "hook_event_name": "PermissionRequest",
    "tool_name": "Bash",
    "tool_input": {"command": "touch x", "description": "Make x"},
}
ALLOW = {
    "hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}
}


@pytest.fixture
def short_dir() -> Iterator[Path]:
    with short_temp_dir("semo-hd-") as path:
        yield path


async def shim(env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *default_hook_command(),
        "PermissionRequest",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin", **env},
    )


async def finish(process: asyncio.subprocess.Process) -> tuple[int, str, str]:
    out, err = await asyncio.wait_for(process.communicate(json.dumps(PAYLOAD).encode()), 20)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_the_decision_is_printed_for_claude_code(short_dir: Path) -> None:
    asked: list[HookEvent] = []
    came = asyncio.Event()
    answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

    async def decide(event: HookEvent) -> dict[str, Any] | None:
        asked.append(event)
        came.set()
        return await answer

    async with HookServer(runtime_dir=short_dir, on_event=lambda _e: None) as server:
        server.decide = decide
        server.register_session("s1")
        process = await shim(server.env_for("s1"))
        waiting = asyncio.ensure_future(finish(process))
        await asyncio.wait_for(came.wait(), 20)
        assert asked[0].payload["tool_input"]["command"] == "touch x"
        await asyncio.sleep(2.5)  # past the shim's 2 s for an acknowledgement: it still waits
        assert not waiting.done()
        answer.set_result(ALLOW)
        code, out, _err = await waiting
    assert code == 0 and json.loads(out) == ALLOW


async def test_no_decision_prints_nothing(short_dir: Path) -> None:
    decided: list[str] = []

    async def never(_event: HookEvent) -> dict[str, Any] | None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            decided.append("cancelled")
            raise
        return None

    # the engine stops while the request waits
    server = HookServer(runtime_dir=short_dir, on_event=lambda _e: None)
    await server.start()
    server.decide = never
    server.register_session("s1")
    env = server.env_for("s1")
    waiting = asyncio.ensure_future(finish(await shim(env)))
    await asyncio.sleep(1.0)
    await server.close()
    code, out, _err = await waiting
    assert (code, out) == (0, "") and decided == ["cancelled"]
    # no engine at all
    code, out, err = await finish(await shim(env))
    assert (code, out) == (0, "") and "not reachable" in err
    # an engine that does not decide permission requests answers at once
    async with HookServer(runtime_dir=short_dir / "b", on_event=lambda _e: None) as plain:
        plain.register_session("s1")
        code, out, _err = await finish(await shim(plain.env_for("s1")))
    assert (code, out) == (0, "")


async def test_a_hook_that_goes_away_cancels_the_decision(short_dir: Path) -> None:
    cancelled = asyncio.Event()

    async def slow(_event: HookEvent) -> dict[str, Any] | None:
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()
        return None

    async with HookServer(runtime_dir=short_dir, on_event=lambda _e: None) as server:
        server.decide = slow
        server.register_session("s1")
        process = await shim(server.env_for("s1"))
        assert process.stdin is not None
        process.stdin.write(json.dumps(PAYLOAD).encode())
        process.stdin.close()
        await asyncio.sleep(1.0)
        process.kill()  # Claude Code's hook timeout, or the person answered in the pane
        await process.wait()
        await asyncio.wait_for(cancelled.wait(), 10)
