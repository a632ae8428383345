"""Office members (migration 0007): Supabase Auth users who are operators or viewers.

They are managed with the engine's own access (the service role's key on the supabase store,
the direct connection on the postgres store) through the SQL functions `semo_list_members`,
`semo_add_member` and `semo_remove_member`, which no signed-in user may call. A user is named by
id or by email (looked up in `auth.users`). The sqlite store has no members: it serves one
machine, whose user is the operator.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import BaseModel

from semo.engine.store.base import Store, StoreError
from semo.engine.store.literals import ROLES, MemberRole


class Member(BaseModel):
    office_id: str
    user_id: UUID
    role: MemberRole
    email: str | None = None
    created_at: datetime


async def _call(store: Store, function: str, args: dict[str, Any]) -> Any:
    """Rows (or the value) of one of 0007's functions, with the store's own access."""
    from semo.engine.store.postgres import PostgresStore
    from semo.engine.store.supabase import SupabaseStore

    if isinstance(store, SupabaseStore):
        return await store._run(lambda c: c.rpc(function, args))
    if isinstance(store, PostgresStore):
        marks = ", ".join(f"{name} => %({name})s" for name in args)
        return await store._all(f"select * from {function}({marks})", args)
    raise StoreError(
        f"office members need a postgres or supabase store (this one is {store.backend}): "
        "they are Supabase Auth users"
    )


async def list_members(store: Store, office_id: str) -> list[Member]:
    rows = await _call(store, "semo_list_members", {"p_office_id": office_id})
    return [Member.model_validate(r) for r in rows or []]


async def add_member(store: Store, office_id: str, user: str, role: str) -> Member:
    """Make `user` (id or email) a member with `role`, or change their role."""
    if role not in ROLES:
        raise ValueError(f"role must be operator or viewer, not {role!r}")
    if not user.strip():
        raise ValueError("name a user: their id or their email")
    args = {"p_office_id": office_id, "p_user": user, "p_role": role}
    rows = await _call(store, "semo_add_member", args)
    rows = rows if isinstance(rows, list) else [rows]
    return Member.model_validate(rows[0])


async def remove_member(store: Store, office_id: str, user: str) -> bool:
    """Whether `user` (id or email) was a member (and is no longer)."""
    if not user.strip():
        raise ValueError("name a user: their id or their email")
    value = await _call(store, "semo_remove_member", {"p_office_id": office_id, "p_user": user})
    if isinstance(value, list):  # postgres: one row with the function's value
        value = next(iter(value[0].values())) if value else 0
    return bool(value)
