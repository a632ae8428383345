"""Reconciling, on every backend: what a dead earlier run (on start) or an engine whose heartbeat
ran out (the periodic pass) left is ended and failed (sessions, in-flight commands, running
jobs; questions of ended sessions are cancelled, and commands for them fail at the next claim);
what a live engine (here or elsewhere) holds is left alone."""

from __future__ import annotations

import asyncio
import os
import socket
from datetime import UTC
from typing import Any

import pytest

from semo.engine.office.operations import answer_question
from semo.engine.reconcile import end_silent_engines, is_dead_run, reconcile, requeue_jobs
from semo.engine.store._shared import FORGET_ENGINES_AFTER
from semo.engine.store.base import Store, StoreConflict
from semo.engine.store.models import Agent, AgentSession, EngineHeartbeat, Job, Office, UserQuestion
from tests.store.conftest import Stores
from tests.support.pids import dead_pid


async def test_dead_runs_are_cleaned_and_live_ones_left_alone(store: Store) -> None:
    host = socket.gethostname()
    dead = f"{host}-{dead_pid()}"
    alive = f"{host}-{os.getppid()}"
    remote = "other-host-123"
    office = await store.create_office(Office(name="o"))
    agent = await store.upsert_agent(Agent(office_id=office.id, name="a", role="BE"))
    rows = {}
    for engine in (dead, alive, remote, "me"):
        rows[engine] = await store.upsert_session(
            AgentSession(office_id=office.id, agent_id=agent.id, engine_id=engine, status="ready")
        )
    claimed = {}
    for engine in (dead, alive, "me"):
        await store.insert_command(office.id, "cancel", session_id=rows[engine].session_id)
        claimed[engine] = await store.claim_next_command(office.id, engine)
    waiting = await store.insert_command(office.id, "get_output", session_id="s")

    report = await reconcile(store, office.id, "me")

    assert report.dead_engines == sorted([dead, "me"])
    assert (report.sessions_ended, report.commands_failed) == (2, 2)
    for engine, ended in ((dead, True), ("me", True), (alive, False), (remote, False)):
        row = await store.get_session(rows[engine].session_id)
        assert (row.status == "terminated") == ended, engine
        if ended:
            assert row.end_reason is not None and "stopped without ending it" in row.end_reason
    for engine, failed in ((dead, True), ("me", True), (alive, False)):
        command = await store.get_command(claimed[engine].id)
        assert command.status == ("failed" if failed else "processing"), engine
        if failed:
            result = await store.get_result(command.id)
            assert result is not None and "stopped while running" in (result.error or "")
    assert (await store.get_command(waiting.id)).status == "pending"
    again = await reconcile(store, office.id, "me")
    assert (again.sessions_ended, again.commands_failed) == (0, 0)


def test_which_runs_count_as_dead() -> None:
    host = "box"
    assert is_dead_run("me", "me", host)
    assert is_dead_run(f"box-{dead_pid()}", "me", host)
    assert not is_dead_run(f"box-{os.getppid()}", "me", host)
    assert not is_dead_run(f"box-{os.getpid()}", "me", host)
    assert not is_dead_run(f"other-{dead_pid()}", "me", host)
    assert not is_dead_run("box-worker", "me", host)


