"""Reconciling on start, on every backend: what a dead earlier run left is ended and failed;
what a live engine (here or elsewhere) holds is left alone."""

from __future__ import annotations

import os
import socket
import subprocess

from engine.reconcile import is_dead_run, reconcile
from engine.store.base import Store
from engine.store.models import Agent, AgentSession, Office


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
