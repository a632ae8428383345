"""StoreConfig and open_store: backend choice from the environment, secrets kept out of sight."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.store import StoreConfig, open_store, redact_dsn
from engine.store.base import StoreError
from engine.store.postgres import PostgresStore
from engine.store.sqlite import SqliteStore, default_sqlite_path


def test_default_is_sqlite_in_the_state_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = StoreConfig.from_env({})
    assert config.backend == "sqlite"
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    store = open_store(config)
    assert isinstance(store, SqliteStore)
    assert store.path == tmp_path / "semo" / "semo.db"
    monkeypatch.delenv("XDG_STATE_HOME")
    assert default_sqlite_path() == Path.home() / ".local/state/semo/semo.db"
    monkeypatch.setenv("XDG_STATE_HOME", "relative/ignored")  # the XDG spec says: ignore
    assert default_sqlite_path() == Path.home() / ".local/state/semo/semo.db"


async def test_sqlite_creates_its_folder(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "semo.db"
    config = StoreConfig.from_env({"SEMO_STORE": "sqlite", "SEMO_SQLITE_PATH": str(path)})
    async with open_store(config) as store:
        assert await store.list_offices() == []
    assert path.exists()


def test_postgres_from_env_hides_the_password() -> None:
    url = "postgresql://semo:hunter2@db.example:5432/semo"
    config = StoreConfig.from_env({"SEMO_STORE": "Postgres", "SEMO_DATABASE_URL": url})
    assert config.backend == "postgres" and config.dsn() == url
    assert "hunter2" not in repr(config) and "hunter2" not in str(config)
    assert "hunter2" not in config.describe()
    store = open_store(config)
    assert isinstance(store, PostgresStore)
    assert "hunter2" not in repr(store) and "db.example" in repr(store)


def test_postgres_needs_a_url() -> None:
    with pytest.raises(StoreError, match="SEMO_DATABASE_URL"):
        open_store(StoreConfig.from_env({"SEMO_STORE": "postgres"}))


def test_unknown_backend() -> None:
    with pytest.raises(StoreError, match="mysql"):
        StoreConfig.from_env({"SEMO_STORE": "mysql"})


def test_supabase_says_when_it_arrives() -> None:
    config = StoreConfig.from_env(
        {"SEMO_STORE": "supabase", "SUPABASE_URL": "http://x", "SUPABASE_SERVICE_ROLE_KEY": "k"}
    )
    with pytest.raises(StoreError, match="emulator"):
        open_store(config)


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        ("postgresql://u:s3cr@t@h:5/db", "postgresql://u:***@h:5/db"),
        ("postgres://u:pw@h/db?sslmode=require", "postgres://u:***@h/db?sslmode=require"),
        ("postgresql://h/db?password=pw", "postgresql://h/db?password=***"),
        ("host=h password='a b' dbname=x", "host=h password=*** dbname=x"),
        ("host=h password=pw user=u", "host=h password=*** user=u"),
        ("postgresql://u@h:5432/db", "postgresql://u@h:5432/db"),
    ],
)
def test_redact_dsn(dsn: str, shown: str) -> None:
    assert redact_dsn(dsn) == shown
