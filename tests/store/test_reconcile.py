"""Reconciling on start, on every backend: what a dead earlier run left is ended and failed
(sessions, in-flight commands, running jobs; questions of ended sessions are cancelled, and
commands for them fail at the next claim); what a live engine (here or elsewhere) holds is
left alone."""

from __future__ import annotations

import os
import socket
import subprocess

import pytest

from engine.reconcile import is_dead_run, reconcile
from engine.store.base import Store, StoreConflict
from engine.store.models import Agent, AgentSession, Job, Office, UserQuestion
from engine.store.operations import answer_question


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


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

    report = await reconcile(store, office.id, "me")

    assert report.jobs_failed == 3
    assert report.dead_engines == sorted([dead, "me"])
    for key, row in failing.items():
        after = await store.get_job(row.id)
        engine = dead if key == "legacy" else key
        assert after.status == "failed", key
        assert after.failure_reason == (
            f"engine {engine} stopped while running this job (found by me on start)"
        )
        assert after.needs_human is False and after.attempts == 1
    for row in kept:
        assert await store.get_job(row.id) == row
    assert "3 running job(s) failed" in report.describe()
    assert (await reconcile(store, office.id, "me")).jobs_failed == 0


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
    orphaned = await store.upsert_session(
        AgentSession(office_id=office.id, agent_id="a", engine_id=dead, status="ready")
    )
    waiting = await store.insert_command(
        office.id, "send_prompt", {"prompt": "hi"}, session_id=orphaned.session_id
    )
    # while the store says the dead engine runs the session, nobody else may take its commands
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
