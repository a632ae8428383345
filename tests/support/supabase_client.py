"""The unmodified `supabase` async client on the emulator, closed cleanly after a test."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from supabase import AsyncClient, AsyncClientOptions, acreate_client

from tests.support.supabase_emulator import SupabaseEmulator


@contextlib.asynccontextmanager
async def supabase(
    emu: SupabaseEmulator, key: str | None = None, **realtime: Any
) -> AsyncIterator[AsyncClient]:
    options = AsyncClientOptions(realtime=realtime or None)  # type: ignore[arg-type]
    client = await acreate_client(emu.url, key or emu.service_role_key, options)
    try:
        yield client
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.remove_all_channels(), 5)
        with contextlib.suppress(Exception):
            await client.realtime.close()
        with contextlib.suppress(Exception):
            await client.postgrest.aclose()
