"""The role x office x operation matrix on the emulator, through @supabase/supabase-js
(tests/js/matrix.mjs): what each kind of user gets for each operation on their own office and
on the other one. The same matrix on Postgres, statement by statement, is
tests/supabase/test_policies.py.

Outcomes: "ok" (rows returned or changed), "none" (no error, nothing: a policy hid the rows),
"denied" (42501: no privilege, or a policy refused the row).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import psycopg

from semo.engine.store.migrate import migrate
from tests.store.conftest import ADMIN_DSN, admin_connection_check
from tests.support.supabase_dashboard import run_js
from tests.support.supabase_emulator import SupabaseEmulator, temporary_database

PASSWORD = "matrix password"
ORDER = ["operator_a", "viewer_a", "operator_b", "stranger", "anon", "service_role"]
TABLES = [
    "agents",
    "agent_sessions",
    "agent_commands",
    "user_questions",
    "agent_invocations",
    "agent_results",
    "jobs",
    "engines",
    "job_events",
    "office_members",
]
ENGINE_WORK = ["claim", "heartbeat", "insert_result", "update_session", "add_member"]
OPERATOR_WORK = ["insert_command", "answer_question", "create_job", "cancel_job"]


def seed(conn: psycopg.Connection[Any], name: str) -> dict[str, Any]:
    office, agent, session, command, done = (str(uuid.uuid4()) for _ in range(5))
    conn.execute("insert into offices (id, name) values (%s, %s)", (office, name))
    conn.execute(
        "insert into agents (id, office_id, name, role) values (%s, %s, 'be', 'BE')",
        (agent, office),
    )
    conn.execute(
        "insert into agent_sessions (session_id, office_id, agent_id, status, engine_id)"
        " values (%s, %s, %s, 'ready', 'engine-1')",
        (session, office, agent),
    )
    conn.execute(
        "insert into agent_commands (id, office_id, session_id, command_type)"
        " values (%s, %s, %s, 'get_output'), (%s, %s, %s, 'get_output')",
        (command, office, session, done, office, session),
    )
    conn.execute("update agent_commands set status = 'completed' where id = %s", (done,))
    conn.execute(
        "insert into agent_command_results (command_id, success) values (%s, true)", (done,)
    )
    conn.execute(
        "insert into agent_invocations (office_id, caller_agent_id, target_agent_id, task)"
        " values (%s, %s, %s, 't')",
        (office, agent, agent),
    )
    conn.execute(
        "insert into agent_results (office_id, sender_agent_id, recipient_agent_id)"
        " values (%s, %s, %s)",
        (office, agent, agent),
    )
    conn.execute(
        "insert into engines (office_id, engine_id, alive_until)"
        " values (%s, 'engine-1', now() + interval '1 hour')",
        (office,),
    )
    questions, jobs = {}, {}
    for who in ORDER:
        questions[who], jobs[who] = str(uuid.uuid4()), str(uuid.uuid4())
        conn.execute(
            "insert into user_questions (id, office_id, agent_id, session_id, question)"
            " values (%s, %s, %s, %s, %s)",
            (questions[who], office, agent, session, f"for {who}?"),
        )
        conn.execute(
            "insert into jobs (id, office_id, agent_id, task) values (%s, %s, %s, 'build')",
            (jobs[who], office, agent),
        )
        conn.execute(
            "insert into job_events (job_id, office_id, step) values (%s, %s, 'created')",
            (jobs[who], office),
        )
    return {
        "id": office,
        "command": command,
        "done": done,
        "questions": questions,
        "jobs": jobs,
    }


def expected(who: str, office: str) -> dict[str, str]:
    """What `who` gets on office `office` (A or B)."""
    member = {"operator_a": ("A", "operator"), "viewer_a": ("A", "viewer")}.get(who)
    if who == "operator_b":
        member = ("B", "operator")
    role = member[1] if member and member[0] == office else None
    row: dict[str, str] = {}
    reads = ["read_office", *(f"read_{t}" for t in TABLES), "read_agent_command_results"]
    for read in reads:
        row[read] = {"anon": "denied", "service_role": "ok"}.get(who, "ok" if role else "none")
    for work in OPERATOR_WORK:
        if who == "anon":
            row[work] = "denied"
        elif who == "service_role":
            # the service role writes rows directly; the job functions are the operators'
            row[work] = "ok" if work in ("insert_command", "answer_question") else "denied"
        elif role == "operator":
            row[work] = "ok"
        else:
            # a pending question that is not theirs to answer is hidden from the UPDATE
            row[work] = "none" if work == "answer_question" else "denied"
    not_by_the_service_role = ("delete_office", "end_engine", "complete")  # would end the test
    for work in [*ENGINE_WORK, *not_by_the_service_role]:
        if who != "service_role":
            row[work] = "denied"
        elif work not in not_by_the_service_role:
            row[work] = "ok"
    row["read_migrations"] = "ok" if who == "service_role" else "denied"
    return row


async def test_the_matrix_through_supabase_js() -> None:
    await admin_connection_check()
    with contextlib.ExitStack() as stack:
        dsn = await asyncio.to_thread(stack.enter_context, temporary_database(ADMIN_DSN))
        await migrate(dsn)
        async with SupabaseEmulator(dsn) as emulator:
            users = {who: f"{who}@matrix.test" for who in ORDER[:4]}
            ids = {
                who: await asyncio.to_thread(emulator.create_user, email, PASSWORD)
                for who, email in users.items()
            }
            with psycopg.connect(dsn, autocommit=True) as conn:
                offices = {"A": seed(conn, "A"), "B": seed(conn, "B")}
                conn.execute(
                    "insert into office_members (office_id, user_id, role) values"
                    " (%s, %s, 'operator'), (%s, %s, 'viewer'), (%s, %s, 'operator')",
                    (
                        offices["A"]["id"],
                        ids["operator_a"],
                        offices["A"]["id"],
                        ids["viewer_a"],
                        offices["B"]["id"],
                        ids["operator_b"],
                    ),
                )
            config = {
                "url": emulator.url,
                "anonKey": emulator.anon_key,
                "serviceKey": emulator.service_role_key,
                "password": PASSWORD,
                "users": users,
                "userIds": ids,
                "offices": offices,
                "order": ORDER,
            }
            answer = await run_js("matrix.mjs", "MATRIX", config)
    problems = [
        f"{who} on {office}: {op} is {answer[who][office].get(op)}, expected {want}"
        for who in ORDER
        for office in ("A", "B")
        for op, want in expected(who, office).items()
        if answer[who][office].get(op) != want
    ]
    assert not problems, "\n".join(problems)
    assert (
        answer["viewer_a"]["A"]["read_jobs"] == "ok"
        and answer["anon"]["A"]["read_jobs"] == "denied"
    )