async def test_running_jobs_of_dead_runs_fail_and_the_others_are_left_alone(store: Store) -> None:
    host = socket.gethostname()
    dead = f"{host}-{dead_pid()}"
    alive = f"{host}-{os.getppid()}"
    office = await store.create_office(Office(name="o"))
    old_session = await store.upsert_session(
        AgentSession(office_id=office.id, agent_id="a", engine_id=dead, status="ready")
    )

    async def job(status: str, engine_id: str | None, session_id: str | None = None) -> Job:
        row = await store.create_job(Job(office_id=office.id, agent_id="a", task="t"))
        return await store.update_job(
            row.id, status=status, engine_id=engine_id, session_id=session_id, attempts=1
        )

    failing = {
        dead: await job("running", dead),
        "me": await job("running", "me"),
        # a row from before jobs recorded their engine: its session's engine ran it
        "legacy": await job("running", None, old_session.session_id),
    }
    kept = [
        await job("running", alive),
        await job("running", "other-host-123"),
        await job("running", None),  # nobody can tell who runs it
        await job("done", dead),
        await job("pending", None),
    ]

    out_of_retries = await job("running", dead)
    out_of_retries = await store.update_job(out_of_retries.id, attempts=2)
    # the dead run's heartbeat has not run out yet; this engine's own has just started
    await store.record_heartbeat(office.id, dead, dead_after=600, starting=True)
    await store.record_heartbeat(office.id, "me", dead_after=600, starting=True)

    report = await reconcile(store, office.id, "me")

    # shown dead at once, not when its heartbeat runs out; this engine's own row untouched
    states = {e.engine_id: (e.status, e.alive) for e in await store.list_engines(office.id)}
    assert states == {dead: ("running", False), "me": ("running", True)}

    assert report.jobs_failed == 4
    assert report.dead_engines == sorted([dead, "me"])
    retried = {c.payload["job_id"] for c in await store.list_commands(office.id)}
    for key, row in failing.items():
        after = await store.get_job(row.id)
        engine = dead if key == "legacy" else key
        reason = f"engine {engine} stopped while running this job (found by me on start)"
        assert after.needs_human is False and after.attempts == 1
        if key == "legacy":  # no engine recorded on the row: failed, not retried
            assert (after.status, after.failure_reason) == ("failed", reason)
            assert row.id not in retried
            continue
        # the crash policy's one retry: pending again, with a run_job command for it
        assert after.status == "pending", key
        assert after.failure_reason == f"{reason}; retrying once on a live engine"
        assert after.engine_id is None and row.id in retried
        steps = [e.step for e in await store.list_job_entries(row.id)]
        assert steps == ["engine_died", "retry"]
    last = await store.get_job(out_of_retries.id)
    assert last.status == "failed" and out_of_retries.id not in retried
    assert [e.step for e in await store.list_job_entries(last.id)] == ["engine_died", "failed"]
    assert len(retried) == 2
    for row in kept:
        assert await store.get_job(row.id) == row
    assert "4 running job(s) failed" in report.describe()
    again = await reconcile(store, office.id, "me")
    assert again.jobs_failed == 0
    assert len(await store.list_commands(office.id)) == 2


async def test_questions_of_ended_sessions_are_cancelled(store: Store) -> None:
    host = socket.gethostname()
    dead = f"{host}-{dead_pid()}"
    office = await store.create_office(Office(name="o"))

    async def session(engine_id: str) -> AgentSession:
        return await store.upsert_session(
            AgentSession(office_id=office.id, agent_id="a", engine_id=engine_id, status="ready")
        )

    async def ask(session_id: str | None) -> UserQuestion:
        return await store.create_question(
            UserQuestion(office_id=office.id, agent_id="a", session_id=session_id, question="?")
        )

    of_dead, live, earlier = await session(dead), await session("other-host-1"), await session("x")
    await store.set_session_status(earlier.session_id, "terminated", reason="the CLI quit")
    asked_dead = await ask(of_dead.session_id)
    # left pending by an earlier run (e.g. asked as its session was being ended)
    leftover = await ask(earlier.session_id)
    untouched = [await ask(live.session_id), await ask(None), await ask("unknown-session")]

    report = await reconcile(store, office.id, "me")

    assert (report.sessions_ended, report.questions_cancelled) == (1, 2)
    ended = f"engine {dead} stopped without ending it (found by me on start)"
    for question, reason in (
        (asked_dead, f"session {of_dead.session_id} has ended: {ended}"),
        (leftover, f"session {earlier.session_id} has ended: the CLI quit"),
    ):
        row = await store.get_question(question.id)
        assert (row.status, row.cancel_reason) == ("cancelled", reason)
        with pytest.raises(StoreConflict, match="it can no longer be answered"):
            await answer_question(store, question.id, text="too late")
    assert [q.id for q in await store.list_questions(office.id)] == [q.id for q in untouched]
    assert "2 pending question(s) cancelled" in report.describe()
    assert (await reconcile(store, office.id, "me")).questions_cancelled == 0


