"""Rows written around the store (older versions, other clients), for paging and row-cap tests."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

#: rows of each kind that old_rows makes: several pages, and past Supabase's row cap
OLD = 5000


def old_rows(office: str, agent: str, session: str) -> dict[str, list[dict[str, Any]]]:
    start = datetime.now(UTC) - timedelta(days=1)
    rows: dict[str, list[dict[str, Any]]] = {
        "user_questions": [],
        "agent_results": [],
        "agent_invocations": [],
        "agent_commands": [],
    }
    for n in range(OLD):
        at = start + timedelta(milliseconds=n // 10)  # ten rows per timestamp
        rows["user_questions"].append(
            {
                "id": str(uuid.uuid4()),
                "office_id": office,
                "agent_id": agent,
                "session_id": session,
                "question": f"old question {n}",
                "status": "answered",
                "answer": "yes",
                "created_at": at,
                "answered_at": at,
            }
        )
        rows["agent_results"].append(
            {
                "id": str(uuid.uuid4()),
                "office_id": office,
                "sender_agent_id": agent,
                "recipient_agent_id": agent,
                "summary": f"old result {n}",
                "status": "delivered",
                "created_at": at,
                "delivered_at": at,
            }
        )
        rows["agent_invocations"].append(
            {
                "id": str(uuid.uuid4()),
                "office_id": office,
                "caller_agent_id": agent,
                "target_agent_id": agent,
                "task": f"old task {n}",
                "status": "delivered",
                "created_at": at,
                "updated_at": at,
            }
        )
        rows["agent_commands"].append(
            {
                "id": str(uuid.uuid4()),
                "office_id": office,
                "command_type": "get_output",
                "payload": "{}",
                "status": "completed",
                "created_at": at,
                "updated_at": at,
            }
        )
    return rows


async def insert_postgres(dsn: str, rows: dict[str, list[dict[str, Any]]]) -> None:
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        async with conn.cursor() as cur:
            for table, items in rows.items():
                names = list(items[0])
                async with cur.copy(f"copy {table} ({', '.join(names)}) from stdin") as copy:
                    for item in items:
                        await copy.write_row(list(item.values()))
        await conn.commit()
