"""One suite for every Store backend (see conftest.py: each test runs on sqlite, postgres and
supabase through the emulator).

Latency is not asserted here (budgets live in bench/); wake-ups are checked to arrive, with
generous timeouts.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from semo.engine.office.operations import answer_question
from semo.engine.store._shared import LEGACY_GRACE_SECONDS, MAX_ATTEMPTS
from semo.engine.store.base import NotFound, Store, StoreConflict, StoreError, StoreUnavailable
from semo.engine.store.models import (
    MAX_PAYLOAD_BYTES,
    Agent,
    AgentCommand,
    AgentInvocation,
    AgentResult,
    AgentSession,
    EngineEnded,
    EngineHeartbeat,
    InvalidCommand,
    Job,
    JobEntry,
    Office,
    UserQuestion,
)
from tests.store.conftest import ADMIN_DSN, Stores

REPO = Path(__file__).resolve().parents[2]
UNICODE = "한국어 — émoji 🚀 ZWJ 👩‍💻 quotes \"'\\ ` and \u2028 line sep, RTL שלום, \U0001f600"


async def office(store: Store, name: str = "office") -> Office:
    return await store.create_office(Office(name=name))


# -- offices and agents ------------------------------------------------------------------------


async def test_offices(store: Store) -> None:
    first = await store.create_office(Office(name="first", repository="git@x:y.git"))
    second = await store.create_office(Office(name="second 사무실"))
    assert await store.get_office(first.id) == first
    assert [o.id for o in await store.list_offices()] == [first.id, second.id]
    with pytest.raises(StoreConflict):
        await store.create_office(Office(id=first.id, name="again"))
    with pytest.raises(NotFound):
        await store.get_office("no-such-office")


async def test_agents(store: Store) -> None:
    o = await office(store)
    agent = Agent(
        office_id=o.id,
        name="Backend 개발자",
        role="backend",
        prompt=UNICODE,
        scope_patterns=["src/**", "테스트/*"],
        core_skills=["python"],
        command=["claude", "--model", "opus"],
    )
    stored = await store.upsert_agent(agent)
    assert stored == agent
    assert await store.get_agent(agent.id) == agent
    changed = await store.upsert_agent(
        agent.model_copy(update={"prompt": "new", "core_skills": []})
    )
    assert changed.prompt == "new" and changed.core_skills == []
    assert changed.created_at == agent.created_at
    other = await store.upsert_agent(Agent(office_id=o.id, name="Front", role="frontend"))
    assert [a.id for a in await store.list_agents(o.id)] == [agent.id, other.id]
    assert await store.list_agents("no-such-office") == []
    with pytest.raises(NotFound):
        await store.get_agent("nobody")
    with pytest.raises(NotFound, match="office"):
        await store.upsert_agent(Agent(office_id="no-such-office", name="x", role="x"))


# -- sessions ----------------------------------------------------------------------------------


async def test_sessions(store: Store) -> None:
    o = await office(store)
    one = await store.upsert_session(AgentSession(office_id=o.id, agent_id="a1", pid=123))
    two = await store.upsert_session(
        AgentSession(office_id=o.id, agent_id="a2", status="ready", engine_id="e1")
    )
    assert await store.get_session(one.session_id) == one
    again = await store.upsert_session(one.model_copy(update={"status": "ready", "pid": 456}))
    assert again.status == "ready" and again.pid == 456 and again.created_at == one.created_at

    ended = await store.set_session_status(two.session_id, "terminated", reason="operator")
    assert ended.status == "terminated"
    assert ended.end_reason == "operator" and ended.ended_at is not None
    assert ended.last_activity_at >= two.last_activity_at
    assert [s.session_id for s in await store.list_sessions(o.id)] == [one.session_id]
    listed = await store.list_sessions(o.id, include_terminated=True)
    assert [s.session_id for s in listed] == [one.session_id, two.session_id]

    busy = await store.set_session_status(one.session_id, "executing")
    assert busy.status == "executing" and busy.ended_at is None
    with pytest.raises(StoreConflict, match="terminated"):
        await store.set_session_status(two.session_id, "ready")
    with pytest.raises(NotFound):
        await store.set_session_status("no-such-session", "ready")
    with pytest.raises(NotFound):
        await store.get_session("no-such-session")
    with pytest.raises(StoreError, match="unknown session status"):
        await store.set_session_status(one.session_id, "sleeping")  # type: ignore[arg-type]
    with pytest.raises(NotFound, match="office"):
        await store.upsert_session(AgentSession(office_id="no-such-office", agent_id="a"))


# -- commands ----------------------------------------------------------------------------------


async def test_insert_get_and_list_commands(store: Store) -> None:
    o = await office(store)
    first = await store.insert_command(o.id, "create_session", {"role": "backend"})
    second = await store.insert_command(o.id, "send_prompt", {"prompt": UNICODE}, session_id="s")
    third = await store.insert_command(o.id, "get_output", session_id="s")
    assert first.status == "pending" and first.attempts == 0 and first.claimed_by is None
    assert third.payload == {}
    assert await store.get_command(second.id) == second
    assert second.payload == {"prompt": UNICODE}
    # newest first
    assert [c.id for c in await store.list_commands(o.id)] == [third.id, second.id, first.id]
    assert [c.id for c in await store.list_commands(o.id, limit=2)] == [third.id, second.id]
    claimed = await store.claim_next_command(o.id, "e1")
    assert claimed is not None and claimed.id == first.id
    assert [c.id for c in await store.list_commands(o.id, status="processing")] == [first.id]
    pending = await store.list_commands(o.id, status="pending")
    assert [c.id for c in pending] == [third.id, second.id]
    assert await store.list_commands("no-such-office") == []
    with pytest.raises(NotFound):
        await store.get_command("no-such-command")


@pytest.mark.parametrize(
    ("command_type", "payload", "session_id", "message"),
    [
        ("launch_missiles", {}, None, "unknown command type"),
        ("send_prompt", {"prompt": "hi"}, None, "needs a session_id"),
        ("send_prompt", {}, "s", "prompt"),
        ("send_prompt", {"prompt": "hi", "colour": "red"}, "s", "colour"),
        ("send_prompt", {"prompt": "hi", "timeout": -1}, "s", "timeout"),
        ("create_session", {}, None, "agent_id or role"),
        ("run_job", {"job": 1}, None, "job_id"),
        ("get_output", ["not", "an", "object"], "s", "JSON object"),
        ("send_text", {"text": "x" * (MAX_PAYLOAD_BYTES + 1)}, "s", "limit"),
    ],
)
async def test_insert_command_rejects_bad_input(
    store: Store, command_type: str, payload: object, session_id: str | None, message: str
) -> None:
    o = await office(store)
    with pytest.raises(InvalidCommand, match=message):
        await store.insert_command(o.id, command_type, payload, session_id=session_id)  # type: ignore[arg-type]
    assert await store.list_commands(o.id) == []


async def test_insert_command_for_missing_office(store: Store) -> None:
    with pytest.raises(NotFound, match="office no-such-office"):
        await store.insert_command("no-such-office", "get_output", session_id="s")


async def test_claim_oldest_first_with_lease(store: Store) -> None:
    o = await office(store)
    other = await office(store, "other")
    ids = [
        (await store.insert_command(o.id, "get_output", session_id=f"s{i}")).id for i in range(3)
    ]
    await store.insert_command(other.id, "get_output", session_id="x")
    before = datetime.now(UTC)
    claimed = await store.claim_next_command(o.id, "engine-1", lease_seconds=60)
    assert claimed is not None and claimed.id == ids[0]
    assert claimed.status == "processing" and claimed.claimed_by == "engine-1"
    assert claimed.attempts == 1
    assert claimed.lease_expires_at is not None
    assert before + timedelta(seconds=50) < claimed.lease_expires_at
    assert claimed.lease_expires_at < before + timedelta(seconds=70)
    assert await store.get_command(ids[0]) == claimed
    assert [(await store.claim_next_command(o.id, "engine-1")).id for _ in range(2)] == ids[1:]  # type: ignore[union-attr]
    assert await store.claim_next_command(o.id, "engine-1") is None
    assert await store.claim_next_command("no-such-office", "engine-1") is None
    with pytest.raises(ValueError, match="lease_seconds"):
        await store.claim_next_command(o.id, "engine-1", lease_seconds=0)


async def test_concurrent_claimers_exactly_one_wins(stores: Stores) -> None:
    a, b = await stores.new(), await stores.new()
    o = await office(a)
    for _ in range(5):
        command = await a.insert_command(o.id, "get_output", session_id="s")
        won = await asyncio.gather(
            a.claim_next_command(o.id, "engine-a"), b.claim_next_command(o.id, "engine-b")
        )
        assert sorted(w is not None for w in won) == [False, True]
        winner = next(w for w in won if w is not None)
        assert winner.id == command.id


async def test_two_engines_drain_a_queue_exactly_once(stores: Stores) -> None:
    engines = [await stores.new() for _ in range(3)]
    o = await office(engines[0])
    inserted = {
        (await engines[0].insert_command(o.id, "get_output", session_id=f"s{i}")).id
        for i in range(30)
    }
    claims: dict[str, list[str]] = {}

    async def drain(store: Store, name: str) -> None:
        while (command := await store.claim_next_command(o.id, name)) is not None:
            claims.setdefault(command.id, []).append(name)
            await store.complete_command(command.id, name, success=True, result={"by": name})

    await asyncio.gather(*(drain(s, f"engine-{i}") for i, s in enumerate(engines)))
    assert set(claims) == inserted
    assert all(len(names) == 1 for names in claims.values())
    for command_id, names in claims.items():
        result = await engines[1].get_result(command_id)
        assert result is not None and result.result == {"by": names[0]}


# -- sessions and their engines ------------------------------------------------------------------


#: the heartbeat limit the tests' engines write (an engine is dead that long after its last beat)
DEAD_AFTER = 60.0


async def beat(store: Store, office_id: str, engine_id: str, **kw: bool) -> EngineHeartbeat:
    return await store.record_heartbeat(office_id, engine_id, dead_after=DEAD_AFTER, **kw)


async def live_session(
    store: Store, office_id: str, engine_id: str | None, *, alive: bool = True
) -> AgentSession:
    """A ready session run by `engine_id`, which has just beaten (unless not `alive`)."""
    if engine_id is not None and alive:
        await beat(store, office_id, engine_id)
    return await store.upsert_session(
        AgentSession(office_id=office_id, agent_id="a", engine_id=engine_id, status="ready")
    )


def last_seen(row: EngineHeartbeat) -> str:
    return row.last_seen.astimezone(UTC).isoformat()


async def test_a_session_command_goes_only_to_the_engine_that_runs_the_session(
    stores: Stores,
) -> None:
    a, b = await stores.new(), await stores.new()
    o = await office(a)
    mine = await live_session(a, o.id, "engine-a")
    first = await a.insert_command(o.id, "get_output", session_id=mine.session_id)
    office_level = await a.insert_command(o.id, "create_session", {"role": "BE"})
    second = await a.insert_command(o.id, "send_text", {"text": "x"}, session_id=mine.session_id)

    # engine B skips A's session's commands, older or not, and takes the office-level one
    taken = await b.claim_next_command(o.id, "engine-b")
    assert taken is not None and taken.id == office_level.id and taken.claimed_by == "engine-b"
    assert await b.claim_next_command(o.id, "engine-b") is None
    assert (await b.get_command(first.id)).status == "pending"
    # engine A gets them, oldest first
    assert (await a.claim_next_command(o.id, "engine-a")).id == first.id  # type: ignore[union-attr]
    assert (await a.claim_next_command(o.id, "engine-a")).id == second.id  # type: ignore[union-attr]
    assert await a.claim_next_command(o.id, "engine-a") is None

    # a command without a session is anybody's; so is one whose session the store does not
    # know, or that no engine is recorded to run (the dispatcher then says what it has)
    nobodys = await live_session(a, o.id, None)
    for engine, store in (("engine-a", a), ("engine-b", b)):
        job = await store.insert_command(o.id, "run_job", {"job_id": "j"})
        assert (await store.claim_next_command(o.id, engine)).id == job.id  # type: ignore[union-attr]
        for session_id in ("unknown-session", nobodys.session_id):
            command = await store.insert_command(o.id, "get_output", session_id=session_id)
            assert (await store.claim_next_command(o.id, engine)).id == command.id  # type: ignore[union-attr]


async def test_a_command_for_an_ended_session_fails_at_claim(store: Store) -> None:
    o = await office(store)
    gone = await live_session(store, o.id, "engine-a")
    orphan = await store.insert_command(
        o.id, "send_prompt", {"prompt": "hi"}, session_id=gone.session_id
    )
    follower = await store.insert_command(o.id, "create_session", {"role": "BE"})
    await store.set_session_status(gone.session_id, "terminated", reason="operator ended it")

    # any engine meets it, fails it with a reason, and claims the next one instead
    claimed = await store.claim_next_command(o.id, "engine-b")
    assert claimed is not None and claimed.id == follower.id
    failed = await store.get_command(orphan.id)
    assert failed.status == "failed" and failed.lease_expires_at is None
    result = await store.get_result(orphan.id)
    assert result is not None and not result.success and result.result is None
    assert result.error == (
        f"session {gone.session_id} has ended: operator ended it; the command was not run"
    )
    assert await store.claim_next_command(o.id, "engine-a") is None


async def test_two_engines_drain_their_own_sessions_commands(stores: Stores) -> None:
    engines = {name: await stores.new() for name in ("engine-0", "engine-1", "engine-2")}
    o = await office(engines["engine-0"])
    owner_of: dict[str, str] = {}
    sessions = {
        name: (await live_session(store, o.id, name)).session_id for name, store in engines.items()
    }
    for index in range(30):
        name = f"engine-{index % 3}"
        session_id = sessions[name] if index % 5 else None  # every fifth: office-level
        command = await engines[name].insert_command(
            o.id,
            "run_job" if session_id is None else "get_output",
            {"job_id": "j"} if session_id is None else {},
            session_id=session_id,
        )
        owner_of[command.id] = name if session_id else ""
    claims: dict[str, list[str]] = {}

    async def drain(name: str) -> None:
        store = engines[name]
        while (command := await store.claim_next_command(o.id, name)) is not None:
            claims.setdefault(command.id, []).append(name)
            await store.complete_command(command.id, name, success=True)

    await asyncio.gather(*(drain(name) for name in engines))
    assert set(claims) == set(owner_of)
    assert all(len(names) == 1 for names in claims.values())
    for command_id, owner in owner_of.items():
        if owner:
            assert claims[command_id] == [owner]


# -- engines and their heartbeats -------------------------------------------------------------


async def test_heartbeats(store: Store) -> None:
    o = await office(store)
    first = await beat(store, o.id, "engine-a", starting=True)
    assert (first.office_id, first.engine_id, first.status) == (o.id, "engine-a", "running")
    assert first.alive and first.stopped_at is None
    assert first.started_at == first.last_seen
    assert first.alive_until == first.last_seen + timedelta(seconds=DEAD_AFTER)

    again = await store.record_heartbeat(o.id, "engine-a", dead_after=5)
    assert again.alive and again.started_at == first.started_at
    assert again.last_seen >= first.last_seen
    assert again.alive_until == again.last_seen + timedelta(seconds=5)
    other = await beat(store, o.id, "engine-b", starting=True)
    assert [e.engine_id for e in await store.list_engines(o.id)] == ["engine-a", "engine-b"]

    # a clean stop: no longer alive; a new start makes it running again
    stopped = await store.mark_engine_stopped(o.id, "engine-b")
    assert stopped.status == "stopped" and not stopped.alive
    assert stopped.stopped_at is not None and stopped.stopped_at >= other.last_seen
    assert stopped.started_at == other.started_at
    listed = {e.engine_id: e for e in await store.list_engines(o.id)}
    assert (listed["engine-a"].alive, listed["engine-b"].alive) == (True, False)
    assert listed["engine-b"] == stopped
    restarted = await beat(store, o.id, "engine-b", starting=True)
    assert restarted.status == "running" and restarted.alive and restarted.stopped_at is None
    assert restarted.started_at >= stopped.stopped_at

    # the same engine id in another office is another row
    elsewhere = await office(store, "elsewhere")
    await beat(store, elsewhere.id, "engine-a")
    assert [e.engine_id for e in await store.list_engines(elsewhere.id)] == ["engine-a"]
    assert len(await store.list_engines(o.id)) == 2


async def test_heartbeat_bad_input(store: Store) -> None:
    o = await office(store)
    with pytest.raises(NotFound, match="office no-such-office not found"):
        await beat(store, "no-such-office", "engine-a")
    with pytest.raises(NotFound, match="engine engine-a has no heartbeat in office"):
        await store.mark_engine_stopped(o.id, "engine-a")
    await beat(store, o.id, "engine-a")
    with pytest.raises(NotFound, match="has no heartbeat in office no-such-office"):
        await store.mark_engine_stopped("no-such-office", "engine-a")
    with pytest.raises(ValueError, match="engine id"):
        await beat(store, o.id, "")
    for limit in (0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="dead_after must be positive"):
            await store.record_heartbeat(o.id, "engine-a", dead_after=limit)
    with pytest.raises(ValueError, match="dead_for"):
        await store.forget_engines(o.id, dead_for=-1)
    assert await store.list_engines("no-such-office") == []
    assert await store.forget_engines("no-such-office", dead_for=0) == 0
    assert [e.engine_id for e in await store.list_engines(o.id)] == ["engine-a"]


async def test_an_engine_whose_heartbeat_is_older_than_its_limit_is_not_alive(
    stores: Stores,
) -> None:
    store = await stores.new()
    o = await office(store)
    await beat(store, o.id, "engine-a")
    await stores.age_heartbeat(o.id, "engine-a", DEAD_AFTER / 2)
    [half] = await store.list_engines(o.id)
    assert half.alive
    await stores.age_heartbeat(o.id, "engine-a", DEAD_AFTER)
    [late] = await store.list_engines(o.id)
    assert not late.alive and late.status == "running"
    assert (await beat(store, o.id, "engine-a")).alive  # beating again brings it back


async def test_forget_engines(stores: Stores) -> None:
    store = await stores.new()
    o = await office(store)
    for engine in ("alive", "stopped", "silent", "long-silent", "long-stopped"):
        await beat(store, o.id, engine)
    for engine in ("stopped", "long-stopped"):
        await store.mark_engine_stopped(o.id, engine)
    await stores.age_heartbeat(o.id, "silent", DEAD_AFTER + 10)
    await stores.age_heartbeat(o.id, "long-silent", DEAD_AFTER + 7200)
    await stores.age_heartbeat(o.id, "long-stopped", 7200)

    assert await store.forget_engines(o.id, dead_for=3600) == 2
    left = {e.engine_id for e in await store.list_engines(o.id)}
    assert left == {"alive", "stopped", "silent"}
    assert await store.forget_engines(o.id, dead_for=0) == 2  # every dead one
    assert [e.engine_id for e in await store.list_engines(o.id)] == ["alive"]


async def test_an_alive_engine_keeps_its_sessions_commands_and_a_silent_one_loses_them(
    stores: Stores,
) -> None:
    a, b = await stores.new(), await stores.new()
    o = await office(a)
    session = await live_session(a, o.id, "engine-a")
    first = await a.insert_command(
        o.id, "send_prompt", {"prompt": "hi"}, session_id=session.session_id
    )

    # a fresh heartbeat: engine B leaves the command to engine A
    await stores.age_heartbeat(o.id, "engine-a", DEAD_AFTER - 10)
    assert await b.claim_next_command(o.id, "engine-b") is None
    assert (await a.get_command(first.id)).status == "pending"

    # older than its limit: B claims the command and fails it, saying why; it never runs
    await stores.age_heartbeat(o.id, "engine-a", 20)
    [silent] = await a.list_engines(o.id)
    assert not silent.alive
    follower = await a.insert_command(o.id, "create_session", {"role": "BE"})
    claimed = await b.claim_next_command(o.id, "engine-b")
    assert claimed is not None and claimed.id == follower.id
    failed = await b.get_command(first.id)
    assert (failed.status, failed.claimed_by, failed.lease_expires_at) == (
        "failed",
        "engine-b",
        None,
    )
    result = await b.get_result(first.id)
    assert result is not None and not result.success and result.result is None
    assert result.error == (
        f"session {session.session_id}'s engine engine-a stopped answering "
        f"(last seen {last_seen(silent)}); the command was not run"
    )
    # the session itself is left to the periodic pass (engine.reconcile.end_silent_engines)
    assert (await b.get_session(session.session_id)).status == "ready"

    # the engine itself, still running after all, claims its own session's commands
    mine = await a.insert_command(o.id, "get_output", session_id=session.session_id)
    assert (await a.claim_next_command(o.id, "engine-a")).id == mine.id  # type: ignore[union-attr]
    # once it beats again, its sessions are its own again
    await beat(a, o.id, "engine-a")
    again = await a.insert_command(o.id, "get_output", session_id=session.session_id)
    assert await b.claim_next_command(o.id, "engine-b") is None
    assert (await a.get_command(again.id)).status == "pending"


async def test_a_supabase_claim_is_one_request_that_leaves_nothing_held(
    supabase_stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim and the failing of what it meets for an ended session or an engine that is not
    alive are one request (`semo_claim_next`): when the network goes away right after it, no
    command is left claimed by an engine that never ran it (nor handed back half-way)."""
    a, b = await supabase_stores.new(), await supabase_stores.new()
    o = await office(a)
    ended = await live_session(a, o.id, "engine-a")
    await a.set_session_status(ended.session_id, "terminated", reason="operator ended it")
    silent = await live_session(a, o.id, "engine-s")
    await supabase_stores.age_heartbeat(o.id, "engine-s", DEAD_AFTER + 1)
    commands = [
        await a.insert_command(o.id, "get_output", session_id=s.session_id) for s in (ended, silent)
    ]
    run = b._run  # type: ignore[attr-defined]
    requests: list[object] = []

    async def cut_after_the_first(build: object, **kw: object) -> object:
        requests.append(build)
        if len(requests) > 1:
            raise StoreUnavailable("cannot reach the emulator: the network went away")
        return await run(build, **kw)

    monkeypatch.setattr(b, "_run", cut_after_the_first)
    assert await b.claim_next_command(o.id, "engine-b") is None
    assert len(requests) == 1
    monkeypatch.undo()
    rows = [await a.get_command(c.id) for c in commands]
    assert [(r.status, r.claimed_by, r.lease_expires_at) for r in rows] == [
        ("failed", "engine-b", None),
        ("failed", "engine-b", None),
    ]
    errors = [(await a.get_result(c.id)).error for c in commands]  # type: ignore[union-attr]
    assert errors[0] == (
        f"session {ended.session_id} has ended: operator ended it; the command was not run"
    )
    assert errors[1] is not None and errors[1].startswith(
        f"session {silent.session_id}'s engine engine-s stopped answering (last seen "
    )


