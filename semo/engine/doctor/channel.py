"""The doctor's private-channel check: a member joins their office's channel, not another's.

The member signs in (Supabase Auth, password) and joins their office's channel (admitted) and
another office's (refused), as a dashboard would."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
from realtime import AsyncRealtimeClient, RealtimeSubscribeStates

from semo.engine.doctor.checks import Check

NAME = "private channel"
#: a private join, as a dashboard makes it
PRIVATE: Any = {"config": {"private": True}}


async def sign_in(url: str, anon_key: str, email: str, password: str, timeout: float) -> str:
    """The member's access token; ValueError with GoTrue's message when refused."""
    async with httpx.AsyncClient(timeout=timeout) as http:
        answer = await http.post(
            f"{url}/auth/v1/token",
            params={"grant_type": "password"},
            headers={"apikey": anon_key},
            json={"email": email, "password": password},
        )
    if answer.status_code != 200:
        try:
            body = answer.json()
            message = body.get("msg") or body.get("error_description") or body.get("message")
        except ValueError:
            message = None
        raise ValueError(f"sign-in of {email} refused ({answer.status_code}: {message})")
    token = answer.json().get("access_token")
    if not isinstance(token, str):
        raise ValueError(f"sign-in of {email} answered no access token")
    return token


async def join(url: str, anon_key: str, token: str, topic: str, timeout: float) -> str:
    """The state a private join of `topic` with the user's token ends in (SUBSCRIBED when
    admitted), or "TIMED_OUT"."""
    realtime_url = url.replace("http", "ws", 1) + "/realtime/v1"
    rt = AsyncRealtimeClient(realtime_url, token=anon_key, auto_reconnect=False, max_retries=1)
    done: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    def on_state(state: RealtimeSubscribeStates, _error: Exception | None) -> None:
        if not done.done():
            done.set_result(state.value)

    try:
        await asyncio.wait_for(rt.connect(), timeout)
        await rt.set_auth(token)
        channel = rt.channel(topic, PRIVATE)
        await channel.subscribe(on_state)
        try:
            return await asyncio.wait_for(asyncio.shield(done), timeout)
        except TimeoutError:
            return "TIMED_OUT"
    finally:
        await rt.close()


async def private_channel(
    url: str, anon_key: str, office_id: str, email: str, password: str, timeout: float
) -> Check:
    """Pass when the member is admitted to `office:{office_id}` and refused another office's."""
    try:
        token = await sign_in(url, anon_key, email, password, timeout)
    except (ValueError, httpx.HTTPError) as error:
        return Check(NAME, False, f"{error}. Fix: check --member and SEMO_DOCTOR_PASSWORD")
    own = await join(url, anon_key, token, f"office:{office_id}", timeout)
    other = await join(url, anon_key, token, f"office:{uuid.uuid4()}", timeout)
    subscribed = RealtimeSubscribeStates.SUBSCRIBED.value
    if other == subscribed:
        return Check(
            NAME,
            False,
            f"{email} joined another office's channel: every signed-in user can read every"
            " office's broadcasts. Fix: turn off 'Allow public access' (Realtime settings) and"
            " keep only semo_members_receive among realtime.messages' SELECT policies",
        )
    if own != subscribed:
        return Check(
            NAME,
            False,
            f"{email} was not admitted to office:{office_id} ({own}): not a member of the office"
            " (semo office members add), or semo_members_receive is missing",
        )
    return Check(NAME, True, f"{email} joins office:{office_id}; another office's join is refused")
