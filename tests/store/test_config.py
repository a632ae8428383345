"""StoreConfig and open_store: backend choice from the environment, secrets kept out of sight."""

from __future__ import annotations

from pathlib import Path

import pytest

from semo.engine.store import StoreConfig, open_store, redact_dsn
from semo.engine.store.base import StoreError, StoreUnavailable
from semo.engine.store.postgres import PostgresStore
from semo.engine.store.sqlite import SqliteStore, default_sqlite_path
from semo.engine.store.supabase import SupabaseStore


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


def test_supabase_from_env_hides_the_key() -> None:
    key = "eyJhbGciOiJIUzI1NiJ9.service-role-secret.sig"
    config = StoreConfig.from_env(
        {
            "SEMO_STORE": "supabase",
            "SUPABASE_URL": "https://xyz.supabase.co",
            "SUPABASE_SERVICE_ROLE_KEY": key,
        }
    )
    store = open_store(config)
    assert isinstance(store, SupabaseStore)
    assert store.url == "https://xyz.supabase.co"
    for text in (repr(store), str(store), repr(config), str(config), config.describe()):
        assert key not in text
    assert "xyz.supabase.co" in repr(store) and "xyz.supabase.co" in config.describe()


@pytest.mark.parametrize(
    ("env", "missing"),
    [
        ({"SUPABASE_SERVICE_ROLE_KEY": "k"}, ["SUPABASE_URL"]),
        ({"SUPABASE_URL": "https://xyz.supabase.co"}, ["SUPABASE_SERVICE_ROLE_KEY"]),
        ({"SUPABASE_URL": "", "SUPABASE_SERVICE_ROLE_KEY": ""}, ["SUPABASE_URL", "SERVICE_ROLE"]),
    ],
)
def test_supabase_needs_a_url_and_a_key(env: dict[str, str], missing: list[str]) -> None:
    with pytest.raises(StoreError) as raised:
        open_store(StoreConfig.from_env({"SEMO_STORE": "supabase", **env}))
    for name in missing:
        assert name in str(raised.value)


def test_supabase_url_must_be_http() -> None:
    config = StoreConfig.from_env(
        {
            "SEMO_STORE": "supabase",
            "SUPABASE_URL": "xyz.supabase.co",
            "SUPABASE_SERVICE_ROLE_KEY": "k",
        }
    )
    with pytest.raises(StoreError, match="http"):
        open_store(config)


async def test_supabase_unreachable_is_unavailable_without_the_key() -> None:
    key = "service-role-secret-value"
    store = SupabaseStore("http://127.0.0.1:1", key, connect_timeout=2)
    with pytest.raises(StoreUnavailable) as raised:
        await store.open()
    assert "127.0.0.1:1" in str(raised.value) and key not in str(raised.value)


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