async def test_commands_of_a_stopped_engine_or_one_that_never_beat_fail_at_claim(
    store: Store,
) -> None:
    o = await office(store)
    stopped_session = await live_session(store, o.id, "engine-stopped")
    stopped = await store.mark_engine_stopped(o.id, "engine-stopped")
    ghost_session = await live_session(store, o.id, "engine-ghost", alive=False)
    commands = [
        await store.insert_command(o.id, "send_text", {"text": "x"}, session_id=s.session_id)
        for s in (stopped_session, ghost_session)
    ]

    assert await store.claim_next_command(o.id, "engine-b") is None
    errors = [(await store.get_result(c.id)).error for c in commands]  # type: ignore[union-attr]
    assert stopped.stopped_at is not None
    assert errors == [
        f"session {stopped_session.session_id}'s engine engine-stopped stopped at "
        f"{stopped.stopped_at.astimezone(UTC).isoformat()}; the command was not run",
        f"session {ghost_session.session_id}'s engine engine-ghost never recorded a heartbeat "
        "(an engine of an older semo, or a row written by hand); the command was not run",
    ]
    assert [(await store.get_command(c.id)).status for c in commands] == ["failed", "failed"]


async def test_an_engine_without_a_heartbeat_row_is_alive_for_an_hour_after_the_upgrade(
    stores: Stores,
) -> None:
    """An engine of a semo from before heartbeats that was idle when the store was upgraded
    (no row was written for it) keeps the sessions it starts afterwards for the grace period."""
    store = await stores.new()
    o = await office(store)
    await stores.date_upgrade(60)
    old = await live_session(store, o.id, "engine-old", alive=False)
    command = await store.insert_command(o.id, "get_output", session_id=old.session_id)
    assert await store.claim_next_command(o.id, "engine-b") is None
    assert (await store.get_command(command.id)).status == "pending"
    reasons = {"session_reason": "gone", "command_error": "gone", "job_reason": "gone"}
    left = await store.end_engine(o.id, "engine-old", **reasons)
    assert left == EngineEnded(engine_id="engine-old", dead=False)
    assert (await store.get_session(old.session_id)).status == "ready"
    # the engine itself claims its commands
    claimed = await store.claim_next_command(o.id, "engine-old")
    assert claimed is not None and claimed.id == command.id
    await store.complete_command(command.id, "engine-old", success=True)

    # the hour is over: no row means dead
    await stores.date_upgrade(LEGACY_GRACE_SECONDS + 1)
    late = await store.insert_command(o.id, "get_output", session_id=old.session_id)
    assert await store.claim_next_command(o.id, "engine-b") is None
    result = await store.get_result(late.id)
    assert result is not None and result.error == (
        f"session {old.session_id}'s engine engine-old never recorded a heartbeat (an engine of "
        "an older semo, or a row written by hand); the command was not run"
    )
    ended = await store.end_engine(o.id, "engine-old", **reasons)
    assert (ended.dead, ended.sessions_ended) == (True, 1)


