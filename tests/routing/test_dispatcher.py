"""CommandDispatcher on the sqlite and postgres stores, with bash as a generic agent.

What is checked: create_session, send_prompt (with and without wait), send_keys, send_text,
get_output, cancel and terminate run against a real session and each writes one result row;
commands inserted while the dispatcher waits are picked up by the store's wake-up (the
dispatchers here poll only once an hour), those inserted before start by the catch-up claim,
and a store whose wake-ups never come is polled; bad payloads (rows written around the store,
and a payload that only the dispatcher sees), unknown and ended sessions, send_prompt's own
timeout, command_timeout, a bad key spec, run_job without a job runner, a create_session that
cannot serve the request and one that raises unexpectedly all end in one failed result with a
clear message; stop() lets a command finish within its grace and fails the rest "engine
stopping"; leases are renewed while a command runs; a result the store refuses is retried, and
one it keeps refusing is left to the lease (recover_expired requeues it, then it runs once);
two dispatchers (two engines) on one office never run a command twice, and with sessions
recorded in the store each runs only the commands of its own sessions (a command for an ended
session fails at claim). Events on the bus: one CommandClaimed and one CommandFinished per
command.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest

from semo.engine.events import CommandClaimed, CommandFinished, Subscription
from semo.engine.routing import CommandDispatcher
from semo.engine.routing.dispatcher import STOPPING
from semo.engine.sessions.manager import SessionManager
from semo.engine.store.base import StoreUnavailable
from semo.engine.store.models import (
    Agent,
    AgentCommand,
    AgentCommandResult,
    CreateSessionPayload,
)
from tests.support.dispatch_rig import BASH, NO_POLL, TIMEOUT, Rig, bash_env
from tests.support.waiting import eventually


def events_by_command(subscription: Subscription) -> dict[str, list[str]]:
    seen: dict[str, list[str]] = {}
    while (event := subscription.get_nowait()) is not None:
        assert isinstance(event, CommandClaimed | CommandFinished)
        seen.setdefault(event.command_id, []).append(event.kind)
    return seen


async def check_one_result_each(rig: Rig, ids: list[str]) -> dict[str, AgentCommandResult]:
    """Every command has exactly one result row and a final status that agrees with it."""
    results = {i: await rig.store.get_result(i) for i in ids}
    commands = {c.id: c for c in await rig.store.list_commands(rig.office.id, limit=1000)}
    for command_id, result in results.items():
        assert result is not None, command_id
        assert result.command_id == command_id
        status = commands[command_id].status
        assert status == ("completed" if result.success else "failed")
    return results  # type: ignore[return-value]


# -- the commands against a real session -----------------------------------------------------


async def test_every_command_type_runs_against_a_real_session(rig: Rig) -> None:
    dispatcher = rig.dispatcher()
    subscription = rig.bus.subscribe(kinds={"command_claimed", "command_finished"})
    dispatcher.start()
    ids: list[str] = []

    async def run(kind: str, payload: dict[str, Any], session: str | None = None) -> Any:
        command_id = await rig.insert(kind, payload, session)
        ids.append(command_id)
        result = await rig.result(command_id)
        assert result.success, f"{kind}: {result.error}"
        return result.result

    created = await run("create_session", {"role": "SH"})
    sid = created["session_id"]
    assert created == {"session_id": sid, "role": "SH", "state": "ready"}
    assert sid in rig.manager.sessions

    turn = await run("send_prompt", {"prompt": "echo $((6 * 7))", "wait": True}, sid)
    assert turn["state"] == "ready"
    assert "42" in turn["text"].splitlines()
    assert turn["messages"] == []

    delivered = await run("send_prompt", {"prompt": "echo delivered-$((2 * 4))"}, sid)
    assert delivered["delivered"] is True
    assert delivered["waited_s"] >= 0
    await rig.output_until(sid, lambda lines: "delivered-8" in lines)
    await rig.manager.get(sid).wait_ready(TIMEOUT)

    keys = await run("send_keys", {"keys": "echo keys-$((1 + 1))<Enter>"}, sid)
    assert keys == {"keys": "echo keys-$((1 + 1))<Enter>"}
    await rig.output_until(sid, lambda lines: "keys-2" in lines)

    text = await run("send_text", {"text": "echo text-$((1 + 2))\r"}, sid)
    assert text == {"chars": len("echo text-$((1 + 2))\r")}
    await rig.output_until(sid, lambda lines: "text-3" in lines)

    screen = await run("get_output", {}, sid)
    assert (screen["cols"], screen["rows"]) == (80, 24)
    assert len(screen["lines"]) == 24
    assert len(screen["cursor"]) == 2
    assert screen["state"] in ("ready", "executing")
    tail = await run("get_output", {"lines": 3}, sid)
    assert 1 <= len(tail["lines"]) <= 3

    # cancel interrupts a running turn (the marker comes from the child itself, so the Ctrl+C
    # cannot arrive before the process it is meant for runs)
    await rig.manager.get(sid).wait_ready(TIMEOUT)
    await run("send_prompt", {"prompt": "sh -c 'echo sleeping; exec sleep 30'"}, sid)
    await rig.output_until(sid, lambda lines: "sleeping" in lines)
    assert await run("cancel", {}, sid) == {"cancelled": True}
    after = await run("send_prompt", {"prompt": "echo after-cancel", "wait": True}, sid)
    assert "after-cancel" in after["text"].splitlines()

    assert await run("terminate", {}, sid) == {"terminated": True}
    assert sid not in rig.manager.sessions
    gone_id = await rig.insert("get_output", {}, sid)
    ids.append(gone_id)
    gone = await rig.result(gone_id)
    assert not gone.success
    assert gone.error == f"no session {sid!r} on this engine"

    # with the get_output commands output_until ran
    everything = [c.id for c in await rig.store.list_commands(rig.office.id, limit=1000)]
    assert set(ids) <= set(everything)
    ids = everything
    results = await check_one_result_each(rig, ids)
    assert [r.success for r in results.values()].count(False) == 1
    events = events_by_command(subscription)
    assert set(events) == set(ids)
    assert all(kinds == ["command_claimed", "command_finished"] for kinds in events.values())
    stats = dispatcher.stats
    assert (stats.claimed, stats.completed, stats.failed) == (len(ids), len(ids) - 1, 1)
    assert stats.by_type["get_output"].failed == 1
    assert stats.by_type["create_session"].completed == 1
    assert stats.unrecorded == 0
    assert dispatcher.in_flight == 0


async def test_catch_up_at_start_and_polling_when_wake_ups_never_come(rig: Rig) -> None:
    session = await rig.create(CreateSessionPayload(role="SH"))
    sid = session.session_id

    async def deaf(office_id: str, timeout: float) -> bool:
        await asyncio.sleep(timeout)
        return False

    rig.store.wait_for_change = deaf  # type: ignore[method-assign]
    early = [await rig.insert("get_output", {"lines": 2}, sid) for _ in range(3)]
    dispatcher = rig.dispatcher(poll_interval=0.1)
    dispatcher.start()
    for command_id in early:
        assert (await rig.result(command_id)).success
    late = await rig.insert("get_output", {}, sid)
    assert (await rig.result(late)).success
    await check_one_result_each(rig, [*early, late])
    assert dispatcher.stats.claimed == 4


# -- failures ------------------------------------------------------------------------------


async def test_failures_end_in_one_result_with_a_clear_message(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    session = await rig.create(CreateSessionPayload(role="SH"))
    sid = session.session_id
    dead = await rig.create(CreateSessionPayload(role="SH"))
    assert dead.pid is not None
    os.kill(dead.pid, signal.SIGKILL)
    await eventually(lambda: dead.ended, TIMEOUT, what="the killed session to end", interval=0.02)

    # a payload that only the dispatcher sees as bad (the store's claim let it through)
    claim = rig.store.claim_next_command

    async def tampering_claim(*args: Any, **kwargs: Any) -> AgentCommand | None:
        command = await claim(*args, **kwargs)
        if command is not None and command.payload == {"keys": "TAMPER"}:
            command = command.model_copy(update={"payload": {"keys": ""}})
        return command

    rig.store.claim_next_command = tampering_claim  # type: ignore[method-assign]
    dispatcher = rig.dispatcher(command_timeout=1.0)
    caplog.set_level(logging.INFO, logger="semo.routing")
    expected: dict[str, Callable[[str], bool]] = {}

    def expect(command_id: str, check: Callable[[str], bool]) -> None:
        expected[command_id] = check

    # rows written around the store's validation are rejected, never run
    empty = await rig.stores.raw_insert_command(rig.office.id, "send_prompt", {"prompt": ""}, sid)
    expect(empty, lambda e: e.startswith("rejected: bad payload for send_prompt: prompt"))
    extra = await rig.stores.raw_insert_command(
        rig.office.id, "get_output", {"lines": 5, "colour": "red"}, sid
    )
    expect(extra, lambda e: e.startswith("rejected: bad payload for get_output: colour"))
    expect(
        await rig.insert("send_keys", {"keys": "TAMPER"}, sid),
        lambda e: e.startswith("rejected: bad payload for send_keys: keys:"),
    )
    expect(
        await rig.insert("get_output", {}, "no-such-session"),
        lambda e: e == "no session 'no-such-session' on this engine",
    )
    expect(
        await rig.insert("send_text", {"text": "x"}, dead.session_id),
        lambda e: e == f"session {dead.session_id} is not running",
    )
    expect(
        await rig.insert("send_prompt", {"prompt": "echo hi"}, dead.session_id),
        lambda e: e == f"session {dead.session_id} has ended",
    )
    expect(
        await rig.insert("send_prompt", {"prompt": "sleep 5", "wait": True, "timeout": 0.5}, sid),
        lambda e: e == "send_prompt timed out after 0.5 s",
    )
    expect(
        await rig.insert("send_keys", {"keys": "<Sleep:10000>"}, sid),
        lambda e: e == "send_keys timed out after 1 s",
    )
    expect(
        await rig.insert("send_keys", {"keys": "<Nope>"}, sid),
        lambda e: e == "bad key spec: unknown key <Nope>",
    )
    expect(
        await rig.insert("run_job", {"job_id": "job-1"}),
        lambda e: e.startswith("jobs are not enabled on this engine") and "job-1" in e,
    )
    expect(
        await rig.insert("create_session", {"role": "NOPE"}),
        lambda e: e == "could not create the session: no agent with role 'NOPE'",
    )
    boom = await rig.insert("create_session", {"role": "BOOM"})
    expect(boom, lambda e: e == "internal error: RuntimeError: boom")

    dispatcher.start()
    for command_id, check in expected.items():
        result = await rig.result(command_id)
        assert not result.success
        assert result.error is not None
        assert check(result.error), result.error
        assert result.result is None
    await check_one_result_each(rig, list(expected))

    # the unexpected error is logged with its traceback, the expected ones are not
    with_traceback = [r for r in caplog.records if r.exc_info is not None]
    assert len(with_traceback) == 1
    assert boom in with_traceback[0].getMessage()
    # rows the store rejected at claim never reached the dispatcher
    stats = dispatcher.stats
    assert stats.claimed == stats.failed == len(expected) - 2
    assert stats.completed == 0
    assert stats.by_type["send_keys"].failed == 3
    # the session the timed-out prompt was running in is still there
    assert sid in rig.manager.sessions


# -- stopping, leases, store failures -------------------------------------------------------


async def test_stop_lets_commands_finish_within_grace_and_fails_the_rest(rig: Rig) -> None:
    quick_session = await rig.create(CreateSessionPayload(role="SH"))
    slow_session = await rig.create(CreateSessionPayload(role="SH"))
    dispatcher = rig.dispatcher()
    subscription = rig.bus.subscribe(kinds={"command_finished"})
    dispatcher.start()
    slow = await rig.insert(
        "send_prompt",
        {"prompt": "sleep 30", "wait": True, "timeout": 60},
        slow_session.session_id,
    )
    quick = await rig.insert(
        "send_prompt",
        {"prompt": "sleep 0.5; echo quick-done", "wait": True},
        quick_session.session_id,
    )
    await eventually(
        lambda: dispatcher.stats.claimed >= 2, TIMEOUT, what="both commands claimed", interval=0.02
    )

    await dispatcher.stop(grace=3)
    assert not dispatcher.running
    assert dispatcher.in_flight == 0
    done = await rig.store.get_result(quick)
    assert done is not None and done.success, done
    assert done.result is not None and "quick-done" in done.result["text"].splitlines()
    stopped = await rig.store.get_result(slow)
    assert stopped is not None
    assert not stopped.success
    assert stopped.error == STOPPING
    await check_one_result_each(rig, [slow, quick])
    finished = [e for e in iter(subscription.get_nowait, None)]
    assert sorted(e.command_id for e in finished) == sorted([slow, quick])  # type: ignore[union-attr]

    # a stopped dispatcher claims nothing
    after = await rig.insert("get_output", {}, quick_session.session_id)
    await asyncio.sleep(0.3)
    assert (await rig.store.get_command(after)).status == "pending"


async def test_leases_are_renewed_while_a_command_runs(rig: Rig) -> None:
    session = await rig.create(CreateSessionPayload(role="SH"))
    dispatcher = rig.dispatcher(lease_seconds=1.5)
    dispatcher.start()
    command_id = await rig.insert(
        "send_prompt",
        {"prompt": "sleep 2.5; echo slept", "wait": True},
        session.session_id,
    )
    deadline = time.monotonic() + TIMEOUT
    first = None
    while True:
        command = await rig.store.get_command(command_id)
        assert command.status in ("pending", "processing"), "finished before a renewal was seen"
        if command.lease_expires_at is not None:
            if first is None:
                first = command.lease_expires_at
            elif command.lease_expires_at > first:
                break
        assert time.monotonic() < deadline, "the lease was never renewed"
        await asyncio.sleep(0.05)
    result = await rig.result(command_id)
    assert result.success, result.error
    assert (await rig.store.get_command(command_id)).attempts == 1


async def test_a_result_the_store_refuses_is_retried_then_left_to_the_lease(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    session = await rig.create(CreateSessionPayload(role="SH"))
    sid = session.session_id
    complete = rig.store.complete_command
    refusals = {"left": 2}

    async def flaky_complete(*args: Any, **kwargs: Any) -> AgentCommandResult:
        if refusals["left"] > 0:
            refusals["left"] -= 1
            raise StoreUnavailable("the database went away")
        return await complete(*args, **kwargs)

    rig.store.complete_command = flaky_complete  # type: ignore[method-assign]
    dispatcher = rig.dispatcher(lease_seconds=0.6)
    dispatcher.complete_backoff = (0.01, 0.01, 0.01)
    dispatcher.start()

    # refused twice, then written: one result
    retried = await rig.insert("get_output", {}, sid)
    assert (await rig.result(retried)).success
    assert dispatcher.stats.unrecorded == 0

    # refused on every attempt: left processing, its lease runs out, recover_expired requeues
    # it (get_output is safe to repeat) and it runs again, once
    refusals["left"] = 4
    caplog.set_level(logging.ERROR, logger="semo.routing")
    lost = await rig.insert("get_output", {}, sid)
    deadline = time.monotonic() + TIMEOUT
    await eventually(
        lambda: dispatcher.stats.unrecorded > 0,
        TIMEOUT,
        what="the result given up on",
        interval=0.02,
    )
    assert any("left to its lease" in r.getMessage() for r in caplog.records)
    recovered: list[AgentCommand] = []
    while not any(c.id == lost for c in recovered):
        assert time.monotonic() < deadline, "recover_expired never requeued the command"
        assert await rig.store.get_result(lost) is None
        await asyncio.sleep(0.1)
        recovered = await rig.store.recover_expired()
    result = await rig.result(lost)
    assert result.success
    assert (await rig.store.get_command(lost)).attempts == 2
    await check_one_result_each(rig, [retried, lost])


# -- several engines -------------------------------------------------------------------------


async def test_two_engines_on_one_office_never_run_a_command_twice(rig: Rig) -> None:
    session = await rig.create(CreateSessionPayload(role="SH"))
    sid = session.session_id
    other_store = await rig.stores.new()
    engines = {"engine-1", "engine-2"}
    first = rig.dispatcher(engine_id="engine-1", max_concurrent=4)
    second = rig.dispatcher(store=other_store, engine_id="engine-2", max_concurrent=4)
    handled: Counter[str] = Counter()
    get_output = rig.manager.get_output

    def counting_get_output(session_id: str, lines: int | None = None) -> Any:
        handled[session_id] += 1
        return get_output(session_id, lines)

    rig.manager.get_output = counting_get_output  # type: ignore[method-assign]
    subscription = rig.bus.subscribe(kinds={"command_claimed", "command_finished"})
    first.start()
    second.start()
    ids = []
    for index in range(50):
        if index % 2:
            ids.append(await rig.insert("send_keys", {"keys": "x"}, sid))
        else:
            ids.append(await rig.insert("get_output", {"lines": 5}, sid))
    for command_id in ids:
        result = await rig.result(command_id)
        assert result.success, result.error
    await check_one_result_each(rig, ids)
    for command in await rig.store.list_commands(rig.office.id, limit=1000):
        assert command.claimed_by in engines
        assert command.attempts == 1
    events = events_by_command(subscription)
    assert set(events) == set(ids)
    assert all(kinds == ["command_claimed", "command_finished"] for kinds in events.values())
    assert first.stats.claimed + second.stats.claimed == 50
    assert handled[sid] == 25


async def test_each_engine_runs_the_commands_of_its_own_sessions(rig: Rig, tmp_path: Path) -> None:
    """Two engines on one office, each with a session it records in the store: every command
    for a session runs on the engine that runs it (none fails "no session ... on this
    engine"), office-level commands on either, a command for a session that has ended
    fails at claim with the session's end reason, and once an engine stops beating (it died
    on another host) the other fails its sessions' commands at claim, saying so."""
    agent = Agent(office_id=rig.office.id, name="shell", role="SH", command=BASH)
    owners: dict[str, str] = {}
    dispatchers = []
    for engine_id in ("engine-1", "engine-2"):
        # alive, as Engine.start records (engine.heartbeat)
        await rig.store.record_heartbeat(rig.office.id, engine_id, dead_after=60, starting=True)
        manager = SessionManager(
            store=await rig.stores.new(),
            office_id=rig.office.id,
            engine_id=engine_id,
            agent_env=bash_env(),
            runtime_dir=tmp_path / f"run-{engine_id}",
        )
        await manager.start()
        session = await manager.create(agent, working_dir=rig.folder, cols=80, rows=24)
        await session.wait_ready(TIMEOUT)
        owners[session.session_id] = engine_id
        dispatcher = CommandDispatcher(
            manager.store,  # type: ignore[arg-type]
            manager,
            office_id=rig.office.id,
            engine_id=engine_id,
            bus=rig.bus,
            create_session=rig.create,
            poll_interval=NO_POLL,
            max_concurrent=4,
        )
        rig.dispatchers.append(dispatcher)
        dispatchers.append((manager, dispatcher))
    try:
        for session_id in owners:  # recorded with the engine that runs it
            assert (await rig.store.get_session(session_id)).engine_id == owners[session_id]
        for _, dispatcher in dispatchers:
            dispatcher.start()
        sessions = list(owners)
        ids = [await rig.insert("get_output", {"lines": 3}, sessions[i % 2]) for i in range(20)]
        office_level = await rig.insert("run_job", {"job_id": "j"})
        for command_id in ids:
            result = await rig.result(command_id)
            assert result.success, result.error
        assert (await rig.result(office_level)).error.startswith("jobs are not enabled")  # type: ignore[union-attr]
        await check_one_result_each(rig, [*ids, office_level])
        for command_id in ids:
            command = await rig.store.get_command(command_id)
            assert command.claimed_by == owners[command.session_id or ""]

        # engine-2 ends its session; a command for it fails at claim, run by nobody
        manager_2 = dispatchers[1][0]
        ended = sessions[1]
        await manager_2.terminate(ended, reason="operator ended it")
        assert (await rig.store.get_session(ended)).status == "terminated"
        late = await rig.insert("send_text", {"text": "echo late"}, ended)
        result = await rig.result(late)
        assert result.error == (
            f"session {ended} has ended: operator ended it; the command was not run"
        )
        claimed = sum(d.stats.claimed for _, d in dispatchers)
        assert claimed == len(ids) + 1  # the failed-at-claim command reached no dispatcher

        # engine-1 dies where nobody can see its pid: it claims nothing more, and its heartbeat
        # runs out; engine-2 fails the commands of its live session at claim
        await dispatchers[0][1].stop(grace=0)
        await rig.stores.age_heartbeat(rig.office.id, "engine-1", 61)
        [silent] = [e for e in await rig.store.list_engines(rig.office.id) if not e.alive]
        orphan = await rig.insert("send_text", {"text": "echo orphan"}, sessions[0])
        result = await rig.result(orphan)
        assert result.error == (
            f"session {sessions[0]}'s engine engine-1 stopped answering (last seen "
            f"{silent.last_seen.astimezone(UTC).isoformat()}); the command was not run"
        )
        assert (await rig.store.get_command(orphan)).claimed_by == "engine-2"
        assert dispatchers[1][1].stats.claimed + dispatchers[0][1].stats.claimed == claimed
    finally:
        for manager, dispatcher in dispatchers:
            await dispatcher.stop(grace=0)
            await manager.close()
