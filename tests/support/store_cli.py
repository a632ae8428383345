"""The store commands of `semo` run as a process against a test store."""

from __future__ import annotations

import subprocess

from tests.store.conftest import Stores
from tests.support.semo_process import run_semo, semo_env


def env_for(stores: Stores) -> dict[str, str]:
    env = semo_env()
    if stores.backend == "sqlite":
        return env | {"SEMO_STORE": "sqlite", "SEMO_SQLITE_PATH": stores.target}
    if stores.backend == "supabase":
        assert stores.emulator is not None
        return env | {
            "SEMO_STORE": "supabase",
            "SUPABASE_URL": stores.emulator.url,
            "SUPABASE_SERVICE_ROLE_KEY": stores.emulator.service_role_key,
            # `semo migrate` speaks SQL to the project's database (PostgREST cannot run DDL)
            "SEMO_DATABASE_URL": stores.dsn,
        }
    return env | {"SEMO_STORE": "postgres", "SEMO_DATABASE_URL": stores.target}


async def semo(stores: Stores, *args: str) -> subprocess.CompletedProcess[str]:
    return await run_semo(*args, env=env_for(stores))