async def test_commands_for_a_dead_engines_session_fail_once_it_is_ended(store: Store) -> None:
    host = socket.gethostname()
    dead = f"{host}-{dead_pid()}"
    office = await store.create_office(Office(name="o"))
    # it died a moment ago: its heartbeat has not run out yet
    await store.record_heartbeat(office.id, dead, dead_after=60)
    orphaned = await store.upsert_session(
        AgentSession(office_id=office.id, agent_id="a", engine_id=dead, status="ready")
    )
    waiting = await store.insert_command(
        office.id, "send_prompt", {"prompt": "hi"}, session_id=orphaned.session_id
    )
    # while the store says the dead engine runs the session (and it looks alive), nobody else
    # may take its commands
    assert await store.claim_next_command(office.id, "me") is None

    await reconcile(store, office.id, "me")

    # the session has ended: the next claim (this engine's dispatcher) fails the command
    assert await store.claim_next_command(office.id, "me") is None
    assert (await store.get_command(waiting.id)).status == "failed"
    result = await store.get_result(waiting.id)
    assert result is not None and not result.success
    assert result.error == (
        f"session {orphaned.session_id} has ended: engine {dead} stopped without ending it "
        "(found by me on start); the command was not run"
    )


# -- the periodic pass: engines whose heartbeat ran out, on any host ------------------------------


async def test_the_periodic_pass_ends_what_silent_engines_left(stores: Stores) -> None:
    store = await stores.new()
    office = await store.create_office(Office(name="o"))
    for engine in ("fresh", "silent", "stopped", "me"):
        await store.record_heartbeat(office.id, engine, dead_after=60, starting=True)
    await stores.age_heartbeat(office.id, "silent", 61)
    await store.mark_engine_stopped(office.id, "stopped")
    heartbeats = {e.engine_id: e for e in await store.list_engines(office.id)}
    seen = heartbeats["silent"].last_seen.astimezone(UTC).isoformat()
    stopped_at = heartbeats["stopped"].stopped_at
    assert stopped_at is not None
    what = {
        "silent": f"stopped answering (last seen {seen})",
        "stopped": f"stopped at {stopped_at.astimezone(UTC).isoformat()}",
        # an engine id in the store that never beat (an older semo, a row written by hand)
        "ghost": "never recorded a heartbeat (an engine of an older semo, or a row written by "
        "hand)",
    }
    engines = ["fresh", "silent", "stopped", "ghost", "me"]
    sessions = {
        engine: await store.upsert_session(
            AgentSession(office_id=office.id, agent_id="a", engine_id=engine, status="ready")
        )
        for engine in engines
    }
    questions = {
        engine: await store.create_question(
            UserQuestion(
                office_id=office.id,
                agent_id="a",
                session_id=sessions[engine].session_id,
                question="?",
            )
        )
        for engine in engines
    }

    async def running_job(engine_id: str | None, session_id: str | None = None) -> Job:
        row = await store.create_job(Job(office_id=office.id, agent_id="a", task="t"))
        return await store.update_job(
            row.id, status="running", engine_id=engine_id, session_id=session_id
        )

    jobs = {engine: await running_job(engine) for engine in engines}
    # a row from before jobs recorded their engine: its session's engine runs it
    legacy_job = await running_job(None, sessions["silent"].session_id)
    await store.insert_command(office.id, "run_job", {"job_id": jobs["silent"].id})
    in_flight = await store.claim_next_command(office.id, "silent")
    assert in_flight is not None
    queued = await store.insert_command(
        office.id, "send_prompt", {"prompt": "hi"}, session_id=sessions["fresh"].session_id
    )

    report = await end_silent_engines(store, office.id, "me")

    dead = ["ghost", "silent", "stopped"]
    assert report.dead_engines == dead
    alive = {e.engine_id: (e.status, e.alive) for e in await store.list_engines(office.id)}
    assert alive == {
        "fresh": ("running", True),
        "me": ("running", True),
        "silent": ("running", False),
        "stopped": ("stopped", False),
    }
    assert (report.sessions_ended, report.questions_cancelled) == (3, 3)
    assert (report.jobs_failed, report.commands_failed) == (4, 1)
    for engine in engines:
        session = await store.get_session(sessions[engine].session_id)
        question = await store.get_question(questions[engine].id)
        job = await store.get_job(jobs[engine].id)
        if engine not in dead:
            assert (session.status, question.status, job.status) == ("ready", "pending", "running")
            continue
        ended = f"engine {engine} {what[engine]} without ending it (found by me)"
        assert (session.status, session.end_reason) == ("terminated", ended)
        assert (question.status, question.cancel_reason) == (
            "cancelled",
            f"session {session.session_id} has ended: {ended}",
        )
        # failed, then retried once (the crash policy; engine.routing.job_recovery)
        assert (job.status, job.failure_reason) == (
            "pending",
            f"engine {engine} {what[engine]} while running this job (found by me); "
            "retrying once on a live engine",
        )
    legacy = await store.get_job(legacy_job.id)
    assert legacy.status == "failed" and "engine silent stopped answering" in (
        legacy.failure_reason or ""
    )
    result = await store.get_result(in_flight.id)
    assert result is not None and result.error == (
        f"engine silent {what['silent']} while running this command (found by me)"
    )
    assert (await store.get_command(queued.id)).status == "pending"  # fresh keeps its own

    # a command still queued for a silent engine's session fails at the next claim
    late = await store.insert_command(
        office.id, "send_text", {"text": "x"}, session_id=sessions["silent"].session_id
    )
    claimed = []
    while (command := await store.claim_next_command(office.id, "me")) is not None:
        claimed.append(command)
    # only the run_job commands of the dead engines' retried jobs run
    assert {c.command_type for c in claimed} == {"run_job"}
    assert sorted(c.payload["job_id"] for c in claimed) == sorted(jobs[e].id for e in dead)
    late_result = await store.get_result(late.id)
    assert late_result is not None and late_result.error == (
        f"session {sessions['silent'].session_id} has ended: engine silent {what['silent']} "
        "without ending it (found by me); the command was not run"
    )

    again = await end_silent_engines(store, office.id, "me")
    assert again.dead_engines == [] and again.describe() == "nothing left over by dead engines"


