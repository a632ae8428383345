"""The Supabase emulator, driven by the unmodified official `supabase` client (2.34.1).

Each test gets its own database (`semo_emu_<uuid>` on 127.0.0.1:5432) with `migrations/*.sql`
applied when they exist (a minimal `offices`/`agent_commands`/`user_questions` schema otherwise),
plus a few tables and functions of its own.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest
from postgrest.exceptions import APIError
from realtime import RealtimeSubscribeStates
from supabase import AsyncClient, create_client
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.support.supabase_client import supabase
from tests.support.supabase_emulator import (
    ADMIN_DSN,
    SupabaseEmulator,
    default_migrations,
    ensure_supabase_roles,
    temporary_database,
)
from tests.support.waiting import eventually


def _postgres_available() -> bool:
    try:
        with psycopg.connect(ADMIN_DSN, connect_timeout=3):
            return True
    except psycopg.Error:
        return False


# Used only when migrations/ is empty: the columns of engine/store/models.py.
FALLBACK_SCHEMA = """
CREATE TABLE offices (
    id text PRIMARY KEY DEFAULT gen_random_uuid()::text,
    name text NOT NULL, repository text, workspace_root text,
    created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE agent_commands (
    id text PRIMARY KEY DEFAULT gen_random_uuid()::text,
    office_id text NOT NULL REFERENCES offices (id),
    session_id text,
    command_type text NOT NULL,
    payload jsonb NOT NULL DEFAULT '{}',
    status text NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'processing', 'completed', 'failed')),
    claimed_by text, lease_expires_at timestamptz,
    attempts integer NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE user_questions (
    id text PRIMARY KEY DEFAULT gen_random_uuid()::text,
    office_id text NOT NULL REFERENCES offices (id),
    agent_id text NOT NULL, session_id text,
    question_type text NOT NULL DEFAULT 'text', question text NOT NULL,
    options jsonb NOT NULL DEFAULT '[]', status text NOT NULL DEFAULT 'pending',
    answer text, created_at timestamptz NOT NULL DEFAULT now(), answered_at timestamptz);
ALTER TABLE agent_commands REPLICA IDENTITY FULL;
ALTER TABLE user_questions REPLICA IDENTITY FULL;
ALTER PUBLICATION supabase_realtime ADD TABLE agent_commands, user_questions;
"""

# The emulator's own test objects, on top of the real schema.
TEST_SCHEMA = """
CREATE TABLE emu_plain (id text PRIMARY KEY, office_id text NOT NULL, n integer,
                        tags text[] NOT NULL DEFAULT '{}', label text UNIQUE);
CREATE TABLE emu_unpublished (id text PRIMARY KEY, n integer);
ALTER PUBLICATION supabase_realtime ADD TABLE emu_plain;
CREATE FUNCTION emu_add(a integer, b integer DEFAULT 10) RETURNS integer
    LANGUAGE sql AS $$ SELECT a + b $$;
CREATE FUNCTION emu_commands(p_office_id text, p_status text DEFAULT 'pending')
    RETURNS SETOF agent_commands LANGUAGE sql STABLE AS
    $$ SELECT * FROM agent_commands WHERE office_id = p_office_id AND status = p_status
       ORDER BY created_at, id $$;
CREATE FUNCTION emu_touch(p_id text) RETURNS void
    LANGUAGE sql AS $$ UPDATE emu_plain SET n = coalesce(n, 0) + 1 WHERE id = p_id $$;
CREATE FUNCTION emu_busy(p_id text) RETURNS integer LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'row % is busy', p_id USING ERRCODE = 'PT409', HINT = 'try again later';
END $$;
CREATE FUNCTION emu_echo(jsonb) RETURNS jsonb LANGUAGE sql AS $$ SELECT $1 $$;
CREATE FUNCTION emu_tagged(p_tags text[]) RETURNS SETOF emu_plain LANGUAGE sql STABLE AS
    $$ SELECT * FROM emu_plain WHERE tags && p_tags ORDER BY id $$;
