"""`semo supabase doctor`: every check against the configured Supabase project, one line each.

Reads with the engine's access (the service role): the catalog through `semo_doctor_facts()`
(migration 0018), "Max rows" through `semo_rows(n)`, the office's size through the store; with
`--member EMAIL` (password in SEMO_DOCTOR_PASSWORD, the anon key in SUPABASE_ANON_KEY) it signs
the member in and tries the office's private channel and another office's."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from semo.engine.doctor import checks
from semo.engine.doctor.budget import realtime_budget
from semo.engine.doctor.channel import private_channel
from semo.engine.doctor.checks import Check
from semo.engine.store.base import StoreError
from semo.engine.store.supabase import SupabaseStore

#: rows asked of `semo_rows` to measure "Max rows" (a cap at or above it reads as "at least")
MAX_ROWS_PROBE = 10_001


@dataclass(frozen=True)
class Options:
    office: str | None
    member: str | None
    messages_per_second: int
    timeout: float = 10.0


async def max_rows(store: SupabaseStore) -> Check:
    """The project's "Max rows": how many of MAX_ROWS_PROBE rows one request answers."""
    try:
        rows = await store._run(lambda c: c.rpc("semo_rows", {"p_count": MAX_ROWS_PROBE}))
    except StoreError as error:
        return Check("max rows", False, f"cannot measure it ({error}). Fix: run `semo migrate`")
    count = len(rows or [])
    if count >= MAX_ROWS_PROBE:
        return Check("max rows", True, f"at least {MAX_ROWS_PROBE - 1}; listings read 500 a page")
    if count == 0:
        return Check(
            "max rows", False, "0: every read answers nothing. Fix: raise Max rows (API settings)"
        )
    page = min(count, 500)
    return Check("max rows", True, f"{count}; listings read {page} rows a page")


async def facts(store: SupabaseStore) -> dict[str, Any] | Check:
    try:
        found = await store._run(lambda c: c.rpc("semo_doctor_facts", {}))
    except StoreError as error:
        return Check("catalog", False, f"cannot read it ({error}). Fix: run `semo migrate`")
    if not isinstance(found, dict):
        return Check("catalog", False, f"semo_doctor_facts answered {type(found).__name__}")
    return found


async def budget(store: SupabaseStore, office_id: str, per_second: int) -> Check:
    from semo.engine.store.members import list_members

    sessions = await store.list_sessions(office_id)
    engines = [e for e in await store.list_engines(office_id) if e.alive]
    members = await list_members(store, office_id)
    return realtime_budget(len(sessions), max(len(engines), 1), len(members), per_second)


async def channel(store: SupabaseStore, office_id: str, options: Options) -> Check:
    if not options.member:
        return Check(
            "private channel", None, "give --member EMAIL (and SEMO_DOCTOR_PASSWORD) to try it"
        )
    password = os.environ.get("SEMO_DOCTOR_PASSWORD")
    anon = os.environ.get("SUPABASE_ANON_KEY")
    if not password or not anon:
        return Check(
            "private channel",
            False,
            "--member needs SEMO_DOCTOR_PASSWORD (their password) and SUPABASE_ANON_KEY",
        )
    return await private_channel(
        store.url, anon, office_id, options.member, password, options.timeout
    )


async def doctor(store: SupabaseStore, options: Options) -> list[Check]:
    """Every check, in report order."""
    from semo.engine.office.operations import resolve_office

    found = await facts(store)
    report = [found] if isinstance(found, Check) else checks.catalog(found)
    office = await resolve_office(store, options.office)
    report.append(await channel(store, office.id, options))
    report.append(await max_rows(store))
    report.append(await budget(store, office.id, options.messages_per_second))
    return report