async def test_the_start_pass_forgets_engines_dead_for_a_week(stores: Stores) -> None:
    store = await stores.new()
    office = await store.create_office(Office(name="o"))
    for engine in ("recent", "old"):
        await store.record_heartbeat(office.id, engine, dead_after=60)
    await stores.age_heartbeat(office.id, "recent", 3600)
    await stores.age_heartbeat(office.id, "old", FORGET_ENGINES_AFTER + 60)

    report = await reconcile(store, office.id, "me")

    assert report.engines_forgotten == 1
    assert [e.engine_id for e in await store.list_engines(office.id)] == ["recent"]


async def _work_of(store: Store, office_id: str, engine_id: str) -> dict[str, str]:
    """A live session with a pending question, a claimed command and a running job of
    `engine_id`: their ids by kind."""
    session = await store.upsert_session(
        AgentSession(office_id=office_id, agent_id="a", engine_id=engine_id, status="ready")
    )
    question = await store.create_question(
        UserQuestion(office_id=office_id, agent_id="a", session_id=session.session_id, question="?")
    )
    job = await store.create_job(Job(office_id=office_id, agent_id="a", task="t"))
    await store.update_job(job.id, status="running", engine_id=engine_id)
    await store.insert_command(office_id, "run_job", {"job_id": job.id})
    command = await store.claim_next_command(office_id, engine_id)
    assert command is not None
    return {
        "session": session.session_id,
        "question": question.id,
        "job": job.id,
        "command": command.id,
    }


async def _state_of(store: Store, work: dict[str, str]) -> tuple[str, str, str, str]:
    return (
        (await store.get_session(work["session"])).status,
        (await store.get_question(work["question"])).status,
        (await store.get_job(work["job"])).status,
        (await store.get_command(work["command"])).status,
    )


