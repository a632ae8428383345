"""Every store command reads semo.toml: `--config` (default ./semo.toml when present) picks the
store and the office; the environment still overrides each store setting (docs/CONFIG.md).

The real `semo` CLI runs as a subprocess with an environment free of SEMO_* and SUPABASE_*
variables, so the file alone chooses postgres (a fresh database per test).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from semo.engine.config import config_secrets, load_config
from semo.engine.store.base import Store
from semo.engine.store.models import Agent, AgentSession, Office, UserQuestion
from semo.engine.store.postgres import PostgresStore
from tests.store.conftest import fresh_database
from tests.support.semo_process import run_semo, semo_env


async def semo(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return await run_semo(*args, cwd=cwd, env=env)


def write_config(folder: Path, dsn: str, *, office: str = "acme") -> Path:
    path = folder / "semo.toml"
    path.write_text(
        f'[office]\nname = "{office}"\n\n[store]\nbackend = "postgres"\ndatabase_url = "{dsn}"\n'
    )
    return path


@pytest.fixture
async def dsn() -> AsyncIterator[str]:
    async with fresh_database() as url:
        yield url


async def seed(store: Store) -> tuple[Office, AgentSession, UserQuestion]:
    """Two offices (so "the only office" cannot be what picks acme), a session and a question."""
    await store.create_office(Office(name="other"))
    office = await store.create_office(Office(name="acme"))
    agent = await store.upsert_agent(Agent(office_id=office.id, name="Frontend", role="FE"))
    session = await store.upsert_session(
        AgentSession(office_id=office.id, agent_id=agent.id, status="ready")
    )
    question = await store.create_question(
        UserQuestion(
            office_id=office.id, agent_id=agent.id, session_id=session.session_id, question="Port?"
        )
    )
    return office, session, question


async def test_migrate_then_every_command_uses_the_files_store_and_office(
    dsn: str, tmp_path: Path
) -> None:
    config = write_config(tmp_path, dsn)
    migrated = await semo("migrate", "--config", str(config), cwd=tmp_path)
    assert migrated.returncode == 0, migrated.stderr
    assert "applied: 0001_core.sql" in migrated.stdout
    store = PostgresStore(dsn)
    async with store:
        office, session, question = await seed(store)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    sessions = await semo("sessions", "--config", str(config), "--json", cwd=elsewhere)
    assert sessions.returncode == 0, sessions.stderr
    [row] = json.loads(sessions.stdout)
    assert (row["session_id"], row["role"], row["name"]) == (session.session_id, "FE", "Frontend")
    table = await semo("sessions", "--config", str(config), cwd=elsewhere)
    header = table.stdout.splitlines()[0].split()
    assert header[:3] == ["session_id", "role", "name"]
    assert "Frontend" in table.stdout

    # ./semo.toml is the default
    listed = await semo("questions", "--json", cwd=tmp_path)
    assert [q["id"] for q in json.loads(listed.stdout)] == [question.id], listed.stderr
    answered = await semo("answer", question.id, "8080", cwd=tmp_path)
    assert answered.returncode == 0, answered.stderr
    engines = await semo("engines", "--json", cwd=tmp_path)
    assert engines.returncode == 0 and json.loads(engines.stdout) == []
    command = await semo(
        "command", "create_session", "--payload", '{"role": "FE"}', "--json", cwd=tmp_path
    )
    assert command.returncode == 0, command.stderr
    async with store:
        [pending] = await store.list_commands(office.id)
    assert pending.id == json.loads(command.stdout)["id"]
    ended = await semo("end-session", session.session_id, cwd=tmp_path)
    assert ended.returncode == 0, ended.stderr

    # --office and SEMO_OFFICE still choose another office than the file's
    other = await semo("sessions", "--office", "other", "--json", cwd=tmp_path)
    assert json.loads(other.stdout) == []
    by_env = await semo("questions", "--json", cwd=tmp_path, env=semo_env(SEMO_OFFICE="other"))
    assert json.loads(by_env.stdout) == []


async def test_the_environment_overrides_the_files_store(dsn: str, tmp_path: Path) -> None:
    write_config(tmp_path, dsn)
    sqlite = tmp_path / "env.db"
    env = semo_env(SEMO_STORE="sqlite", SEMO_SQLITE_PATH=str(sqlite))
    result = await semo("migrate", cwd=tmp_path, env=env)
    assert result.returncode == 0
    assert "sqlite store creates its schema itself" in result.stdout
    # the file's postgres database was not touched: the sqlite file has no office
    listed = await semo("sessions", cwd=tmp_path, env=env)
    assert listed.returncode == 2
    assert "no office 'acme'" in listed.stderr


async def test_a_named_config_that_is_missing_or_bad_is_exit_2(tmp_path: Path) -> None:
    missing = await semo("sessions", "--config", str(tmp_path / "nope.toml"), cwd=tmp_path)
    assert missing.returncode == 2
    assert "nope.toml: no such file" in missing.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text('[office]\nname = "x"\n[store]\nbackend = "oracle"\n')
    refused = await semo("questions", "--config", str(bad), cwd=tmp_path)
    assert refused.returncode == 2
    assert "[store] backend" in refused.stderr


async def test_without_a_config_file_the_environment_alone_decides(tmp_path: Path) -> None:
    db = tmp_path / "semo.db"
    env = semo_env(SEMO_STORE="sqlite", SEMO_SQLITE_PATH=str(db))
    result = await semo("sessions", cwd=tmp_path, env=env)
    assert result.returncode == 2
    assert "the store has no office yet" in result.stderr


def test_only_the_dsns_password_is_a_log_secret(tmp_path: Path) -> None:
    plain = load_config(write_config(tmp_path, "postgresql://postgres@127.0.0.1:5432/semo"))
    assert config_secrets(plain) == []
    with_password = load_config(
        write_config(tmp_path, "postgresql://postgres:hunter22@127.0.0.1:5432/semo")
    )
    assert config_secrets(with_password) == ["hunter22"]
