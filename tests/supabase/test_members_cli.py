"""`semo office members` as an administrator runs it: on the supabase store (the emulator over a
Supabase-shaped database: users in auth.users, looked up by email), on the postgres store
without Supabase Auth (users by id only), and refused on sqlite."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from semo.engine.store.models import Office
from tests.store.conftest import Stores, open_stores
from tests.support.store_cli import semo


@pytest.fixture(params=["postgres", "supabase"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    async with open_stores(request.param, tmp_path) as stores:
        yield stores


async def test_add_list_change_and_remove_members(backend: Stores) -> None:
    store = await backend.new()
    office = await store.create_office(Office(name="team"))
    await store.create_office(Office(name="other"))
    supabase = backend.backend == "supabase"
    async with await psycopg.AsyncConnection.connect(backend.dsn, autocommit=True) as conn:
        if supabase:
            cur = await conn.execute(
                "insert into auth.users (email) values ('Alice@Example.test'), ('bob@example.test')"
                " returning id"
            )
            alice, bob = (str(r[0]) for r in await cur.fetchall())
        else:
            alice, bob = str(uuid.uuid4()), str(uuid.uuid4())
    who_alice = "alice@example.test" if supabase else alice

    added = await semo(
        backend, "office", "members", "add", who_alice, "--role", "viewer", "--office", "team"
    )
    assert added.returncode == 0, added.stderr
    assert alice in added.stdout and "viewer" in added.stdout
    assert (
        await semo(backend, "office", "members", "add", bob, "--office", "team")
    ).returncode == 0

    listed = await semo(backend, "office", "members", "list", "--office", "team", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {r["user_id"]: r for r in json.loads(listed.stdout)}
    assert {u: r["role"] for u, r in rows.items()} == {alice: "viewer", bob: "operator"}
    if supabase:
        assert rows[alice]["email"] == "Alice@Example.test"
    other = await semo(backend, "office", "members", "--office", "other", "--json")
    assert json.loads(other.stdout) == []

    # add again: the role changes, nobody is added twice
    again = await semo(
        backend, "office", "members", "add", who_alice, "--role", "operator", "--office", "team"
    )
    assert again.returncode == 0, again.stderr
    listed = await semo(backend, "office", "members", "--office", "team", "--json")
    assert sorted(r["role"] for r in json.loads(listed.stdout)) == ["operator", "operator"]

    removed = await semo(backend, "office", "members", "remove", who_alice, "--office", "team")
    assert removed.returncode == 0 and "removed" in removed.stdout
    gone = await semo(backend, "office", "members", "remove", who_alice, "--office", "team")
    assert gone.returncode == 1 and "not a member" in gone.stdout
    listed = await semo(backend, "office", "members", "--office", "team", "--json")
    assert [r["user_id"] for r in json.loads(listed.stdout)] == [bob]
    assert office.id


async def test_bad_input_is_refused_with_a_reason(backend: Stores) -> None:
    store = await backend.new()
    await store.create_office(Office(name="team"))
    unknown = await semo(
        backend, "office", "members", "add", "nobody@example.test", "--office", "team"
    )
    assert unknown.returncode == 2
    if backend.backend == "supabase":
        assert "no user nobody@example.test in auth.users" in unknown.stderr
    else:  # no Supabase Auth: emails cannot be looked up
        assert "auth.users" in unknown.stderr and "give the user id" in unknown.stderr
    missing = await semo(backend, "office", "members", "add", "--office", "team")
    assert missing.returncode == 2 and "needs USER" in missing.stderr
    role = await semo(
        backend,
        "office",
        "members",
        "add",
        str(uuid.uuid4()),
        "--role",
        "admin",
        "--office",
        "team",
    )
    assert role.returncode == 2 and "invalid choice" in role.stderr
    no_office = await semo(backend, "office", "members", "--office", "nope")
    assert no_office.returncode == 2 and "no office 'nope'" in no_office.stderr


async def test_sqlite_has_no_members(tmp_path: Path) -> None:
    async with open_stores("sqlite", tmp_path) as stores:
        store = await stores.new()
        await store.create_office(Office(name="solo"))
        result = await semo(stores, "office", "members", "list")
        assert result.returncode == 2
        assert "need a postgres or supabase store" in result.stderr
