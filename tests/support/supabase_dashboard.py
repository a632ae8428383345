"""A Supabase office on the emulator for tests that drive it as a dashboard would (node, semo)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from semo.engine.store.migrate import migrate
from tests.store.conftest import ADMIN_DSN, admin_connection_check
from tests.support.semo_process import engine_in, run_semo, semo_env
from tests.support.supabase_emulator import SupabaseEmulator, temporary_database

REPO = Path(__file__).resolve().parents[2]


JS = REPO / "tests" / "js"


TIMEOUT = 60.0


def node_command() -> list[str]:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed (scripts/test installs nodejs)")
    if not (JS / "node_modules" / "@supabase" / "supabase-js").is_dir():
        pytest.fail("@supabase/supabase-js is missing: run scripts/test (or npm ci in tests/js)")
    return [node]


@contextlib.asynccontextmanager
async def office() -> AsyncIterator[tuple[SupabaseEmulator, str]]:
    await admin_connection_check()
    with contextlib.ExitStack() as stack:
        dsn = await asyncio.to_thread(stack.enter_context, temporary_database(ADMIN_DSN))
        await migrate(dsn)
        async with SupabaseEmulator(dsn) as emulator:
            yield emulator, dsn


def env_for(emulator: SupabaseEmulator) -> dict[str, str]:
    return semo_env(SUPABASE_SERVICE_ROLE_KEY=emulator.service_role_key)


async def semo(
    folder: Path, emulator: SupabaseEmulator, *args: str
) -> subprocess.CompletedProcess[str]:
    return await run_semo(*args, cwd=folder, env=env_for(emulator), timeout=TIMEOUT)


@contextlib.asynccontextmanager
async def engine(folder: Path, emulator: SupabaseEmulator) -> AsyncIterator[None]:
    async with engine_in(folder, env_for(emulator), grace=TIMEOUT):
        yield


async def run_js(script: str, variable: str, config: dict[str, Any]) -> dict[str, Any]:
    """Run tests/js/SCRIPT under node with `config` as JSON in the environment variable
    `variable`; its answer is the last stdout line that is a JSON object, and says ok."""
    result = await asyncio.to_thread(
        subprocess.run,
        [*node_command(), str(JS / script)],
        capture_output=True,
        text=True,
        cwd=JS,
        env={**os.environ, variable: json.dumps(config)},
        timeout=180,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no answer from {script}: {result.stdout[-2000:]} {result.stderr[-2000:]}"
    answer: dict[str, Any] = json.loads(lines[-1])
    assert answer.get("ok"), answer.get("error")
    return answer