async def _running_job(
    store: Store, office_id: str, engine_id: str | None, session_id: str | None = None
) -> Job:
    row = await store.create_job(Job(office_id=office_id, agent_id="a", task="t"))
    return await store.update_job(
        row.id, status="running", engine_id=engine_id, session_id=session_id
    )


async def _claimed(store: Store, office_id: str, engine_id: str) -> AgentCommand:
    await store.insert_command(office_id, "run_job", {"job_id": "j"})
    command = await store.claim_next_command(office_id, engine_id)
    assert command is not None
    return command


async def test_end_engine_ends_what_a_dead_engine_left(store: Store) -> None:
    o = await office(store)
    elsewhere = await office(store, "elsewhere")
    await beat(store, o.id, "engine-d")
    await store.mark_engine_stopped(o.id, "engine-d")
    earlier = await live_session(store, o.id, "engine-d", alive=False)
    await store.set_session_status(earlier.session_id, "terminated", reason="the CLI quit")
    sessions = [await live_session(store, o.id, "engine-d", alive=False) for _ in range(2)]
    kept = await live_session(store, o.id, "engine-k")
    other_office = await live_session(store, elsewhere.id, "engine-d", alive=False)
    questions = [
        await store.create_question(
            UserQuestion(office_id=o.id, agent_id="a", session_id=s.session_id, question="?")
        )
        for s in (*sessions, kept)
    ]
    answered = await store.create_question(
        UserQuestion(office_id=o.id, agent_id="a", session_id=sessions[0].session_id, question="?")
    )
    await store.answer_question(answered.id, "yes")
    dead_job = await _running_job(store, o.id, "engine-d")
    legacy_job = await _running_job(store, o.id, None, sessions[1].session_id)
    done_job = await store.update_job(
        (await _running_job(store, o.id, "engine-d")).id, status="done"
    )
    kept_job = await _running_job(store, o.id, "engine-k")
    dead_command = await _claimed(store, o.id, "engine-d")
    kept_command = await _claimed(store, o.id, "engine-k")
    finished = await _claimed(store, o.id, "engine-d")
    await store.complete_command(finished.id, "engine-d", success=True)

    ended = await store.end_engine(
        o.id,
        "engine-d",
        session_reason="engine engine-d stopped without ending it",
        command_error="engine engine-d stopped while running this command",
        job_reason="engine engine-d stopped while running this job",
    )

    assert ended == EngineEnded(
        engine_id="engine-d",
        dead=True,
        sessions_ended=2,
        questions_cancelled=2,
        commands_failed=1,
        jobs_failed=2,
    )
    for session in sessions:
        row = await store.get_session(session.session_id)
        assert (row.status, row.end_reason) == (
            "terminated",
            "engine engine-d stopped without ending it",
        )
        assert row.ended_at is not None
    assert (await store.get_session(earlier.session_id)).end_reason == "the CLI quit"
    assert (await store.get_session(kept.session_id)).status == "ready"
    assert (await store.get_session(other_office.session_id)).status == "ready"
    for question, session in zip(questions[:2], sessions, strict=True):
        row = await store.get_question(question.id)
        assert (row.status, row.cancel_reason) == (
            "cancelled",
            f"session {session.session_id} has ended: engine engine-d stopped without ending it",
        )
    assert (await store.get_question(questions[2].id)).status == "pending"
    assert (await store.get_question(answered.id)).status == "answered"
    for job in (dead_job, legacy_job):
        row = await store.get_job(job.id)
        assert (row.status, row.failure_reason, row.needs_human) == (
            "failed",
            "engine engine-d stopped while running this job",
            False,
        )
    assert await store.get_job(done_job.id) == done_job
    assert await store.get_job(kept_job.id) == kept_job
    failed = await store.get_command(dead_command.id)
    assert (failed.status, failed.lease_expires_at) == ("failed", None)
    result = await store.get_result(dead_command.id)
    assert result is not None and not result.success
    assert result.error == "engine engine-d stopped while running this command"
    assert (await store.get_command(kept_command.id)).status == "processing"
    assert (await store.get_result(finished.id)).success  # type: ignore[union-attr]

    again = await store.end_engine(
        o.id, "engine-d", session_reason="x", command_error="x", job_reason="x"
    )
    assert again == EngineEnded(engine_id="engine-d", dead=True)


