"""The doctor's catalog checks: `semo_doctor_facts()` (migration 0018) against expected.py.

One Check per subject, each failure saying what is wrong and the SQL that fixes it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from semo.engine.doctor import expected


@dataclass(frozen=True)
class Check:
    """One line of the report: `ok` True (passed), False (failed) or None (not checked)."""

    name: str
    ok: bool | None
    detail: str

    def line(self) -> str:
        mark = {True: "ok", False: "FAIL", None: "skip"}[self.ok]
        return f"{mark:<4} {self.name}: {self.detail}"


def _fail(name: str, problems: list[str], fix: str) -> Check:
    return Check(name, False, f"{'; '.join(problems)}. Fix: {fix}")


def roles(facts: dict[str, Any]) -> Check:
    missing = [r for r in expected.ROLES if r not in facts.get("roles", [])]
    if missing:
        return _fail(
            "roles",
            [f"no role {', '.join(missing)}: this database is not a Supabase project's"],
            "point SUPABASE_URL at a Supabase project",
        )
    return Check("roles", True, "anon, authenticated and service_role exist")


def publication(facts: dict[str, Any]) -> Check:
    pub = facts.get("publication")
    if pub is None:
        return _fail(
            "publication",
            ["no supabase_realtime publication: Realtime sends no row changes"],
            "create publication supabase_realtime; then alter publication supabase_realtime"
            f" add table {', '.join(expected.PUBLISHED)}",
        )
    if pub.get("all_tables"):
        return Check("publication", True, "supabase_realtime publishes every table")
    missing = [t for t in expected.PUBLISHED if t not in pub.get("tables", [])]
    if missing:
        return _fail(
            "publication",
            [
                f"{', '.join(missing)} not in supabase_realtime: Realtime refuses every channel"
                " that binds them (engines fall back to polling, dashboards see no changes)"
            ],
            f"alter publication supabase_realtime add table {', '.join(missing)};",
        )
    return Check("publication", True, f"supabase_realtime has {', '.join(expected.PUBLISHED)}")


def _tables(facts: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    tables = facts.get("tables", {})
    return tables, [t for t in expected.SEMO_TABLES if t not in tables]


def rls(facts: dict[str, Any]) -> Check:
    tables, absent = _tables(facts)
    if absent:
        return _fail("rls", [f"tables missing: {', '.join(absent)}"], "run `semo migrate`")
    off = [t for t in expected.SEMO_TABLES if not tables[t].get("rls")]
    if off:
        return _fail(
            "rls",
            [f"row-level security is off on {', '.join(off)}: every signed-in user reads them"],
            " ".join(f"alter table {t} enable row level security;" for t in off),
        )
    return Check("rls", True, f"on for all {len(expected.SEMO_TABLES)} semo tables")


def policies(facts: dict[str, Any]) -> Check:
    tables, absent = _tables(facts)
    if absent:
        return _fail("policies", [f"tables missing: {', '.join(absent)}"], "run `semo migrate`")
    problems: list[str] = []
    for table, wanted in expected.POLICIES.items():
        have = set(tables[table].get("policies", []))
        problems += [f"{p} missing on {table}" for p in sorted(wanted - have)]
        problems += [
            f"unknown policy {p} on {table} (it may open rows)" for p in sorted(have - wanted)
        ]
    channel = facts.get("realtime_messages")
    if channel is not None:
        names = {p.get("name") for p in channel}
        if expected.CHANNEL_POLICY not in names:
            problems.append(
                f"{expected.CHANNEL_POLICY} missing on realtime.messages: members cannot join"
                " their office's private channel"
            )
    if problems:
        return _fail(
            "policies",
            problems,
            "re-create the missing policies as migrations/0007 defines them; drop the unknown"
            " ones (drop policy NAME on TABLE;)",
        )
    count = sum(len(p) for p in expected.POLICIES.values())
    extra = "" if channel is None else f" and {expected.CHANNEL_POLICY} on realtime.messages"
    return Check("policies", True, f"the {count} semo policies{extra}")


def grants(facts: dict[str, Any]) -> Check:
    tables, absent = _tables(facts)
    if absent:
        return _fail("grants", [f"tables missing: {', '.join(absent)}"], "run `semo migrate`")
    problems: list[str] = []
    for table in expected.SEMO_TABLES:
        held: dict[str, list[str]] = tables[table].get("grants", {})
        for role in ("public", "anon"):
            if held.get(role):
                problems.append(f"{role} holds {', '.join(sorted(held[role]))} on {table}")
        signed_in = set(held.get("authenticated", []))
        allowed = frozenset() if table == "semo_migrations" else expected.AUTHENTICATED_TABLE
        if signed_in - allowed:
            extra = ", ".join(sorted(signed_in - allowed))
            problems.append(f"authenticated holds {extra} on {table}")
        if table != "semo_migrations" and "SELECT" not in signed_in:
            problems.append(f"authenticated cannot SELECT {table} (members read nothing)")
    for function, holders in sorted(facts.get("functions", {}).items()):
        name = function.split("(", 1)[0]
        for role in ("public", "anon"):
            if role in holders:
                problems.append(f"{role} may execute {function}")
        if "authenticated" in holders and name not in expected.AUTHENTICATED_FUNCTIONS:
            problems.append(f"authenticated may execute {function}")
        if name in expected.AUTHENTICATED_FUNCTIONS and "authenticated" not in holders:
            problems.append(f"authenticated may not execute {function} (members need it)")
    if problems:
        return _fail("grants", problems, "select semo_lock_down(); (as the tables' owner)")
    return Check(
        "grants", True, "anon holds nothing; signed-in users read and call what 0007 grants"
    )


def replica_identity(facts: dict[str, Any]) -> Check:
    tables, absent = _tables(facts)
    if absent:
        return _fail(
            "replica identity", [f"tables missing: {', '.join(absent)}"], "run `semo migrate`"
        )
    wrong = [t for t in expected.FULL_IDENTITY if tables[t].get("replica_identity") != "f"]
    if wrong:
        return _fail(
            "replica identity",
            [f"{', '.join(wrong)} not full: their UPDATE events lack the old row"],
            " ".join(f"alter table {t} replica identity full;" for t in wrong),
        )
    return Check("replica identity", True, f"full on {', '.join(expected.FULL_IDENTITY)}")


def catalog(facts: dict[str, Any]) -> list[Check]:
    """Every catalog check, in report order."""
    return [
        roles(facts),
        publication(facts),
        rls(facts),
        policies(facts),
        grants(facts),
        replica_identity(facts),
    ]