"""


def _schema_sql() -> tuple[list, str]:
    migrations = default_migrations()
    return migrations, TEST_SCHEMA if migrations else FALLBACK_SCHEMA + TEST_SCHEMA


@pytest.fixture
def database() -> Iterator[str]:
    migrations, setup = _schema_sql()
    with temporary_database(migrations=migrations, setup_sql=setup) as dsn:
        yield dsn


@pytest.fixture
def emulator(database: str) -> Iterator[SupabaseEmulator]:
    with SupabaseEmulator(database) as emu:
        yield emu


def new_id() -> str:
    return str(uuid.uuid4())


async def make_office(client: AsyncClient, name: str | None = None) -> str:
    """A new office row; office names are unique (0012), so each gets its own by default."""
    office_id = new_id()
    name = name or f"office-{office_id[:8]}"
    await client.table("offices").insert({"id": office_id, "name": name}).execute()
    return office_id


def command(office_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": new_id(),
        "office_id": office_id,
        "command_type": "create_session",
        "payload": {"role": "dev"},
        **extra,
    }


def question(office_id: str, text: str = "Proceed?") -> dict[str, Any]:
    return {
        "id": new_id(),
        "office_id": office_id,
        "agent_id": new_id(),
        "question_type": "confirm",
        "question": text,
        "options": ["yes", "no"],
    }


def rest(emu: SupabaseEmulator, key: str | None = None, **headers: str) -> httpx.Client:
    key = emu.service_role_key if key is None else key
    base = {"apikey": key, "Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=emu.rest_url, headers={**base, **headers}, timeout=10)


# -- PostgREST --------------------------------------------------------------------------------


async def test_insert_select_with_every_filter(emulator: SupabaseEmulator) -> None:
    async with supabase(emulator) as client:
        office = await make_office(client)
        one = await client.table("agent_commands").insert(command(office)).execute()
        assert len(one.data) == 1
        row = one.data[0]
        assert row["status"] == "pending" and row["attempts"] == 0
        assert row["payload"] == {"role": "dev"}
        assert row["created_at"].endswith("+00:00")  # to_json's timestamptz format

        bulk = [command(office, attempts=i) for i in range(1, 5)]
        bulk[0]["session_id"] = "s-1"  # keys differ between rows: missing ones become NULL
        inserted = await client.table("agent_commands").insert(bulk).execute()
        assert [r["attempts"] for r in inserted.data] == [1, 2, 3, 4]
        assert [r["session_id"] for r in inserted.data] == ["s-1", None, None, None]

        table = client.table("agent_commands")

        async def attempts(builder: Any) -> list[int]:
            return [r["attempts"] for r in (await builder.execute()).data]

        def rows() -> Any:
            return table.select("*").eq("office_id", office)

        assert await attempts(rows().order("attempts")) == [0, 1, 2, 3, 4]
        assert await attempts(rows().gt("attempts", 2).order("attempts")) == [3, 4]
        assert await attempts(rows().gte("attempts", 2).lt("attempts", 4).order("attempts")) == [
            2,
            3,
        ]
        assert await attempts(rows().lte("attempts", 1).order("attempts", desc=True)) == [1, 0]
        assert await attempts(rows().neq("attempts", 0).order("attempts").limit(2)) == [1, 2]
        assert await attempts(rows().in_("attempts", [0, 4]).order("attempts")) == [0, 4]
        unset = rows().is_("session_id", None).order("attempts").offset(1).limit(2)
        assert await attempts(unset) == [2, 3]
        assert await attempts(rows().not_.is_("session_id", None)) == [1]
        assert await attempts(rows().like("session_id", "s-*")) == [1]
        either = rows().or_("attempts.eq.0,attempts.gt.3").order("attempts")
        assert await attempts(either) == [0, 4]
        assert await attempts(rows().eq("payload->>role", "dev").eq("attempts", 2)) == [2]

        projected = await table.select("id, kind:command_type").eq("attempts", 1).execute()
        assert projected.data == [{"id": bulk[0]["id"], "kind": "create_session"}]

        counted = await table.select("id", count="exact").gt("attempts", 0).limit(1).execute()
        assert counted.count == 4 and len(counted.data) == 1

        none = await table.select("*").eq("office_id", new_id()).execute()
        assert none.data == []


async def test_update_delete_upsert_with_representation(emulator: SupabaseEmulator) -> None:
    async with supabase(emulator) as client:
        office = await make_office(client)
        rows = [command(office, attempts=i) for i in range(3)]
        await client.table("agent_commands").insert(rows).execute()

        updated = await (
            client.table("agent_commands")
            .update({"status": "processing", "claimed_by": "engine-1"})
            .eq("office_id", office)
            .lt("attempts", 2)
            .execute()
        )
        assert sorted(r["attempts"] for r in updated.data) == [0, 1]
        assert {r["claimed_by"] for r in updated.data} == {"engine-1"}
        pending = (
            await client.table("agent_commands").select("id").eq("status", "pending").execute()
        )
        assert [r["id"] for r in pending.data] == [rows[2]["id"]]

        nothing = (
            await client.table("agent_commands").update({"attempts": 9}).eq("id", "nope").execute()
        )
        assert nothing.data == []

        deleted = await client.table("agent_commands").delete().eq("id", rows[2]["id"]).execute()
        assert [r["id"] for r in deleted.data] == [rows[2]["id"]]

        plain = client.table("emu_plain")
        await plain.insert({"id": "p1", "office_id": office, "n": 1}).execute()
        merged = await plain.upsert({"id": "p1", "office_id": office, "n": 2}).execute()
        assert merged.data[0]["n"] == 2
        ignored = await plain.upsert(
            {"id": "p1", "office_id": office, "n": 3}, ignore_duplicates=True
        ).execute()
        assert ignored.data == []
        assert (await plain.select("n").eq("id", "p1").single().execute()).data == {"n": 2}

        minimal = await plain.insert(
            {"id": "p2", "office_id": office}, returning="minimal"
        ).execute()
        assert minimal.data == []


async def test_single_and_maybe_single(emulator: SupabaseEmulator) -> None:
    async with supabase(emulator) as client:
        office = await make_office(client)
        first, second = command(office), command(office)
        await client.table("agent_commands").insert([first, second]).execute()
        table = client.table("agent_commands")

        one = await table.select("id, status").eq("id", first["id"]).single().execute()
        assert one.data == {"id": first["id"], "status": "pending"}

        for builder, rows in (
            (table.select("*").eq("id", "missing"), 0),
            (table.select("*").eq("office_id", office), 2),
        ):
            with pytest.raises(APIError) as raised:
                await builder.single().execute()
            assert raised.value.code == "PGRST116"
            assert raised.value.message == "Cannot coerce the result to a single JSON object"
            assert raised.value.details == f"The result contains {rows} rows"

        assert await table.select("*").eq("id", "missing").maybe_single().execute() is None
        found = await table.select("id").eq("id", second["id"]).maybe_single().execute()
        assert found is not None and found.data == {"id": second["id"]}

        # a singular write that would touch two rows is rolled back, as in PostgREST
        with pytest.raises(APIError) as raised:
            await table.update({"status": "failed"}).eq("office_id", office).single().execute()
        assert raised.value.code == "PGRST116"
        still = await table.select("status").eq("office_id", office).execute()
        assert {r["status"] for r in still.data} == {"pending"}

        created = await table.insert(command(office)).single().execute()
        assert isinstance(created.data, dict) and created.data["office_id"] == office


async def test_rpc(emulator: SupabaseEmulator) -> None:
    async with supabase(emulator) as client:
        office = await make_office(client)
        await (
            client.table("agent_commands")
            .insert(
                # a bulk insert sends the union of the keys: a key missing from a row becomes NULL
                [
                    command(office, attempts=1, status="pending"),
                    command(office, attempts=2, status="completed"),
                ]
            )
            .execute()
        )

        assert (await client.rpc("emu_add", {"a": 2, "b": 3}).execute()).data == 5
        assert (await client.rpc("emu_add", {"a": 2}).execute()).data == 12  # default b
        assert (await client.rpc("emu_add", {"a": 2, "b": None}).execute()).data is None  # NULL
        rows = (await client.rpc("emu_commands", {"p_office_id": office}).execute()).data
        assert [r["attempts"] for r in rows] == [1]
        done = await client.rpc(
            "emu_commands", {"p_office_id": office, "p_status": "completed"}
        ).execute()
        assert [r["attempts"] for r in done.data] == [2]
        filtered = (
            await client.rpc("emu_commands", {"p_office_id": office}).eq("attempts", 5).execute()
        )
        assert filtered.data == []
        assert (await client.rpc("emu_echo", {"any": ["json", 1]}).execute()).data == {
            "any": ["json", 1]
        }

        await (
            client.table("emu_plain")
            .insert(
                [
                    {"id": "a", "office_id": office, "tags": ["x", "y"]},
                    {"id": "b", "office_id": office},
                ],
                default_to_null=False,  # Prefer: missing=default, so b gets the column default
            )
            .execute()
        )
        tagged = await client.rpc("emu_tagged", {"p_tags": ["y", "z"]}).execute()
        assert [r["id"] for r in tagged.data] == ["a"]
        await client.rpc("emu_touch", {"p_id": "a"}).execute()  # void: 204
        assert (
            await client.table("emu_plain").select("n").eq("id", "a").single().execute()
        ).data == {"n": 1}

        with pytest.raises(APIError) as raised:
            await client.rpc("emu_busy", {"p_id": "a"}).execute()
        assert raised.value.code == "PT409"
        assert raised.value.message == "row a is busy"
        assert raised.value.hint == "try again later"

        with pytest.raises(APIError) as raised:
            await client.rpc("emu_missing", {"x": 1}).execute()
        assert raised.value.code == "PGRST202"
        with pytest.raises(APIError) as raised:
            await client.rpc("emu_add", {"nope": 1}).execute()
        assert raised.value.code == "PGRST202"


def test_error_shapes_and_status_codes(emulator: SupabaseEmulator) -> None:
    """Raw HTTP, to see the status codes the client hides."""
    with rest(emulator) as http:
        office = new_id()
        created = http.post(
            "/offices",
            json={"id": office, "name": "o"},
            headers={"Prefer": "return=representation"},
        )
        assert created.status_code == 201 and created.json()[0]["id"] == office

        def error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
            assert response.status_code == status, response.text
            body = response.json()
            assert set(body) == {"code", "message", "details", "hint"}
            assert body["code"] == code
            return body

        dup = error(http.post("/offices", json={"id": office, "name": "o"}), 409, "23505")
        assert "duplicate key" in dup["message"] and "already exists" in dup["details"]
        unknown = error(http.get("/no_such_table"), 404, "PGRST205")
        assert (
            unknown["message"]
            == "Could not find the table 'public.no_such_table' in the schema cache"
        )
        error(http.get("/offices", params={"id": "zz.1"}), 400, "PGRST100")
        error(http.get("/offices", params={"nope": "eq.1"}), 400, "42703")
        error(http.get("/offices", params={"select": "id,friends(*)"}), 400, "PGRST100")
        error(
            http.post("/offices", json={"id": new_id(), "name": "o", "colour": "red"}),
            400,
            "PGRST204",
        )
        error(http.post("/offices", content=b"{not json"), 400, "PGRST102")
        error(http.post("/agent_commands", json=command(office, status="bogus")), 400, "23514")
        error(http.post("/agent_commands", json=command(new_id())), 409, "23503")
        error(http.post("/emu_plain", json={"id": "x"}), 400, "23502")
        error(http.post("/rpc/emu_busy", json={"p_id": "x"}), 409, "PT409")
        error(http.post("/rpc/nothing", json={}), 404, "PGRST202")
        error(
            http.get("/offices", params={"id": f"eq.{office}", "name": "eq.nobody"},
                     headers={"Accept": "application/vnd.pgrst.object+json"}),
            406, "PGRST116",
        )  # fmt: skip
        error(http.get("/offices", headers={"Accept-Profile": "private"}), 406, "PGRST106")
        got = http.get("/offices", params={"id": f"eq.{office}"}, headers={"Prefer": "count=exact"})
        assert got.status_code == 200 and got.headers["content-range"] == "0-0/1"

    with rest(emulator, key="") as anonymous:
        response = anonymous.get("/offices")
        assert (
            response.status_code == 401
            and response.json()["message"] == "No API key found in request"
        )
    with rest(emulator, key="not-a-key") as wrong:
        response = wrong.get("/offices")
        assert response.status_code == 401 and response.json()["message"] == "Invalid API key"
    with rest(emulator, Authorization="Bearer forged.token.here") as forged:
        response = forged.get("/offices")
        assert response.status_code == 401 and response.json()["code"] == "PGRST301"
    with rest(emulator, key=emulator.anon_key) as anon:
        # the request runs as anon, who has no privilege on semo's tables (migration 0007)
        response = anon.get("/offices")
        assert response.status_code == 401 and response.json()["code"] == "42501"


def test_sync_client_and_injected_rest_failures(emulator: SupabaseEmulator) -> None:
    client = create_client(emulator.url, emulator.service_role_key)
    office = new_id()
    client.table("offices").insert({"id": office, "name": "sync"}).execute()
    emulator.fail_rest(1, status=503)  # GET is retried by postgrest-py on 503 (after 1 s)
    rows = client.table("offices").select("name").eq("id", office).execute()
    assert rows.data == [{"name": "sync"}]
    assert emulator.stats().rest_failures_injected == 1
    emulator.fail_rest(1, status=500)
    with pytest.raises(APIError) as raised:
        client.table("offices").select("*").execute()
    assert raised.value.code == "500"


def test_switch_roles_applies_row_level_security(database: str) -> None:
    """With switch_roles each request runs as its JWT's role; request.jwt.claims is set as
    PostgREST sets it, so policies keyed on a claim work. (Creates the NOLOGIN roles anon,
    authenticated and service_role in the cluster if they are missing.)"""
    ensure_supabase_roles(database)
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(
            "ALTER TABLE emu_plain ENABLE ROW LEVEL SECURITY;"
            " CREATE POLICY emu_office ON emu_plain USING"
            " (office_id = current_setting('request.jwt.claims', true)::json ->> 'office_id')"
        )
    with SupabaseEmulator(database, switch_roles=True) as emu:
        with rest(emu) as service:
            created = service.post(
                "/emu_plain", json=[{"id": "a", "office_id": "A"}, {"id": "b", "office_id": "B"}]
            )
            assert created.status_code == 201, created.text
        token = emu.sign_jwt({"role": "authenticated", "office_id": "A"})
        with rest(emu, key=emu.anon_key, Authorization=f"Bearer {token}") as office_a:
            assert [r["id"] for r in office_a.get("/emu_plain").json()] == ["a"]
            denied = office_a.post("/emu_plain", json={"id": "c", "office_id": "B"})
            assert denied.status_code == 403 and denied.json()["code"] == "42501"
        with rest(emu, key=emu.anon_key) as anon:
            assert anon.get("/emu_plain").json() == []
            denied = anon.post("/emu_plain", json={"id": "d", "office_id": "A"})
            assert denied.status_code == 401 and denied.json()["code"] == "42501"


# -- Realtime through the official client --------------------------------------------------------


async def test_office_channel_receives_its_inserts_and_question_updates(
    emulator: SupabaseEmulator,
) -> None:
    async with supabase(emulator) as client:
        office, other = await make_office(client, "mine"), await make_office(client, "other")
        commands: list[dict[str, Any]] = []
        updates: list[dict[str, Any]] = []
        statuses: list[RealtimeSubscribeStates] = []
        system: list[Any] = []
        channel = client.channel(f"office:{office}")
        channel.on_postgres_changes(
            "INSERT",
            schema="public",
            table="agent_commands",
            filter=f"office_id=eq.{office}",
            callback=commands.append,
        )
        channel.on_postgres_changes(
            "UPDATE",
            schema="public",
            table="user_questions",
            filter=f"office_id=eq.{office}",
            callback=updates.append,
        )
        channel.on_system(system.append)
        await channel.subscribe(lambda status, error: statuses.append(status))
        assert statuses == [RealtimeSubscribeStates.SUBSCRIBED]
        await eventually(lambda: len(system) == 1)
        assert system[0].message == "Subscribed to PostgreSQL"
        assert system[0].extension == "postgres_changes" and system[0].status == "ok"

        mine = command(office)
        await client.table("agent_commands").insert([command(other), mine]).execute()
        questions = [question(office), question(other)]
        await client.table("user_questions").insert(questions).execute()
        for q in questions:
            await (
                client.table("user_questions")
                .update({"status": "answered", "answer": "yes"})
                .eq("id", q["id"])
                .execute()
            )
        await eventually(lambda: len(commands) == 1 and len(updates) == 1)
        await asyncio.sleep(0.3)  # nothing else arrives: other office, other events
        assert len(commands) == 1 and len(updates) == 1

        insert = commands[0]
        ids = [cb.id for cb in channel.postgres_changes_callbacks]
        assert insert["ids"] == [ids[0]] and all(ids)
        data = insert["data"]
        assert data["type"] == "INSERT" and data["schema"] == "public"
        assert data["table"] == "agent_commands" and data["errors"] is None
        assert data["record"]["id"] == mine["id"] and data["record"]["payload"] == {"role": "dev"}
        assert "old_record" not in data
        assert {"name": "office_id", "type": "text"} in data["columns"]
        assert {"name": "payload", "type": "jsonb"} in data["columns"]
        assert data["commit_timestamp"].endswith("Z")

        update = updates[0]["data"]
        assert updates[0]["ids"] == [ids[1]]
        assert update["type"] == "UPDATE"
        assert update["record"]["id"] == questions[0]["id"]
        assert update["record"]["status"] == "answered" and update["record"]["answer"] == "yes"
        assert update["old_record"]["status"] == "pending"  # replica identity full
        assert update["old_record"]["options"] == ["yes", "no"]
        assert emulator.stats().events_sent == 2


async def test_old_record_is_the_primary_key_without_replica_identity_full(
    emulator: SupabaseEmulator,
) -> None:
    async with supabase(emulator) as client:
        events: list[dict[str, Any]] = []
        channel = client.channel("plain")
        channel.on_postgres_changes("*", schema="public", table="emu_plain", callback=events.append)
        await channel.subscribe()
        await emulator.async_wait_until(lambda s: s.joins == 1)
        await asyncio.sleep(0.05)
        plain = client.table("emu_plain")
        await plain.insert({"id": "k1", "office_id": "o", "n": 1}).execute()
        await plain.update({"n": 2}).eq("id", "k1").execute()
        await plain.delete().eq("id", "k1").execute()
        await client.table("emu_unpublished").insert({"id": "u", "n": 1}).execute()
        await eventually(lambda: len(events) == 3)
        await asyncio.sleep(0.2)
        assert [e["data"]["type"] for e in events] == ["INSERT", "UPDATE", "DELETE"]
        assert events[1]["data"]["old_record"] == {"id": "k1"}
        assert events[1]["data"]["record"]["n"] == 2
        assert events[2]["data"]["old_record"] == {"id": "k1"}
        assert "record" not in events[2]["data"]
        assert len(events) == 3  # emu_unpublished is not in the supabase_realtime publication


async def test_delete_events_ignore_the_filter_and_keep_the_full_old_row(
    emulator: SupabaseEmulator,
) -> None:
    async with supabase(emulator) as client:
        office, other = await make_office(client), await make_office(client)
        events: list[dict[str, Any]] = []
        channel = client.channel(f"office:{office}")
        channel.on_postgres_changes(
            "DELETE",
            schema="public",
            table="user_questions",
            filter=f"office_id=eq.{office}",
            callback=events.append,
        )
        await channel.subscribe()
        await emulator.async_wait_until(lambda s: s.joins == 1)
        await asyncio.sleep(0.05)
        q = question(other)
        await client.table("user_questions").insert(q).execute()
        await client.table("user_questions").delete().eq("id", q["id"]).execute()
        await eventually(lambda: len(events) == 1)
        assert events[0]["data"]["old_record"]["question"] == q["question"]  # replica identity full


async def test_changes_before_subscribed_to_postgresql_are_not_delivered(
    emulator: SupabaseEmulator,
) -> None:
    emulator.set_subscribe_delay(0.5)
    async with supabase(emulator) as client:
        office = await make_office(client)
        events: list[dict[str, Any]] = []
        system: list[Any] = []
        channel = client.channel(f"office:{office}")
        channel.on_postgres_changes(
            "INSERT", schema="public", table="agent_commands", callback=events.append
        )
        channel.on_system(system.append)
        await channel.subscribe()  # SUBSCRIBED: the join reply arrived
        early = command(office)
        await client.table("agent_commands").insert(early).execute()
        await eventually(lambda: len(system) == 1)
        late = command(office)
        await client.table("agent_commands").insert(late).execute()
        await eventually(lambda: len(events) == 1)
        await asyncio.sleep(0.2)
        assert [e["data"]["record"]["id"] for e in events] == [late["id"]]


async def test_bad_binding_gives_channel_error(emulator: SupabaseEmulator) -> None:
    async with supabase(emulator) as client:
        statuses: list[tuple[RealtimeSubscribeStates, Exception | None]] = []
        channel = client.channel("bad")
        channel.on_postgres_changes(
            "INSERT", schema="public", table="agent_commands", filter="nope=eq.1", callback=print
        )
        await channel.subscribe(lambda status, error: statuses.append((status, error)))
        await eventually(lambda: len(statuses) == 2)
        assert statuses[0][0] == RealtimeSubscribeStates.SUBSCRIBED
        assert statuses[1][0] == RealtimeSubscribeStates.CHANNEL_ERROR
        assert "Unable to subscribe to changes" in str(statuses[1][1])


# -- faults ------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [None, 1001, 1011])
async def test_drop_sockets_client_reports_channel_error_and_rejoins(
    emulator: SupabaseEmulator, code: int | None
) -> None:
    async with supabase(emulator) as client:
        office = await make_office(client)
        events: list[dict[str, Any]] = []
        statuses: list[RealtimeSubscribeStates] = []
        channel = client.channel(f"office:{office}")
        channel.on_postgres_changes(
            "INSERT", schema="public", table="agent_commands", callback=events.append
        )
        await channel.subscribe(lambda status, error: statuses.append(status))
        await emulator.async_wait_until(lambda s: s.joins == 1)

        assert emulator.drop_sockets(code) == 1
        await eventually(lambda: len(statuses) == 3)
        assert statuses == [
            RealtimeSubscribeStates.SUBSCRIBED,
            RealtimeSubscribeStates.CHANNEL_ERROR,
            RealtimeSubscribeStates.SUBSCRIBED,
        ]
        stats = await emulator.async_wait_until(lambda s: s.joins == 2 and s.open_sockets == 1)
        assert stats.connections == 2 and stats.sockets_dropped == 1
        await asyncio.sleep(0.05)
        await client.table("agent_commands").insert(command(office)).execute()
        await eventually(lambda: len(events) == 1)


async def test_client_gives_up_for_good_after_max_retries(emulator: SupabaseEmulator) -> None:
    """realtime-py's reconnect loop: the first attempt is immediate, then backoff doubles from
    `initial_backoff`; after `max_retries` failed attempts it stops forever, and no status
    callback reports it (the last one seen is the CHANNEL_ERROR of the drop). Calling
    `realtime.connect()` again brings the errored channels back."""
    async with supabase(emulator, max_retries=3, initial_backoff=0.05) as client:
        statuses: list[RealtimeSubscribeStates] = []
        channel = client.channel("doomed")
        channel.on_postgres_changes(
            "INSERT", schema="public", table="agent_commands", callback=print
        )
        await channel.subscribe(lambda status, error: statuses.append(status))
        await emulator.async_wait_until(lambda s: s.joins == 1)

        emulator.pause_realtime()
        emulator.drop_sockets()
        await emulator.async_wait_until(lambda s: s.connections_refused == 3)
        realtime = client.realtime
        listener = realtime._listen_task
        await eventually(lambda: listener is not None and listener.done())
        assert isinstance(listener.exception(), InvalidStatus)  # died with the last refusal
        assert not realtime.is_connected
        assert channel.state == "errored"

        emulator.resume_realtime()
        await asyncio.sleep(0.5)
        assert emulator.stats().connections_refused == 3  # no fourth attempt, ever
        assert emulator.stats().connections == 1
        assert statuses == [
            RealtimeSubscribeStates.SUBSCRIBED,
            RealtimeSubscribeStates.CHANNEL_ERROR,
        ]

        # what a watchdog can do: connect() again; errored channels rejoin on their own
        await realtime.connect()
        await eventually(lambda: len(statuses) == 3)
        assert statuses[-1] == RealtimeSubscribeStates.SUBSCRIBED and channel.state == "joined"


async def test_event_loss_drops_the_configured_share(emulator: SupabaseEmulator) -> None:
    async with supabase(emulator) as client:
        office = await make_office(client)
        events: list[dict[str, Any]] = []
        channel = client.channel(f"office:{office}")
        channel.on_postgres_changes(
            "INSERT", schema="public", table="agent_commands", callback=events.append
        )
        await channel.subscribe()
        await emulator.async_wait_until(lambda s: s.joins == 1)
        await asyncio.sleep(0.05)
        emulator.set_event_loss(0.25, seed=7)
        total = 400
        await (
            client.table("agent_commands").insert([command(office) for _ in range(total)]).execute()
        )
        stats = await emulator.async_wait_until(
            lambda s: s.events_sent + s.events_dropped == total, timeout=20
        )
        await eventually(lambda: len(events) == stats.events_sent)
        assert 0.15 * total < stats.events_dropped < 0.35 * total
        emulator.set_event_loss(0.0)
        await client.table("agent_commands").insert(command(office)).execute()
        await eventually(lambda: len(events) == stats.events_sent + 1)


async def test_event_delay(emulator: SupabaseEmulator) -> None:
    async with supabase(emulator) as client:
        office = await make_office(client)
        arrivals: list[float] = []
        channel = client.channel(f"office:{office}")
        channel.on_postgres_changes(
            "INSERT",
            schema="public",
            table="agent_commands",
            callback=lambda payload: arrivals.append(time.monotonic()),
        )
        await channel.subscribe()
        await emulator.async_wait_until(lambda s: s.joins == 1)
        await asyncio.sleep(0.05)
        emulator.set_event_delay(0.4)
        started = time.monotonic()
        await client.table("agent_commands").insert(command(office)).execute()
        await eventually(lambda: len(arrivals) == 1)
        assert arrivals[0] - started >= 0.4


async def test_kicked_channel_reports_channel_error_and_rejoins_by_itself(
    emulator: SupabaseEmulator,
) -> None:
    """phx_error on a channel: CHANNEL_ERROR, then realtime-py's rejoin timer (1, 2, 5, 10 s)
    joins again on the same socket; changes in the gap are not delivered."""
    async with supabase(emulator) as client:
        office = await make_office(client)
        events: list[dict[str, Any]] = []
        statuses: list[RealtimeSubscribeStates] = []
        channel = client.channel(f"office:{office}")
        channel.on_postgres_changes(
            "INSERT", schema="public", table="agent_commands", callback=events.append
        )
        await channel.subscribe(lambda status, error: statuses.append(status))
        await emulator.async_wait_until(lambda s: s.joins == 1)
        assert emulator.kick_channels() == 1
        await eventually(lambda: len(statuses) == 2)
        await client.table("agent_commands").insert(command(office)).execute()  # in the gap
        await eventually(lambda: len(statuses) == 3, timeout=5)
        assert statuses == [
            RealtimeSubscribeStates.SUBSCRIBED,
            RealtimeSubscribeStates.CHANNEL_ERROR,
            RealtimeSubscribeStates.SUBSCRIBED,
        ]
        stats = await emulator.async_wait_until(lambda s: s.joins == 2)
        assert stats.connections == 1  # same socket
        await asyncio.sleep(0.05)
        late = command(office)
        await client.table("agent_commands").insert(late).execute()
        await eventually(lambda: len(events) == 1)
        assert events[0]["data"]["record"]["id"] == late["id"]


async def test_frozen_socket_goes_unnoticed_until_dropped(emulator: SupabaseEmulator) -> None:
    """A half-open socket: realtime-py keeps the channel JOINED and reports nothing (only the
    websockets keepalive would notice, after about 50 s); dropping it makes the client rejoin."""
    async with supabase(emulator) as client:
        office = await make_office(client)
        events: list[dict[str, Any]] = []
        statuses: list[RealtimeSubscribeStates] = []
        channel = client.channel(f"office:{office}")
        channel.on_postgres_changes(
            "INSERT", schema="public", table="agent_commands", callback=events.append
        )
        await channel.subscribe(lambda status, error: statuses.append(status))
        await emulator.async_wait_until(lambda s: s.joins == 1)
        assert emulator.freeze_sockets() == 1
        await client.table("agent_commands").insert(command(office)).execute()
        await emulator.async_wait_until(lambda s: s.events_dropped == 1)
        await asyncio.sleep(0.3)
        assert events == [] and channel.state == "joined" and client.realtime.is_connected
        assert statuses == [RealtimeSubscribeStates.SUBSCRIBED]

        emulator.drop_sockets()
        await eventually(lambda: len(statuses) == 3)
        assert statuses[1:] == [
            RealtimeSubscribeStates.CHANNEL_ERROR,
            RealtimeSubscribeStates.SUBSCRIBED,
        ]
        await emulator.async_wait_until(lambda s: s.joins == 2)
        await asyncio.sleep(0.05)
        await client.table("agent_commands").insert(command(office)).execute()
        await eventually(lambda: len(events) == 1)


async def test_exception_in_a_callback_silently_kills_the_listener(
    emulator: SupabaseEmulator,
) -> None:
    """realtime-py runs callbacks inside its listen task: one exception ends that task. The
    socket stays open, heartbeats go on, the channel stays JOINED, no status callback fires,
    and nothing is ever delivered again. Callbacks must never raise."""
    async with supabase(emulator) as client:
        office = await make_office(client)
        seen: list[str] = []
        statuses: list[RealtimeSubscribeStates] = []

        def callback(payload: dict[str, Any]) -> None:
            seen.append(payload["data"]["record"]["id"])
            raise ValueError("a bug in the callback")

        channel = client.channel(f"office:{office}")
        channel.on_postgres_changes(
            "INSERT", schema="public", table="agent_commands", callback=callback
        )
        await channel.subscribe(lambda status, error: statuses.append(status))
        await emulator.async_wait_until(lambda s: s.joins == 1)
        await asyncio.sleep(0.05)
        first, second = command(office), command(office)
        await client.table("agent_commands").insert(first).execute()
        await eventually(lambda: len(seen) == 1)
        listener = client.realtime._listen_task
        await eventually(lambda: listener is not None and listener.done())
        assert isinstance(listener.exception(), ValueError)
        await client.table("agent_commands").insert(second).execute()
        await emulator.async_wait_until(lambda s: s.events_sent == 2)  # the server did send it
        await asyncio.sleep(0.3)
        assert seen == [first["id"]]
        assert client.realtime.is_connected and channel.state == "joined"
        assert statuses == [RealtimeSubscribeStates.SUBSCRIBED]


# -- the wire protocol, without the client ---------------------------------------------------


async def test_phoenix_protocol_on_the_wire(emulator: SupabaseEmulator) -> None:
    url = f"{emulator.realtime_url}?apikey={emulator.anon_key}&vsn=1.0.0"
    async with ws_connect(url) as ws:

        async def send(topic: str, event: str, payload: dict[str, Any], ref: str | None) -> None:
            message = {
                "topic": topic,
                "event": event,
                "payload": payload,
                "ref": ref,
                "join_ref": ref,
            }
            await ws.send(json.dumps(message))

        async def receive() -> dict[str, Any]:
            return json.loads(await asyncio.wait_for(ws.recv(), 5))

        await send("phoenix", "heartbeat", {}, "1")
        assert await receive() == {
            "topic": "phoenix",
            "event": "phx_reply",
            "payload": {"status": "ok", "response": {}},
            "ref": "1",
            "join_ref": None,
        }
        binding = {"event": "*", "schema": "public", "table": "emu_plain", "filter": "n=gt.5"}
        await send("realtime:wire", "phx_join", {"config": {"postgres_changes": [binding]}}, "2")
        reply = await receive()
        assert reply["event"] == "phx_reply" and reply["ref"] == "2"
        assert reply["payload"]["status"] == "ok"
        [echo] = reply["payload"]["response"]["postgres_changes"]
        assert {k: echo[k] for k in binding} == binding and echo["id"] > 0
        system = await receive()
        assert system["event"] == "system" and system["ref"] is None
        assert system["payload"] == {
            "channel": "wire",
            "extension": "postgres_changes",
            "message": "Subscribed to PostgreSQL",
            "status": "ok",
        }
        await send(
            "realtime:wire", "access_token", {"access_token": emulator.service_role_key}, "3"
        )

        with psycopg.connect(emulator.dsn, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO emu_plain (id, office_id, n) VALUES ('w1', 'o', 1), ('w2', 'o', 7)"
            )
        change = await receive()
        assert change["event"] == "postgres_changes" and change["topic"] == "realtime:wire"
        assert change["payload"]["ids"] == [echo["id"]]
        assert change["payload"]["data"]["record"]["id"] == "w2"  # n=1 does not pass n=gt.5

        await send("realtime:elsewhere", "broadcast", {}, "4")
        assert (await receive())["payload"] == {
            "status": "error",
            "response": {"reason": "unmatched topic"},
        }
        await send("realtime:wire", "phx_leave", {}, "5")
        left = await receive()
        assert left["event"] == "phx_reply" and left["payload"]["status"] == "ok"
        assert (await receive())["event"] == "phx_close"

    with pytest.raises(InvalidStatus) as refused:
        async with ws_connect(f"{emulator.realtime_url}?apikey=wrong&vsn=1.0.0"):
            pass
    assert refused.value.response.status_code == 403


async def test_silent_sockets_are_closed_after_the_heartbeat_timeout(database: str) -> None:
    with SupabaseEmulator(database, heartbeat_timeout=1.0) as emu:
        url = f"{emu.realtime_url}?apikey={emu.service_role_key}&vsn=1.0.0"
        async with ws_connect(url) as ws:
            await emu.async_wait_until(lambda s: s.open_sockets == 1)
            started = time.monotonic()
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 5)
            assert 0.5 < time.monotonic() - started < 4
        await emu.async_wait_until(lambda s: s.open_sockets == 0)


def test_wal2json_needs_wal_level_logical(database: str) -> None:
    with psycopg.connect(database) as conn:
        level = conn.execute("SHOW wal_level").fetchone()[0]
    if level == "logical":  # the wal2json source works there (its tests use it)
        with SupabaseEmulator(database, change_source="wal2json") as emu:
            assert emu.wal_level == "logical"
        return
    with pytest.raises(RuntimeError, match="needs wal_level=logical"):
        SupabaseEmulator(database, change_source="wal2json").start()


async def test_change_source_matches_wal_level(emulator: SupabaseEmulator) -> None:
    expected = "wal2json" if emulator.wal_level == "logical" else "triggers"
    assert emulator.change_feed == expected
    async with supabase(emulator) as client:
        await client.table("emu_plain").insert({"id": "c1", "office_id": "o"}).execute()
    await emulator.async_wait_until(lambda s: s.changes_read >= 1)