async def test_end_engine_leaves_an_engine_that_is_alive_when_it_writes(stores: Stores) -> None:
    store = await stores.new()
    o = await office(store)
    session = await live_session(store, o.id, "engine-a")
    job = await _running_job(store, o.id, "engine-a")
    command = await _claimed(store, o.id, "engine-a")
    reasons = {"session_reason": "r", "command_error": "c", "job_reason": "j"}

    assert await store.end_engine(o.id, "engine-a", **reasons) == EngineEnded(
        engine_id="engine-a", dead=False
    )
    assert (await store.get_session(session.session_id)).status == "ready"
    assert (await store.get_job(job.id)).status == "running"
    assert (await store.get_command(command.id)).status == "processing"

    # silent: ended; or, for a run known to be dead (unless_alive=False), whatever its row says
    await stores.age_heartbeat(o.id, "engine-a", DEAD_AFTER + 1)
    silent = await store.end_engine(o.id, "engine-a", **reasons)
    assert (silent.dead, silent.sessions_ended, silent.jobs_failed) == (True, 1, 1)
    assert silent.commands_failed == 1
    await beat(store, o.id, "engine-a")
    again = await live_session(store, o.id, "engine-a")
    forced = await store.end_engine(o.id, "engine-a", unless_alive=False, **reasons)
    assert (forced.dead, forced.sessions_ended) == (True, 1)
    assert (await store.get_session(again.session_id)).end_reason == "r"


