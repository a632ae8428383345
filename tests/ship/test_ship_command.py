"""The `ship_job` command on the Supabase emulator (RLS of the real Postgres): an operator's
row is claimed by a dispatcher, the job's branch is pushed to a local bare origin and merged,
the report is the command's result and the steps are on the timeline; a viewer cannot insert
the row; a malformed payload fails with a result that says what is wrong."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from semo.engine.office.job_ops import job_timeline
from semo.engine.routing.dispatcher import CommandDispatcher
from semo.engine.sessions.manager import SessionManager
from semo.engine.ship.command import ship_command
from semo.engine.ship.settings import ShipSection
from semo.engine.store.base import Store
from semo.engine.store.models import Agent, AgentCommandResult, Job, Office, ShipJobPayload
from tests.store.conftest import open_stores
from tests.support.git_repo import AUTHOR, git, make_repo
from tests.support.waiting import eventually_value


@dataclass
class Rig:
    dsn: str
    store: Store
    office: Office
    job: Job
    repo: Path
    origin: Path
    users: dict[str, str]

    def insert_as(self, who: str, command_type: str, payload: dict[str, Any]) -> str:
        """Insert a command as member `who` would through PostgREST (RLS applies)."""
        claims = {"role": "authenticated", "sub": self.users[who], "aud": "authenticated"}
        command_id = str(uuid.uuid4())
        with psycopg.connect(self.dsn) as conn:
            conn.execute(
                "select set_config('request.jwt.claims', %s, true),"
                " set_config('request.jwt.claim.sub', %s, true),"
                " set_config('request.jwt.claim.role', 'authenticated', true)",
                (json.dumps(claims), claims["sub"]),
            )
            conn.execute('set local role "authenticated"')
            conn.execute(
                "insert into agent_commands (id, office_id, command_type, payload)"
                " values (%s, %s, %s, %s)",
                (command_id, self.office.id, command_type, json.dumps(payload)),
            )
        return command_id


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    repo = make_repo(tmp_path / "repo", {"README": "office repo\n"})
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    git(repo, "remote", "add", "origin", str(origin))
    git(repo, "push", "-q", "origin", "main")
    async with open_stores("supabase", tmp_path) as stores:
        store = await stores.new()
        office = await store.create_office(Office(name="ship", repository=str(repo)))
        fe = await store.upsert_agent(Agent(office_id=office.id, name="fe", role="FE"))
        job = await store.create_job(
            Job(office_id=office.id, agent_id=fe.id, task="Build the login page", status="done")
        )
        branch = f"semo/job/{job.id}"
        base = git(repo, "rev-parse", "main").strip()
        where = tmp_path / "wt"
        git(repo, "worktree", "add", "-q", "-b", branch, str(where), "main")
        (where / "login.html").write_text("<form>login</form>\n")
        git(where, "add", "login.html")
        git(where, *AUTHOR, "commit", "-q", "-m", "FE: the login page")
        job = await store.update_job(job.id, branch=branch, base_branch="main", base_commit=base)
        users = {}
        with psycopg.connect(stores.dsn, autocommit=True) as conn:
            for name, role in (("operator", "operator"), ("viewer", "viewer")):
                row = conn.execute(
                    "insert into auth.users (email) values (%s) returning id", (f"{name}@x.test",)
                ).fetchone()
                assert row is not None
                users[name] = str(row[0])
                conn.execute(
                    "insert into office_members (office_id, user_id, role) values (%s, %s, %s)",
                    (office.id, users[name], role),
                )
        yield Rig(stores.dsn, store, office, job, repo, origin, users)


@pytest.fixture
async def dispatcher(rig: Rig, tmp_path: Path) -> AsyncIterator[CommandDispatcher]:
    async def ship(payload: ShipJobPayload) -> dict[str, Any]:
        return await ship_command(rig.store, rig.office.id, payload, ShipSection())

    async def no_sessions(payload: Any) -> Any:
        raise LookupError("no sessions here")

    async with SessionManager(runtime_dir=tmp_path / "run") as manager:
        running = CommandDispatcher(
            rig.store,
            manager,
            office_id=rig.office.id,
            engine_id="engine-1",
            bus=None,
            create_session=no_sessions,
            ship_job=ship,
            poll_interval=0.1,
        )
        running.start()
        try:
            yield running
        finally:
            await running.stop(grace=0)


async def result_of(store: Store, command_id: str) -> AgentCommandResult:
    return await eventually_value(lambda: store.get_result(command_id), f"result of {command_id}")


async def test_an_operators_ship_job_pushes_and_merges(
    rig: Rig, dispatcher: CommandDispatcher
) -> None:
    payload = {"job_id": rig.job.id, "push": True, "merge": True}
    command_id = rig.insert_as("operator", "ship_job", payload)
    result = await result_of(rig.store, command_id)
    assert result.success, result.error
    branch_head = git(rig.repo, "rev-parse", rig.job.branch or "").strip()
    assert git(rig.origin, "rev-parse", rig.job.branch or "").strip() == branch_head
    assert git(rig.repo, "rev-parse", "main").strip() == branch_head  # fast-forwarded
    assert result.result is not None
    assert result.result["pushed"] == branch_head and result.result["merged"] == branch_head
    steps = [e.step for e in (await job_timeline(rig.store, rig.job.id)).entries]
    assert "pushed" in steps and "merged" in steps


async def test_a_viewer_cannot_insert_ship_job(rig: Rig) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        rig.insert_as("viewer", "ship_job", {"job_id": rig.job.id, "push": True})
    assert git(rig.origin, "branch", "--list").strip() == "main"


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        ({"job_id": "JOB", "push": False}, "say what to do: push, pr and/or merge"),
        ({"job_id": "JOB", "push": "yes please"}, "push: Input should be a valid boolean"),
        ({"push": True}, "job_id: Field required"),
        ({"job_id": "JOB", "merge": True, "force": True}, "force: Extra inputs"),
        ({"job_id": "no-such-job", "push": True}, "no job no-such-job in this office"),
    ],
)
async def test_a_malformed_ship_job_fails_with_a_clear_error(
    rig: Rig, dispatcher: CommandDispatcher, payload: dict[str, Any], says: str
) -> None:
    if payload.get("job_id") == "JOB":
        payload = {**payload, "job_id": rig.job.id}
    command_id = rig.insert_as("operator", "ship_job", payload)
    result = await result_of(rig.store, command_id)
    assert not result.success
    assert says in (result.error or "")
    assert git(rig.origin, "branch", "--list").strip() == "main"  # nothing pushed
    assert (await rig.store.get_job(rig.job.id)).status == "done"  # nothing lost
