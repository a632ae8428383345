"""The emulator is as strict as Supabase: requests and Realtime events run as the JWT's role
with RLS, private channels are checked against realtime.messages policies, vsn=2.0.0 is
spoken, and users sign in through a minimal /auth/v1 (a semo database migrated with 0007)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import psycopg
import pytest
from realtime import RealtimeSubscribeStates
from supabase import AsyncClient
from websockets.asyncio.client import connect as ws_connect

from semo.engine.store.migrate import migrate
from tests.store.conftest import ADMIN_DSN, admin_connection_check
from tests.support.supabase_client import supabase
from tests.support.supabase_emulator import SupabaseEmulator, temporary_database
from tests.support.waiting import eventually

PASSWORD = "correct horse battery"


@pytest.fixture
async def emu() -> AsyncIterator[tuple[SupabaseEmulator, dict[str, str]]]:
    """An emulator over a migrated Supabase-shaped database with offices A and B, users
    op_a (operator of A), view_a (viewer of A), op_b (operator of B), stranger."""
    await admin_connection_check()
    with contextlib.ExitStack() as stack:
        dsn = await asyncio.to_thread(stack.enter_context, temporary_database(ADMIN_DSN))
        await migrate(dsn)
        async with SupabaseEmulator(dsn) as emulator:
            ids = {"A": str(uuid.uuid4()), "B": str(uuid.uuid4())}
            for name in ("op_a", "view_a", "op_b", "stranger"):
                ids[name] = await asyncio.to_thread(
                    emulator.create_user, f"{name}@example.test", PASSWORD
                )
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
                await conn.execute(
                    "insert into offices (id, name) values (%s, 'A'), (%s, 'B')",
                    (ids["A"], ids["B"]),
                )
                await conn.execute(
                    "insert into office_members (office_id, user_id, role) values"
                    " (%s, %s, 'operator'), (%s, %s, 'viewer'), (%s, %s, 'operator')",
                    (ids["A"], ids["op_a"], ids["A"], ids["view_a"], ids["B"], ids["op_b"]),
                )
            yield emulator, ids


async def sign_in(
    emulator: SupabaseEmulator, name: str, password: str = PASSWORD
) -> httpx.Response:
    async with httpx.AsyncClient() as http:
        return await http.post(
            f"{emulator.url}/auth/v1/token",
            params={"grant_type": "password"},
            json={"email": f"{name}@example.test", "password": password},
            headers={"apikey": emulator.anon_key},
        )


async def token_of(emulator: SupabaseEmulator, name: str) -> str:
    response = await sign_in(emulator, name)
    assert response.status_code == 200, response.text
    return str(response.json()["access_token"])


async def test_password_sign_in_gives_a_token_for_the_user(
    emu: tuple[SupabaseEmulator, dict[str, str]],
) -> None:
    emulator, ids = emu
    response = await sign_in(emulator, "op_a")
    assert response.status_code == 200
    session = response.json()
    assert session["token_type"] == "bearer" and session["user"]["id"] == ids["op_a"]
    async with httpx.AsyncClient() as http:
        me = await http.get(
            f"{emulator.url}/auth/v1/user",
            headers={
                "apikey": emulator.anon_key,
                "Authorization": f"Bearer {session['access_token']}",
            },
        )
        assert me.status_code == 200 and me.json()["email"] == "op_a@example.test"
        refreshed = await http.post(
            f"{emulator.url}/auth/v1/token",
            params={"grant_type": "refresh_token"},
            json={"refresh_token": session["refresh_token"]},
            headers={"apikey": emulator.anon_key},
        )
        assert refreshed.status_code == 200 and refreshed.json()["user"]["id"] == ids["op_a"]
    wrong = await sign_in(emulator, "op_a", "not the password")
    assert wrong.status_code == 400 and wrong.json()["error_code"] == "invalid_credentials"
    nobody = await sign_in(emulator, "nobody")
    assert nobody.status_code == 400 and nobody.json()["msg"] == "Invalid login credentials"


async def test_rest_runs_as_the_users_role(emu: tuple[SupabaseEmulator, dict[str, str]]) -> None:
    emulator, ids = emu
    async with httpx.AsyncClient(base_url=f"{emulator.url}/rest/v1") as http:

        async def offices(token: str | None) -> httpx.Response:
            headers = {"apikey": emulator.anon_key}
            if token:
                headers["Authorization"] = f"Bearer {token}"
            return await http.get("/offices", params={"select": "name"}, headers=headers)

        assert (await offices(await token_of(emulator, "op_a"))).json() == [{"name": "A"}]
        assert (await offices(await token_of(emulator, "view_a"))).json() == [{"name": "A"}]
        assert (await offices(await token_of(emulator, "op_b"))).json() == [{"name": "B"}]
        assert (await offices(await token_of(emulator, "stranger"))).json() == []
        anon = await offices(None)
        assert anon.status_code == 401 and anon.json()["code"] == "42501"
        # a forged token (signed with another secret) is refused before the database
        forged = await offices(token_of_other_secret(ids["op_a"]))
        assert forged.status_code == 401 and forged.json()["code"] == "PGRST301"


def token_of_other_secret(user_id: str) -> str:
    from tests.support.supabase_emulator import sign_jwt

    return sign_jwt({"role": "authenticated", "sub": user_id}, "another secret")


@contextlib.asynccontextmanager
async def realtime_client(
    emulator: SupabaseEmulator, token: str | None
) -> AsyncIterator[AsyncClient]:
    async with supabase(emulator, emulator.anon_key) as client:
        if token is not None:
            await client.realtime.set_auth(token)
        yield client


async def test_changes_reach_only_subscribers_who_can_select_the_row(
    emu: tuple[SupabaseEmulator, dict[str, str]],
) -> None:
    emulator, ids = emu
    received: dict[str, list[Any]] = {}
    async with contextlib.AsyncExitStack() as stack:
        for who in ("op_a", "view_a", "op_b", "stranger", "anon"):
            token = None if who == "anon" else await token_of(emulator, who)
            client = await stack.enter_async_context(realtime_client(emulator, token))
            got: list[Any] = []
            received[who] = got
            ready: list[Any] = []
            channel = client.channel(f"watch-{who}")
            channel.on_postgres_changes(
                "INSERT",  # type: ignore[arg-type]
                schema="public",
                table="agent_commands",
                callback=got.append,
            )
            channel.on_system(ready.append)
            await channel.subscribe()
            await eventually(lambda ready=ready: bool(ready))
        async with await psycopg.AsyncConnection.connect(emulator.dsn, autocommit=True) as conn:
            for office in ("A", "B"):
                await conn.execute(
                    "insert into agent_commands (office_id, command_type) values (%s, 'run_job')",
                    (ids[office],),
                )
        await eventually(lambda: len(received["op_a"]) == 1 and len(received["op_b"]) == 1)
        await asyncio.sleep(0.5)  # nothing else arrives for anybody
        offices = {
            who: [e["data"]["record"]["office_id"] for e in got] for who, got in received.items()
        }
        assert offices == {
            "op_a": [ids["A"]],
            "view_a": [ids["A"]],
            "op_b": [ids["B"]],
            "stranger": [],
            "anon": [],
        }


async def test_private_channels_admit_members_only(
    emu: tuple[SupabaseEmulator, dict[str, str]],
) -> None:
    emulator, ids = emu
    topic = f"office:{ids['A']}"
    outcome: dict[str, list[Any]] = {}
    heard: dict[str, list[Any]] = {}
    async with contextlib.AsyncExitStack() as stack:
        for who in ("view_a", "op_b", "stranger", "anon"):
            token = None if who == "anon" else await token_of(emulator, who)
            client = await stack.enter_async_context(realtime_client(emulator, token))
            states: list[Any] = []
            got: list[Any] = []
            outcome[who], heard[who] = states, got
            channel = client.channel(topic, {"config": {"private": True}})
            channel.on_broadcast("semo", got.append)
            await channel.subscribe(lambda state, error=None, states=states: states.append(state))
        await eventually(lambda: all(outcome.values()))
        assert outcome["view_a"][0] == RealtimeSubscribeStates.SUBSCRIBED
        for who in ("op_b", "stranger", "anon"):
            assert outcome[who][0] == RealtimeSubscribeStates.CHANNEL_ERROR, who
        # a server (the service role) broadcasts through the REST API; a member hears it
        async with httpx.AsyncClient() as http:
            for key, text in (
                (emulator.service_role_key, "from the engine"),
                (emulator.anon_key, "forged"),
            ):
                sent = await http.post(
                    f"{emulator.url}/realtime/v1/api/broadcast",
                    json={
                        "messages": [
                            {
                                "topic": topic,
                                "event": "semo",
                                "payload": {"text": text},
                                "private": True,
                            }
                        ]
                    },
                    headers={"apikey": key, "Authorization": f"Bearer {key}"},
                )
                assert sent.status_code == 202
        await eventually(lambda: len(heard["view_a"]) >= 1)
        await asyncio.sleep(0.3)
        assert [m["payload"]["text"] for m in heard["view_a"]] == ["from the engine"]
        assert all(not heard[who] for who in ("op_b", "stranger", "anon"))


async def test_a_viewer_cannot_send_on_the_private_channel(
    emu: tuple[SupabaseEmulator, dict[str, str]],
) -> None:
    emulator, ids = emu
    topic = f"office:{ids['A']}"
    async with (
        realtime_client(emulator, await token_of(emulator, "op_a")) as listener,
        realtime_client(emulator, await token_of(emulator, "view_a")) as viewer,
    ):
        got: list[Any] = []
        listening = listener.channel(topic, {"config": {"private": True}})
        listening.on_broadcast("semo", got.append)
        states: list[Any] = []
        await listening.subscribe(lambda state, error=None: states.append(state))
        sending = viewer.channel(topic, {"config": {"private": True}})
        await sending.subscribe(lambda state, error=None: states.append(state))
        await eventually(lambda: states.count(RealtimeSubscribeStates.SUBSCRIBED) == 2)
        await sending.send_broadcast("semo", {"text": "forged by a viewer"})
        await asyncio.sleep(0.5)
        assert got == []


async def test_vsn_2_0_0_speaks_json_arrays(emu: tuple[SupabaseEmulator, dict[str, str]]) -> None:
    emulator, ids = emu
    token = await token_of(emulator, "view_a")
    url = f"{emulator.realtime_url}?apikey={emulator.anon_key}&vsn=2.0.0"
    async with ws_connect(url) as socket:
        await socket.send(json.dumps([None, "1", "phoenix", "heartbeat", {}]))
        assert json.loads(await socket.recv())[:4] == [None, "1", "phoenix", "phx_reply"]
        join = {"config": {"private": True}, "access_token": token}
        await socket.send(json.dumps(["2", "2", f"realtime:office:{ids['A']}", "phx_join", join]))
        reply = json.loads(await socket.recv())
        assert reply[:4] == ["2", "2", f"realtime:office:{ids['A']}", "phx_reply"]
        assert reply[4]["status"] == "ok"
        refused = ["3", "3", f"realtime:office:{ids['B']}", "phx_join", join]
        await socket.send(json.dumps(refused))
        reply = json.loads(await socket.recv())
        assert reply[4]["status"] == "error" and "Unauthorized" in reply[4]["response"]["reason"]