async def test_renew_leases(store: Store) -> None:
    o = await office(store)
    await store.insert_command(o.id, "get_output", session_id="s")
    await store.insert_command(o.id, "cancel", session_id="s")
    await store.insert_command(o.id, "cancel", session_id="s")
    one = await store.claim_next_command(o.id, "e1", lease_seconds=0.3)
    two = await store.claim_next_command(o.id, "e1", lease_seconds=0.3)
    three = await store.claim_next_command(o.id, "e2", lease_seconds=0.3)
    assert one and two and three and one.lease_expires_at
    assert await store.renew_leases("e1", lease_seconds=60) == 2
    renewed = await store.get_command(one.id)
    assert renewed.lease_expires_at and renewed.lease_expires_at > one.lease_expires_at + timedelta(
        seconds=30
    )
    await store.complete_command(two.id, "e1", success=True)
    assert await store.renew_leases("e1", lease_seconds=60) == 1  # completed ones are not leased
    assert await store.renew_leases("nobody") == 0
    await asyncio.sleep(0.5)
    recovered = await store.recover_expired()
    assert [c.id for c in recovered] == [three.id]  # e1's renewed lease did not expire
    with pytest.raises(ValueError, match="lease_seconds"):
        await store.renew_leases("e1", lease_seconds=-1)


async def test_renewing_only_the_held_commands_lets_a_lost_claim_expire(store: Store) -> None:
    """An engine renews the ids it runs: a claim whose answer it never got is not kept alive."""
    o = await office(store)
    await store.insert_command(o.id, "get_output", session_id="s")
    await store.insert_command(o.id, "get_output", session_id="s")
    held = await store.claim_next_command(o.id, "e1", lease_seconds=0.3)
    lost = await store.claim_next_command(o.id, "e1", lease_seconds=0.3)  # its answer "lost"
    other = await store.insert_command(o.id, "get_output", session_id="s")
    assert held and lost
    assert await store.renew_leases("e1", 60, [held.id, other.id, "no-such-id"]) == 1
    assert await store.renew_leases("e1", 60, []) == 0
    assert await store.renew_leases("e2", 60, [held.id]) == 0  # not e2's to renew
    await asyncio.sleep(0.5)
    recovered = await store.recover_expired()
    assert [c.id for c in recovered] == [lost.id]  # back to pending: get_output is safe to repeat
    assert (await store.get_command(lost.id)).status == "pending"
    assert (await store.get_command(held.id)).status == "processing"


async def test_recover_expired_requeues_safe_and_fails_unsafe(store: Store) -> None:
    o = await office(store)
    safe = await store.insert_command(o.id, "get_output", session_id="s")
    unsafe = await store.insert_command(o.id, "send_prompt", {"prompt": "go"}, session_id="s")
    kept = await store.insert_command(o.id, "terminate", session_id="s")
    assert (await store.claim_next_command(o.id, "dead-engine", lease_seconds=0.05)).id == safe.id  # type: ignore[union-attr]
    claim = await store.claim_next_command(o.id, "dead-engine", lease_seconds=0.05)
    assert claim is not None and claim.id == unsafe.id
    assert (await store.claim_next_command(o.id, "live-engine", lease_seconds=60)).id == kept.id  # type: ignore[union-attr]
    await asyncio.sleep(0.3)

    recovered = {c.id: c for c in await store.recover_expired()}
    assert set(recovered) == {safe.id, unsafe.id}
    requeued = recovered[safe.id]
    assert requeued.status == "pending" and requeued.claimed_by is None
    assert requeued.lease_expires_at is None and requeued.attempts == 1
    assert await store.get_result(safe.id) is None
    failed = recovered[unsafe.id]
    assert failed.status == "failed" and failed.lease_expires_at is None
    result = await store.get_result(unsafe.id)
    assert result is not None and result.success is False
    assert result.error and "dead-engine" in result.error and "not safe to repeat" in result.error
    assert (await store.get_command(kept.id)).status == "processing"

    # a second recovery finds nothing; the dead engine cannot complete what it lost
    assert await store.recover_expired() == []
    with pytest.raises(StoreConflict):
        await store.complete_command(unsafe.id, "dead-engine", success=True)
    with pytest.raises(StoreConflict):
        await store.complete_command(safe.id, "dead-engine", success=True)
    assert (await store.get_result(unsafe.id)) == result  # still exactly one result

    again = await store.claim_next_command(o.id, "live-engine")
    assert again is not None and again.id == safe.id and again.attempts == 2


async def test_recover_gives_up_on_a_command_that_keeps_killing_engines(store: Store) -> None:
    o = await office(store)
    command = await store.insert_command(o.id, "get_output", session_id="s")
    for attempt in range(1, MAX_ATTEMPTS + 1):
        claimed = await store.claim_next_command(o.id, f"engine-{attempt}", lease_seconds=0.01)
        assert claimed is not None and claimed.attempts == attempt
        await asyncio.sleep(0.05)
        [recovered] = await store.recover_expired()
    assert recovered.status == "failed"
    result = await store.get_result(command.id)
    assert result is not None and not result.success
    assert f"after {MAX_ATTEMPTS} attempts" in (result.error or "")


async def test_an_expired_lease_nobody_recovered_yet_can_still_complete(store: Store) -> None:
    o = await office(store)
    command = await store.insert_command(o.id, "send_prompt", {"prompt": "p"}, session_id="s")
    await store.claim_next_command(o.id, "slow-engine", lease_seconds=0.01)
    await asyncio.sleep(0.05)
    result = await store.complete_command(command.id, "slow-engine", success=True)
    assert result.success and (await store.get_command(command.id)).status == "completed"
    assert await store.recover_expired() == []


async def test_complete_command(store: Store) -> None:
    o = await office(store)
    good = await store.insert_command(o.id, "get_output", session_id="s")
    bad = await store.insert_command(o.id, "send_keys", {"keys": "C-c"}, session_id="s")
    pending = await store.insert_command(o.id, "cancel", session_id="s")
    await store.claim_next_command(o.id, "e1")
    await store.claim_next_command(o.id, "e1")
    assert await store.get_result(good.id) is None

    with pytest.raises(StoreConflict, match="e2"):
        await store.complete_command(good.id, "e2", success=True)
    done = await store.complete_command(good.id, "e1", success=True, result={"text": UNICODE})
    assert done.command_id == good.id and done.success and done.result == {"text": UNICODE}
    assert (await store.get_command(good.id)).status == "completed"
    assert await store.get_result(good.id) == done
    with pytest.raises(StoreConflict, match="already completed"):
        await store.complete_command(good.id, "e1", success=True)
    with pytest.raises(StoreConflict):
        await store.complete_command(good.id, "e1", success=False, error="again")

    failed = await store.complete_command(bad.id, "e1", success=False, error="no such key")
    assert not failed.success and failed.error == "no such key" and failed.result is None
    assert (await store.get_command(bad.id)).status == "failed"
    assert (await store.get_command(bad.id)).lease_expires_at is None

    with pytest.raises(StoreConflict, match="pending"):
        await store.complete_command(pending.id, "e1", success=True)
    with pytest.raises(NotFound):
        await store.complete_command("no-such-command", "e1", success=True)
    with pytest.raises(NotFound):
        await store.get_result("no-such-command")
    assert (await store.get_result(good.id)) == done  # exactly one result each


async def test_nul_characters_are_stored_as_replacement_characters(store: Store) -> None:
    o = await office(store)
    command = await store.insert_command(o.id, "send_text", {"text": "a\x00b"}, session_id="s")
    assert command.payload == {"text": "a\ufffdb"}
    await store.claim_next_command(o.id, "e1")
    result = await store.complete_command(
        command.id, "e1", success=False, result={"screen\x00": ["\x00"]}, error="bad\x00byte"
    )
    assert result.result == {"screen\ufffd": ["\ufffd"]} and result.error == "bad\ufffdbyte"
    assert await store.get_result(command.id) == result


