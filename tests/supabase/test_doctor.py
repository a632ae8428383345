"""`semo supabase doctor` against the emulator: a correct project passes every check; each
misconfiguration planted in the database (as an operator's own change to their project would
be) fails its own check with a line that names the problem and its fix, and exit code 1."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from semo.engine.store.members import add_member
from semo.engine.store.models import Agent, AgentSession, Office
from tests.store.conftest import Stores, open_stores
from tests.support.semo_process import run_semo
from tests.support.store_cli import env_for

EMAIL = "alice@example.test"
PASSWORD = "correct horse battery"


@pytest.fixture
async def project(tmp_path: Path) -> AsyncIterator[Stores]:
    """A migrated project with office "team", one session and a member (operator) who can
    sign in."""
    async with open_stores("supabase", tmp_path) as stores:
        assert stores.emulator is not None
        store = await stores.new()
        office = await store.create_office(Office(name="team"))
        await store.create_office(Office(name="other"))
        agent = await store.upsert_agent(Agent(office_id=office.id, name="a", role="BE"))
        await store.upsert_session(AgentSession(office_id=office.id, agent_id=agent.id))
        stores.emulator.create_user(EMAIL, PASSWORD)
        await add_member(store, office.id, EMAIL, "operator")
        yield stores


async def doctor(stores: Stores, *extra: str) -> subprocess.CompletedProcess[str]:
    assert stores.emulator is not None
    env = env_for(stores) | {
        "SUPABASE_ANON_KEY": stores.emulator.anon_key,
        "SEMO_DOCTOR_PASSWORD": PASSWORD,
    }
    env.pop("SEMO_DATABASE_URL")  # the doctor needs the project's API alone
    args = ("supabase", "doctor", "--office", "team", "--member", EMAIL, *extra)
    return await run_semo(*args, env=env)


def lines(result: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """The report: check name -> its line."""
    found = {}
    for line in result.stdout.splitlines():
        name = line[5:].split(":", 1)[0]
        found[name] = line
    return found


async def plant(stores: Stores, sql: str) -> None:
    async with await psycopg.AsyncConnection.connect(stores.dsn, autocommit=True) as conn:
        await conn.execute(sql)  # type: ignore[arg-type]


CHECKS = [
    "roles",
    "publication",
    "rls",
    "policies",
    "grants",
    "replica identity",
    "private channel",
    "max rows",
    "realtime budget",
]


async def test_a_correct_project_passes_every_check(project: Stores) -> None:
    result = await doctor(project)
    assert result.returncode == 0, result.stdout + result.stderr
    report = lines(result)
    assert list(report) == CHECKS
    assert all(line.startswith("ok ") for line in report.values()), result.stdout
    assert "1000; listings read 500 rows a page" in report["max rows"]
    assert "joins office:" in report["private channel"]
    assert "service_role_key" not in result.stdout and project.emulator is not None
    assert project.emulator.service_role_key not in result.stdout + result.stderr


async def test_without_a_member_the_channel_check_is_skipped(project: Stores) -> None:
    assert project.emulator is not None
    env = env_for(project)
    result = await run_semo("supabase", "doctor", "--office", "team", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert lines(result)["private channel"].startswith("skip ")


MISCONFIGURATIONS = {
    "publication": (
        "alter publication supabase_realtime drop table agent_sessions",
        ["agent_sessions not in supabase_realtime", "alter publication supabase_realtime add"],
    ),
    "rls": (
        "alter table jobs disable row level security",
        ["row-level security is off on jobs", "alter table jobs enable row level security"],
    ),
    "policies": (
        "drop policy semo_operators_answer on user_questions",
        ["semo_operators_answer missing on user_questions"],
    ),
    "policies ": (  # an extra, permissive policy
        "create policy everyone on agent_commands for select using (true)",
        ["unknown policy everyone on agent_commands"],
    ),
    "grants": ("grant select on engines to anon", ["anon holds SELECT on engines"]),
    "grants ": (
        "grant execute on function semo_heartbeat_grace_until() to authenticated",
        ["authenticated may execute semo_heartbeat_grace_until()", "semo_lock_down()"],
    ),
    "replica identity": (
        "alter table user_questions replica identity default",
        ["user_questions not full", "alter table user_questions replica identity full"],
    ),
    "private channel": (
        "create policy open_channels on realtime.messages for select to authenticated using (true)",
        [f"{EMAIL} joined another office's channel"],
    ),
}


@pytest.mark.parametrize("check", list(MISCONFIGURATIONS))
async def test_each_misconfiguration_fails_its_check(project: Stores, check: str) -> None:
    sql, expected = MISCONFIGURATIONS[check]
    await plant(project, sql)
    result = await doctor(project)
    assert result.returncode == 1, result.stdout + result.stderr
    report = lines(result)
    line = report[check.strip()]
    assert line.startswith("FAIL "), result.stdout
    for text in expected:
        assert text in line, line
    failed = [name for name, text in report.items() if text.startswith("FAIL")]
    assert failed == [check.strip()], result.stdout


async def test_a_member_of_another_office_is_not_admitted(project: Stores) -> None:
    """The member's own office's channel must admit them: here they belong to "other" only."""
    await plant(project, "delete from office_members")
    store = await project.new()
    other = next(o for o in await store.list_offices() if o.name == "other")
    await add_member(store, other.id, EMAIL, "viewer")
    result = await doctor(project)
    assert result.returncode == 1
    assert "was not admitted to office:" in lines(result)["private channel"]


async def test_an_office_too_busy_for_the_budget_fails(project: Stores) -> None:
    store = await project.new()
    office = next(o for o in await store.list_offices() if o.name == "team")
    agent = await store.upsert_agent(Agent(office_id=office.id, name="b", role="FE"))
    for _ in range(9):
        await store.upsert_session(AgentSession(office_id=office.id, agent_id=agent.id))
    result = await doctor(project)
    assert result.returncode == 1
    line = lines(result)["realtime budget"]
    assert line.startswith("FAIL ") and "10 open sessions" in line and "200 messages/s" in line
    passing = await doctor(project, "--messages-per-second", "500")
    assert passing.returncode == 0, passing.stdout


async def test_an_unmigrated_catalog_is_reported(project: Stores) -> None:
    await plant(project, "drop function semo_doctor_facts()")
    result = await doctor(project)
    assert result.returncode == 1
    assert "run `semo migrate`" in lines(result)["catalog"]