async def test_an_engine_that_beats_after_the_pass_read_the_heartbeats_keeps_its_work(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pass reads the heartbeats once; an engine silent in that reading that beats again
    right after it ("back"), or that had no row then and starts right after it ("new"), keeps
    its session, question, command and job: the store decides with the writes."""
    store = await stores.new()
    office = await store.create_office(Office(name="o"))
    await store.record_heartbeat(office.id, "back", dead_after=60)
    await stores.age_heartbeat(office.id, "back", 61)
    work = {engine: await _work_of(store, office.id, engine) for engine in ("back", "new", "gone")}
    read = store.list_engines

    async def read_then_they_beat(office_id: str) -> list[EngineHeartbeat]:
        rows = await read(office_id)
        assert {row.engine_id: row.alive for row in rows} == {"back": False}
        await store.record_heartbeat(office_id, "back", dead_after=60)
        await store.record_heartbeat(office_id, "new", dead_after=60, starting=True)
        return rows

    monkeypatch.setattr(store, "list_engines", read_then_they_beat)
    report = await end_silent_engines(store, office.id, "me")

    assert report.dead_engines == ["gone"]
    assert (report.sessions_ended, report.questions_cancelled) == (1, 1)
    assert (report.commands_failed, report.jobs_failed) == (1, 1)
    for engine in ("back", "new"):
        assert await _state_of(store, work[engine]) == (
            "ready",
            "pending",
            "running",
            "processing",
        ), engine
        assert await store.get_result(work[engine]["command"]) is None
    # its job failed and went back to pending for its one retry
    assert await _state_of(store, work["gone"]) == ("terminated", "cancelled", "pending", "failed")


async def test_a_job_finished_while_the_pass_runs_stays_done(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await stores.new()
    office = await store.create_office(Office(name="o"))
    await store.record_heartbeat(office.id, "silent", dead_after=60)
    await stores.age_heartbeat(office.id, "silent", 61)
    job = await store.create_job(Job(office_id=office.id, agent_id="a", task="t"))
    await store.update_job(job.id, status="running", engine_id="silent")
    list_jobs = store.list_jobs

    async def list_then_it_finishes(office_id: str, **kw: Any) -> list[Job]:
        rows = await list_jobs(office_id, **kw)
        await store.update_job(job.id, status="done")  # its engine finished it just then
        return rows

    monkeypatch.setattr(store, "list_jobs", list_then_it_finishes)
    report = await end_silent_engines(store, office.id, "me")

    assert report.jobs_failed == 0
    done = await store.get_job(job.id)
    assert (done.status, done.failure_reason) == ("done", None)


async def test_passes_running_at_once_end_each_session_once(stores: Stores) -> None:
    """Two engines' passes meet the same dead engine: each session is ended once, with the
    first reason, and counted once."""
    first, second = await stores.new(), await stores.new()
    office = await first.create_office(Office(name="o"))
    await first.record_heartbeat(office.id, "silent", dead_after=60)
    await stores.age_heartbeat(office.id, "silent", 61)
    sessions = [
        await first.upsert_session(
            AgentSession(office_id=office.id, agent_id="a", engine_id="silent", status="ready")
        )
        for _ in range(5)
    ]

    reports = await asyncio.gather(
        end_silent_engines(first, office.id, "engine-1"),
        end_silent_engines(second, office.id, "engine-2"),
    )

    assert sum(r.sessions_ended for r in reports) == len(sessions)
    for session in sessions:
        row = await first.get_session(session.session_id)
        assert row.status == "terminated" and row.end_reason is not None
        finder = row.end_reason.rsplit("(found by ", 1)[1]
        assert finder in ("engine-1)", "engine-2)")


async def test_an_engine_of_this_machine_whose_process_is_gone_is_taken_over_at_once(
    stores: Stores,
) -> None:
    """Heartbeats alive for a minute: an engine `<host>-<pid>` whose process has exited is
    taken over by the next pass (its row expired first), even before the pass may judge
    silence (`heartbeats=False`); one whose process lives, and one of another host, keep
    their work."""
    store = await stores.new()
    office = await store.create_office(Office(name="o"))
    host = socket.gethostname()
    sleeper = await asyncio.create_subprocess_exec("sleep", "60")
    try:
        gone, alive, remote = f"{host}-{dead_pid()}", f"{host}-{sleeper.pid}", "other-host-1"
        for engine in (gone, alive, remote):
            await store.record_heartbeat(office.id, engine, dead_after=60, starting=True)
        work = {
            engine: await _work_of(store, office.id, engine) for engine in (gone, alive, remote)
        }

        report = await end_silent_engines(store, office.id, "me", heartbeats=False)

        assert report.dead_engines == [gone]
        assert await _state_of(store, work[gone]) == (
            "terminated",
            "cancelled",
            "pending",
            "failed",
        )
        for engine in (alive, remote):
            assert await _state_of(store, work[engine]) == (
                "ready",
                "pending",
                "running",
                "processing",
            ), engine
        rows = {row.engine_id: row.alive for row in await store.list_engines(office.id)}
        assert rows == {gone: False, alive: True, remote: True}
        pending = await store.list_commands(office.id, status="pending")
        assert [c.payload for c in pending] == [{"job_id": work[gone]["job"]}]  # its retry
    finally:
        sleeper.kill()
        await sleeper.wait()


async def test_a_job_claimed_by_a_dead_engine_before_it_ran_is_requeued(stores: Stores) -> None:
    """A dead engine held a job's `run_job` command but had not started the job (still
    pending): its end fails the command, and the job gets a new one (and a `requeued` step),
    so it is not left pending with no command to run it; a job whose command is still queued
    is left as it is."""
    store = await stores.new()
    office = await store.create_office(Office(name="o"))
    gone = f"{socket.gethostname()}-{dead_pid()}"
    await store.record_heartbeat(office.id, gone, dead_after=60, starting=True)
    claimed = await store.create_job(Job(office_id=office.id, agent_id="a", task="claimed"))
    await store.insert_command(office.id, "run_job", {"job_id": claimed.id})
    command = await store.claim_next_command(office.id, gone)
    assert command is not None and command.payload == {"job_id": claimed.id}
    waiting = await store.create_job(Job(office_id=office.id, agent_id="a", task="waiting"))
    await store.insert_command(office.id, "run_job", {"job_id": waiting.id})

    report = await end_silent_engines(store, office.id, "me", heartbeats=False)

    assert report.dead_engines == [gone] and report.jobs_requeued == 1
    assert (await store.get_command(command.id)).status == "failed"
    pending = await store.list_commands(office.id, status="pending")
    assert sorted(c.payload["job_id"] for c in pending) == sorted([claimed.id, waiting.id])
    steps = [e.step for e in await store.list_job_entries(claimed.id)]
    assert steps[-1] == "requeued"
    assert (await store.get_job(claimed.id)).status == "pending"


async def test_a_job_whose_run_job_lease_ran_out_before_it_started_is_requeued(
    stores: Stores,
) -> None:
    """`recover_expired` fails a run_job command whose lease ran out (not safe to repeat);
    `requeue_jobs` (what the engine's pass does with it) gives the still pending job a new
    command: it is not left pending with nothing to run it."""
    store = await stores.new()
    office = await store.create_office(Office(name="o"))
    job = await store.create_job(Job(office_id=office.id, agent_id="a", task="t"))
    await store.insert_command(office.id, "run_job", {"job_id": job.id})
    command = await store.claim_next_command(office.id, "slow-engine", lease_seconds=0.2)
    assert command is not None
    await asyncio.sleep(0.5)
    recovered = await store.recover_expired()
    assert [(c.id, c.status) for c in recovered] == [(command.id, "failed")]

    assert await requeue_jobs(store, office.id, [job.id], "lease ran out") == 1
    assert await requeue_jobs(store, office.id, [job.id], "lease ran out") == 0  # queued now
    pending = await store.list_commands(office.id, status="pending")
    assert [c.payload for c in pending] == [{"job_id": job.id}]