async def test_claim_fails_rows_inserted_around_validation(stores: Stores) -> None:
    store = await stores.new()
    o = await office(store)
    bad_payload = await stores.raw_insert_command(o.id, "send_prompt", {"prompt": ""}, "s")
    no_session = await stores.raw_insert_command(o.id, "send_text", {"text": "hi"})
    good = await stores.raw_insert_command(o.id, "get_output", {"lines": 5}, "s")
    claimed = await store.claim_next_command(o.id, "e1")
    assert claimed is not None and claimed.id == good and claimed.payload == {"lines": 5}
    for command_id, reason in ((bad_payload, "prompt"), (no_session, "session_id")):
        assert (await store.get_command(command_id)).status == "failed"
        result = await store.get_result(command_id)
        assert result is not None and not result.success
        assert result.error and "rejected" in result.error and reason in result.error


async def test_database_rejects_unknown_command_types(stores: Stores) -> None:
    store = await stores.new()
    o = await office(store)
    with pytest.raises((psycopg.Error, __import__("sqlite3").Error)):
        await stores.raw_insert_command(o.id, "launch_missiles", {})


# -- questions ---------------------------------------------------------------------------------


async def test_questions(store: Store) -> None:
    o = await office(store)
    first = await store.create_question(
        UserQuestion(office_id=o.id, agent_id="a", session_id="s", question=UNICODE)
    )
    second = await store.create_question(
        UserQuestion(
            office_id=o.id,
            agent_id="a",
            question_type="choice",
            question="Which?",
            options=["빨강", "blue"],
        )
    )
    assert await store.get_question(first.id) == first
    assert [q.id for q in await store.list_questions(o.id)] == [first.id, second.id]
    answered = await store.answer_question(second.id, "빨강")
    assert answered.status == "answered" and answered.answer == "빨강"
    assert answered.answered_at is not None
    assert [q.id for q in await store.list_questions(o.id)] == [first.id]
    assert [q.id for q in await store.list_questions(o.id, status="answered")] == [second.id]
    assert [q.id for q in await store.list_questions(o.id, status=None)] == [first.id, second.id]
    with pytest.raises(StoreConflict, match="already answered"):
        await store.answer_question(second.id, "blue")
    assert (await store.get_question(second.id)).answer == "빨강"
    with pytest.raises(NotFound):
        await store.answer_question("no-such-question", "x")
    with pytest.raises(NotFound):
        await store.get_question("no-such-question")
    with pytest.raises(StoreConflict):
        await store.create_question(first)
    with pytest.raises(NotFound, match="office"):
        await store.create_question(
            UserQuestion(office_id="no-such-office", agent_id="a", question="?")
        )


async def test_permission_requests(store: Store) -> None:
    """A permission request is a question of type permission; its answer is one of the
    three, or a denial with a reason: any other text is refused by the store itself (a row
    update from a web app cannot store what the engine would have to guess at)."""
    o = await office(store)

    def permission(summary: str) -> UserQuestion:
        return UserQuestion(
            office_id=o.id,
            agent_id="a",
            question_type="permission",
            question=summary,
            options=["allow", "allow for this session", "deny"],
        )

    asked = [await store.create_question(permission(f"Bash: touch {n}")) for n in "abcd"]
    assert [q.question_type for q in await store.list_questions(o.id)] == ["permission"] * 4
    answers = ["allow", "allow for this session", "deny", "deny: use the fixtures, not prod"]
    for question, answer in zip(asked, answers, strict=True):
        assert (await store.answer_question(question.id, answer)).answer == answer
    refused = await store.create_question(permission("Bash: rm -rf ~"))
    for bad in ("yes please", "deny: ", "ALLOW", "allow; and more"):
        with pytest.raises(StoreError):
            await store.answer_question(refused.id, bad)
    assert (await store.get_question(refused.id)).status == "pending"


async def test_cancel_question(store: Store) -> None:
    o = await office(store)
    asked = await store.create_question(
        UserQuestion(office_id=o.id, agent_id="a", session_id="s", question="Which?")
    )
    other = await store.create_question(UserQuestion(office_id=o.id, agent_id="a", question="?"))
    cancelled = await store.cancel_question(asked.id, "nobody needs it 이제")
    assert cancelled.status == "cancelled" and cancelled.cancel_reason == "nobody needs it 이제"
    assert cancelled.cancelled_at is not None and cancelled.answer is None
    assert cancelled.answered_at is None
    assert await store.get_question(asked.id) == cancelled
    assert [q.id for q in await store.list_questions(o.id)] == [other.id]
    assert [q.id for q in await store.list_questions(o.id, status="cancelled")] == [asked.id]

    refused = f"question {asked.id} is already cancelled (nobody needs it 이제); it can no longer"
    with pytest.raises(StoreConflict, match=re.escape(refused)):
        await store.answer_question(asked.id, "this one")
    with pytest.raises(StoreConflict, match=re.escape(refused)):
        await answer_question(store, asked.id, text="this one")
    with pytest.raises(StoreConflict, match="is already cancelled"):
        await store.cancel_question(asked.id, "again")
    assert await store.get_question(asked.id) == cancelled  # nothing changed
    await store.answer_question(other.id, "yes")
    with pytest.raises(StoreConflict, match="already answered"):
        await store.cancel_question(other.id, "too late")
    with pytest.raises(NotFound):
        await store.cancel_question("no-such-question", "x")


async def test_ending_an_ended_session_changes_nothing(store: Store) -> None:
    """The first end reason stays; a second end (a concurrent pass, an operator, the engine's
    own late write) is a StoreConflict saying how the session ended."""
    o = await office(store)
    session = await live_session(store, o.id, "engine-a")
    first = await store.set_session_status(session.session_id, "terminated", reason="the CLI quit")
    assert first.ended_at is not None
    for reason in ("engine engine-a stopped answering", None):
        with pytest.raises(
            StoreConflict,
            match=re.escape(f"session {session.session_id} has already ended (the CLI quit)"),
        ):
            await store.set_session_status(session.session_id, "terminated", reason=reason)
    with pytest.raises(StoreConflict, match="is terminated; it cannot become ready"):
        await store.set_session_status(session.session_id, "ready")
    assert await store.get_session(session.session_id) == first


async def test_ending_a_session_cancels_its_pending_questions(store: Store) -> None:
    o = await office(store)
    ending = await live_session(store, o.id, "engine-a")
    staying = await live_session(store, o.id, "engine-a")

    async def ask(session_id: str | None) -> UserQuestion:
        return await store.create_question(
            UserQuestion(office_id=o.id, agent_id="a", session_id=session_id, question="?")
        )

    pending, answered = await ask(ending.session_id), await ask(ending.session_id)
    await store.answer_question(answered.id, "done")
    elsewhere, loose = await ask(staying.session_id), await ask(None)
    await store.set_session_status(ending.session_id, "executing")
    assert (await store.get_question(pending.id)).status == "pending"

    await store.set_session_status(ending.session_id, "terminated", reason="the CLI quit")
    row = await store.get_question(pending.id)
    assert row.status == "cancelled" and row.cancelled_at is not None
    assert row.cancel_reason == f"session {ending.session_id} has ended: the CLI quit"
    assert (await store.get_question(answered.id)).status == "answered"
    assert [q.id for q in await store.list_questions(o.id)] == [elsewhere.id, loose.id]


# -- invocations, results, jobs ----------------------------------------------------------------


