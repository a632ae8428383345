"""An independent client: a web dashboard written with @supabase/supabase-js (tests/js/
dashboard.mjs, installed by scripts/test) drives a running `semo engine` through the Supabase
emulator, as users of a team would.

The engine runs on the supabase store (service-role key), with FE and BE as scripted agents
(tests/store/test_job_cli.py's office: FE asks a question, invokes BE, finishes). Members are
added with `semo office members add EMAIL` (users made in auth.users). Then, in Node:
- an operator of the office signs in, inserts a command and receives its result by Realtime
  (postgres_changes on the private channel `office:{id}`), creates a job (semo_create_job),
  answers its question by UPDATE, follows it to `done` (rows and the engine's broadcasts),
  cancels another job; claims, forged results, ending engines and deleting the office are
  refused;
- a viewer reads the office but cannot insert, answer or create jobs; joins the channel;
- an operator of another office sees nothing of this one and cannot join its channel;
- anon sees nothing (semo_migrations included) and cannot join.
The office holds 5,000 old rows in each table the engine reads (the emulator caps reads at
1000 rows): the answer, the results and the invocations of the job are still delivered.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import psycopg

from tests.support.job_cli_office import FE_SCRIPT, write_config
from tests.support.old_rows import insert_postgres as insert_old_rows
from tests.support.old_rows import old_rows
from tests.support.supabase_dashboard import TIMEOUT, engine, office, run_js, semo
from tests.support.waiting import eventually_value

PASSWORD = "a dashboard password"


async def run_dashboard(config: dict[str, Any]) -> dict[str, Any]:
    return await run_js("dashboard.mjs", "DASHBOARD", config)


async def test_a_dashboard_drives_the_engine_through_supabase(tmp_path: Path) -> None:
    async with office() as (emulator, dsn):
        store = f'[store]\nbackend = "supabase"\nsupabase_url = "{emulator.url}"'
        write_config(tmp_path, store, FE_SCRIPT)
        async with engine(tmp_path, emulator):

            async def both_ready() -> list[dict[str, Any]] | None:
                listed = await semo(tmp_path, emulator, "sessions", "--json")
                rows = json.loads(listed.stdout) if listed.returncode == 0 else []
                ready = sorted(r["role"] for r in rows if r["status"] == "ready")
                return rows if ready == ["BE", "FE"] else None

            sessions = await eventually_value(both_ready, "FE and BE ready", TIMEOUT)
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
                row = await (
                    await conn.execute("select id from offices where name = 'cli-jobs'")
                ).fetchone()
                assert row is not None
                office_id = str(row[0])
                await conn.execute("insert into offices (id, name) values ('other', 'other')")
            # 5,000 old rows per table behind the 1000-row cap (questions answered in an
            # earlier session, delivered results and invocations, completed commands): what
            # the dashboard does next must still be delivered
            fe = next(r for r in sessions if r["role"] == "FE")
            await insert_old_rows(dsn, old_rows(office_id, fe["agent_id"], "an-earlier-session"))
            users = {
                name: f"{name}@team.test" for name in ("operator", "viewer", "outsider", "nobody")
            }
            for email in users.values():
                await asyncio.to_thread(emulator.create_user, email, PASSWORD)
            for name, role, where in (
                ("operator", "operator", "cli-jobs"),
                ("viewer", "viewer", "cli-jobs"),
                ("outsider", "operator", "other"),
            ):
                added = await semo(
                    tmp_path, emulator, "office", "members", "add", users[name],
                    "--role", role, "--office", where,
                )  # fmt: skip
                assert added.returncode == 0, added.stderr

            answer = await run_dashboard(
                {
                    "url": emulator.url,
                    "anonKey": emulator.anon_key,
                    "office": office_id,
                    "otherOffice": "other",
                    "password": PASSWORD,
                    **{name: users[name] for name in ("operator", "viewer", "outsider")},
                }
            )

    op = answer["operator"]
    assert op["join"]["status"] == "SUBSCRIBED"
    assert op["sessions"] == 2
    assert op["insert"] is None and op["result"]["success"] is True and op["result"]["hasText"]
    assert op["createJob"] is None
    assert op["answer"]["error"] is None and op["answer"]["rows"][0]["status"] == "answered"
    assert op["answer"]["rows"][0]["answered_at"] is not None  # set by the database
    assert op["job"]["status"] == "done", op["job"]
    assert {"created", "done"} <= set(op["jobSteps"])
    assert op["jobBroadcasts"] >= 1, (op["broadcasts"], op.get("broadcastSample"))
    assert op["cancel"]["error"] is None and len(op["cancel"]["rows"]) == 1
    for refused in ("claim", "forgedResult", "endEngine"):
        assert op[refused] is not None and op[refused]["code"] == "42501", (refused, op[refused])
    # deleting the office: no privilege (401/403 42501), nothing deleted
    assert op["deleteOffice"]["error"]["code"] == "42501"
    assert op["otherOfficeCommands"] == []

    viewer = answer["viewer"]
    assert viewer["offices"] == [{"name": "cli-jobs"}] and viewer["commandsSeen"] >= 1
    assert viewer["insert"]["code"] == "42501"
    assert viewer["answer"] == {"error": None, "rows": []}  # no pending question is theirs
    assert viewer["createJob"]["code"] == "42501"
    assert viewer["join"]["status"] == "SUBSCRIBED"

    outsider = answer["outsider"]
    assert all(count == 0 for count in outsider["seen"].values()), outsider["seen"]
    assert outsider["insert"]["code"] == "42501"
    assert outsider["join"]["status"] == "CHANNEL_ERROR"

    anon = answer["anon"]
    for what in ("offices", "migrations", "deleteMigrations"):
        assert anon[what] is not None and anon[what]["code"] == "42501", (what, anon[what])
    assert anon["join"]["status"] == "CHANNEL_ERROR"