async def test_invocations(store: Store) -> None:
    o = await office(store)
    first = await store.create_invocation(
        AgentInvocation(
            office_id=o.id,
            caller_agent_id="a",
            target_agent_id="b",
            task=UNICODE,
            context={"files": ["x.py"], "note": "🚀"},
        )
    )
    second = await store.create_invocation(
        AgentInvocation(office_id=o.id, caller_agent_id="b", target_agent_id="a", task="t")
    )
    assert [i.id for i in await store.list_invocations(o.id)] == [first.id, second.id]
    running = await store.update_invocation(first.id, status="running")
    assert running.status == "running" and running.error is None
    assert running.updated_at >= first.updated_at and running.context == first.context
    failed = await store.update_invocation(first.id, status="failed", error="target died")
    assert failed.status == "failed" and failed.error == "target died"
    with pytest.raises(StoreError, match="unknown invocation status"):
        await store.update_invocation(first.id, status="exploded")
    with pytest.raises(NotFound):
        await store.update_invocation("no-such-invocation", status="running")
    with pytest.raises(StoreConflict):
        await store.create_invocation(second)


async def test_results(store: Store) -> None:
    o = await office(store)
    structured = await store.create_result(
        AgentResult(
            office_id=o.id,
            invocation_id="inv-1",
            sender_agent_id="b",
            recipient_agent_id="a",
            summary="done ✓",
            payload={"files": ["a.py"], "count": 2, "nested": {"ok": True}},
        )
    )
    text = await store.create_result(
        AgentResult(office_id=o.id, sender_agent_id="b", recipient_agent_id="a", payload=UNICODE)
    )
    assert text.payload == UNICODE
    assert [r.id for r in await store.list_results(o.id)] == [structured.id, text.id]
    delivered = await store.mark_result_delivered(structured.id)
    assert delivered.status == "delivered" and delivered.delivered_at is not None
    assert delivered.payload == structured.payload
    assert [r.id for r in await store.list_results(o.id, status="pending")] == [text.id]
    assert [r.id for r in await store.list_results(o.id, status="delivered")] == [structured.id]
    with pytest.raises(StoreConflict, match="already delivered"):
        await store.mark_result_delivered(structured.id)
    with pytest.raises(NotFound):
        await store.mark_result_delivered("no-such-result")


async def test_jobs(store: Store) -> None:
    o = await office(store)
    job = await store.create_job(
        Job(office_id=o.id, agent_id="a", task="refactor 모듈", context={"k": [1, 2]})
    )
    assert await store.get_job(job.id) == job
    running = await store.update_job(job.id, status="running", session_id="s", attempts=1)
    assert (running.status, running.session_id, running.attempts) == ("running", "s", 1)
    assert running.updated_at >= job.updated_at and running.created_at == job.created_at
    failed = await store.update_job(
        job.id, status="failed", failure_reason="tests failed", needs_human=True
    )
    assert failed.needs_human is True and failed.failure_reason == "tests failed"
    assert await store.get_job(job.id) == failed
    with pytest.raises(StoreError, match="unknown or fixed field"):
        await store.update_job(job.id, office_id="elsewhere")
    with pytest.raises(StoreError, match="unknown or fixed field"):
        await store.update_job(job.id, colour="red")
    with pytest.raises(StoreError, match="status"):
        await store.update_job(job.id, status="exploded")
    assert await store.get_job(job.id) == failed  # nothing half-written
    with pytest.raises(NotFound):
        await store.update_job("no-such-job", status="done")
    with pytest.raises(NotFound):
        await store.get_job("no-such-job")
    with pytest.raises(StoreConflict):
        await store.create_job(job)


async def test_list_jobs(store: Store) -> None:
    o = await office(store)
    other = await office(store, "other")
    jobs = [
        await store.create_job(Job(office_id=o.id, agent_id="a", task=f"task {i}"))
        for i in range(4)
    ]
    await store.create_job(Job(office_id=other.id, agent_id="a", task="elsewhere"))
    running = await store.update_job(jobs[1].id, status="running", engine_id="engine-1")
    assert running.engine_id == "engine-1"
    await store.update_job(jobs[3].id, status="running", engine_id="engine-2")
    await store.update_job(jobs[2].id, status="done")
    assert [j.id for j in await store.list_jobs(o.id)] == [j.id for j in jobs]
    listed = await store.list_jobs(o.id, status="running")
    assert [(j.id, j.engine_id) for j in listed] == [
        (jobs[1].id, "engine-1"),
        (jobs[3].id, "engine-2"),
    ]
    assert [j.id for j in await store.list_jobs(o.id, status="pending")] == [jobs[0].id]
    assert await store.list_jobs("no-such-office") == []
    with pytest.raises(StoreError, match="unknown job status"):
        await store.list_jobs(o.id, status="exploded")  # type: ignore[arg-type]


async def test_of_engines_starting_one_job_at_once_one_starts_it(stores: Stores) -> None:
    """Four engines hold a run_job command for one pending job (one requeued while another
    was slow) and start it at the same instant: one gets it, running on that engine with its
    `started` step; the others get None and change nothing."""
    engines = [await stores.new() for _ in range(4)]
    o = await office(engines[0])
    for round_ in range(3):
        job = await engines[0].create_job(Job(office_id=o.id, agent_id="a", task=f"t{round_}"))

        async def start(store: Store, n: int, job: Job = job) -> Job | None:
            step = JobEntry(job_id=job.id, office_id=o.id, step="started", detail=f"e{n}")
            return await store.start_job(job.id, engine_id=f"engine-{n}", entry=step)

        won = await asyncio.gather(*(start(s, n) for n, s in enumerate(engines)))
        winners = [w for w in won if w is not None]
        assert len(winners) == 1, won
        row = await engines[0].get_job(job.id)
        assert (row.status, row.engine_id) == ("running", winners[0].engine_id)
        [step] = await engines[0].list_job_entries(job.id)
        assert (step.step, step.status, step.detail) == (
            "started",
            "running",
            f"e{winners[0].engine_id.removeprefix('engine-')}",
        )
    # a job that is not pending is not started again; an unknown one neither
    assert await engines[1].start_job(job.id, engine_id="late") is None
    assert (await engines[0].get_job(job.id)).engine_id == winners[0].engine_id
    assert await engines[1].start_job("no-such-job", engine_id="late") is None
    retried = await engines[0].update_job(
        job.id, status="pending", engine_id=None, failure_reason="x", needs_human=True
    )
    started = await engines[1].start_job(retried.id, engine_id="again")
    assert started is not None and (started.failure_reason, started.needs_human) == (None, False)


async def test_engines_requeueing_one_job_at_once_insert_one_command(stores: Stores) -> None:
    """Four engines that ended one dead engine requeue its claimed, not started job at once:
    one run_job command and one `requeued` step naming it; none while a run_job command for
    the job is pending or processing, or once it is not pending."""
    engines = [await stores.new() for _ in range(4)]
    o = await office(engines[0])
    for round_ in range(3):
        job = await engines[0].create_job(Job(office_id=o.id, agent_id="a", task=f"t{round_}"))
        requeued = await asyncio.gather(
            *(s.requeue_job(job.id, reason=f"engine {n}") for n, s in enumerate(engines))
        )
        commands = [c for c in requeued if c is not None]
        assert len(commands) == 1, requeued
        command = commands[0]
        assert (command.command_type, command.payload, command.status, command.office_id) == (
            "run_job",
            {"job_id": job.id},
            "pending",
            o.id,
        )
        live = await engines[0].list_commands(o.id, status="pending")
        assert [c.id for c in live if c.payload.get("job_id") == job.id] == [command.id]
        [step] = await engines[0].list_job_entries(job.id)
        assert (step.step, step.status, step.ref_id) == ("requeued", "pending", command.id)
        assert step.detail.startswith("engine ")
    # claimed (processing): still none
    claimed = await engines[1].claim_next_command(o.id, "engine-1")
    assert claimed is not None
    job_id = claimed.payload["job_id"]
    assert await engines[2].requeue_job(job_id, reason="again") is None
    # its command failed (a dead engine's end): requeued once more
    await engines[1].complete_command(claimed.id, "engine-1", success=False, error="died")
    again = await engines[2].requeue_job(job_id, reason="again")
    assert again is not None and again.id != claimed.id
    # not pending (started), or unknown: nothing
    assert await engines[3].start_job(job.id, engine_id="engine-3") is not None
    assert await engines[0].requeue_job(job.id, reason="late") is None
    assert await engines[0].requeue_job("no-such-job", reason="late") is None
    assert [e.step for e in await engines[0].list_job_entries(job.id)] == ["requeued"]


# -- wake-ups ----------------------------------------------------------------------------------


async def test_wait_times_out_without_changes(store: Store) -> None:
    o = await office(store)
    started = time.monotonic()
    assert await store.wait_for_change(o.id, 0.2) is False
    assert time.monotonic() - started >= 0.15
    assert await store.wait_for_change(o.id, 0) is False


async def test_insert_by_another_instance_wakes_the_waiter(stores: Stores) -> None:
    engine, client = await stores.new(), await stores.new()
    o = await office(client)
    other = await office(client, "other")
    assert await engine.wait_for_change(o.id, 0) is False
    waiting = asyncio.create_task(engine.wait_for_change(o.id, 10))
    await asyncio.sleep(0.1)
    assert not waiting.done()
    await client.insert_command(other.id, "get_output", session_id="s")  # another office
    await asyncio.sleep(0.1)
    assert not waiting.done()
    await client.insert_command(o.id, "get_output", session_id="s")
    assert await asyncio.wait_for(waiting, 5) is True
    assert await engine.claim_next_command(o.id, "engine") is not None
    assert await engine.wait_for_change(o.id, 0.05) is False  # consumed


async def test_change_while_nobody_waits_is_reported_on_the_next_wait(stores: Stores) -> None:
    engine, client = await stores.new(), await stores.new()
    o = await office(client)
    await client.insert_command(o.id, "get_output", session_id="s")
    await asyncio.sleep(0.1)
    assert await engine.wait_for_change(o.id, 5) is True
    assert await engine.wait_for_change(o.id, 0.05) is False


async def test_answer_requeue_and_result_wake_the_waiter(stores: Stores) -> None:
    engine, client = await stores.new(), await stores.new()
    o = await office(client)
    question = await client.create_question(
        UserQuestion(office_id=o.id, agent_id="a", question="?")
    )
    command = await client.insert_command(o.id, "get_output", session_id="s")
    assert await engine.wait_for_change(o.id, 5) is True  # the insert
    claimed = await engine.claim_next_command(o.id, "engine", lease_seconds=0.05)
    assert claimed is not None and claimed.id == command.id

    waiting = asyncio.create_task(engine.wait_for_change(o.id, 10))
    await asyncio.sleep(0.05)
    await client.answer_question(question.id, "yes")
    assert await asyncio.wait_for(waiting, 5) is True

    await asyncio.sleep(0.1)
    waiting = asyncio.create_task(engine.wait_for_change(o.id, 10))
    await client.recover_expired()  # back to pending
    assert await asyncio.wait_for(waiting, 5) is True

    assert await client.wait_for_change(o.id, 0) is True  # what happened so far
    waiting = asyncio.create_task(client.wait_for_change(o.id, 10))
    await asyncio.sleep(0.05)
    again = await engine.claim_next_command(o.id, "engine")
    assert again is not None
    await engine.complete_command(again.id, "engine", success=True)  # `semo command --wait`
    assert await asyncio.wait_for(waiting, 5) is True


async def test_sqlite_insert_from_another_process_wakes_the_waiter(sqlite_stores: Stores) -> None:
    stores = sqlite_stores
    engine = await stores.new()
    o = await office(engine)
    script = (
        "import asyncio, sys\n"
        "from semo.engine.store.sqlite import SqliteStore\n"
        "async def main():\n"
        "    async with SqliteStore(sys.argv[1]) as store:\n"
        "        await store.insert_command(sys.argv[2], 'send_prompt', {'prompt': '안녕 🚀'},"
        " session_id='s')\n"
        "asyncio.run(main())\n"
    )
    waiting = asyncio.create_task(engine.wait_for_change(o.id, 30))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, stores.target, o.id, cwd=REPO, env=env
    )
    assert await child.wait() == 0
    assert await asyncio.wait_for(waiting, 10) is True
    claimed = await engine.claim_next_command(o.id, "engine")
    assert claimed is not None and claimed.payload == {"prompt": "안녕 🚀"}


# -- lifecycle and failures --------------------------------------------------------------------


async def test_a_closed_store_says_so(stores: Stores) -> None:
    store = stores.make()
    with pytest.raises(StoreError, match="not open"):
        await store.list_offices()
    async with store:
        await store.open()  # opening twice is harmless
        assert await store.list_offices() == []
    with pytest.raises(StoreError, match="not open"):
        await store.list_offices()
    with pytest.raises(StoreError, match="not open"):
        await store.wait_for_change("x", 0)


async def _terminate_backends(dsn: str) -> None:
    name = psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]
    async with await psycopg.AsyncConnection.connect(ADMIN_DSN, autocommit=True) as admin:
        await admin.execute(
            "select pg_terminate_backend(pid) from pg_stat_activity"
            " where datname = %s and pid <> pg_backend_pid()",
            (name,),
        )
        for _ in range(100):
            cur = await admin.execute(
                "select count(*) from pg_stat_activity where datname = %s", (name,)
            )
            if (await cur.fetchone())[0] == 0:  # type: ignore[index]
                return
            await asyncio.sleep(0.02)


async def test_postgres_lost_connection_is_unavailable_then_reconnects(
    postgres_stores: Stores,
) -> None:
    stores = postgres_stores
    store = await stores.new()
    o = await office(store)
    await store.list_offices()
    await _terminate_backends(stores.target)  # what a server restart does to us

    with pytest.raises(StoreUnavailable, match="connection"):
        await store.list_offices()
    assert [x.id for x in await store.list_offices()] == [o.id]  # reconnected

    # the listener was killed too: the next wait re-listens and says "something may have changed"
    assert await store.wait_for_change(o.id, 5) is True
    assert await store.wait_for_change(o.id, 0.05) is False
    waiting = asyncio.create_task(store.wait_for_change(o.id, 10))
    await asyncio.sleep(0.05)
    await store.insert_command(o.id, "get_output", session_id="s")
    assert await asyncio.wait_for(waiting, 5) is True


async def test_postgres_listener_keeps_listening_across_pings(postgres_stores: Stores) -> None:
    stores = postgres_stores
    engine = await stores.new(ping_interval=0.02)
    client = await stores.new()
    o = await office(client)
    assert await engine.wait_for_change(o.id, 0.3) is False  # several pings
    for _ in range(3):
        waiting = asyncio.create_task(engine.wait_for_change(o.id, 10))
        await asyncio.sleep(0.1)
        await client.insert_command(o.id, "get_output", session_id="s")
        assert await asyncio.wait_for(waiting, 5) is True


async def test_postgres_unreachable_server_is_unavailable_quickly() -> None:
    from semo.engine.store.postgres import PostgresStore

    store = PostgresStore("postgresql://semo:hunter2@127.0.0.1:1/semo", connect_timeout=2)
    started = time.monotonic()
    with pytest.raises(StoreUnavailable) as caught:
        await store.open()
    assert time.monotonic() - started < 10
    assert "hunter2" not in str(caught.value) and "hunter2" not in repr(store)
    assert "127.0.0.1" in str(caught.value)


async def test_postgres_statement_timeout_never_hangs(postgres_stores: Stores) -> None:
    stores = postgres_stores
    store = await stores.new(statement_timeout=0.5)
    o = await office(store)
    async with await psycopg.AsyncConnection.connect(stores.target) as blocker:
        await blocker.execute("lock table offices in access exclusive mode")
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match="statement timeout"):
            await store.get_office(o.id)
        assert time.monotonic() - started < 5
        await blocker.rollback()
    assert (await store.get_office(o.id)).id == o.id
