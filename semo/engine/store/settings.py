"""StoreConfig: which store to use, from the environment or semo.toml's [store]."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from semo.engine.store._shared import redact_dsn
from semo.engine.store.base import StoreError

Backend = Literal["sqlite", "postgres", "supabase"]


class StoreConfig(BaseModel):
    """Which store to use. Secrets are SecretStr: printing a config never shows them."""

    model_config = ConfigDict(frozen=True)

    backend: Backend = "sqlite"
    #: postgres: a libpq URL or key=value string (e.g. a Supabase direct connection string)
    database_url: SecretStr | None = None
    #: sqlite: the database file (default: the user's state directory)
    sqlite_path: Path | None = None
    #: supabase: the project URL and its service-role key
    supabase_url: str | None = None
    supabase_key: SecretStr | None = None
    #: supabase: the most Realtime broadcasts (engine events) this engine sends a second, its
    #: share of the plan's message budget (docs/SUPABASE.md); None: no cap
    realtime_broadcasts_per_second: float | None = Field(default=None, gt=0)
    #: postgres: the most connections an engine opens at once (bursts; given back when idle)
    pool_size: int = Field(default=4, ge=1, le=100)
    #: postgres: "transaction" behind a transaction-mode pooler (PgBouncer, Supabase's port
    #: 6543): no prepared statements, no session settings, wake-ups polled instead of LISTEN
    pooler: Literal["session", "transaction"] = "session"
    #: postgres: how the engine hears of new rows: "poll" (semo_change_seq every 0.2 s, on
    #: its one idle connection) or "listen" (LISTEN: a second connection, held)
    wakeups: Literal["poll", "listen"] = "poll"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> StoreConfig:
        """From SEMO_STORE, SEMO_DATABASE_URL, SEMO_SQLITE_PATH, SUPABASE_URL,
        SUPABASE_SERVICE_ROLE_KEY, SEMO_PG_POOL_SIZE, SEMO_PG_POOLER and SEMO_PG_WAKEUPS (unset
        or empty variables mean the defaults)."""
        env = os.environ if env is None else env
        backend = (env.get("SEMO_STORE") or "sqlite").strip().lower()
        tuning: dict[str, str] = {}
        if env.get("SEMO_PG_POOL_SIZE"):
            tuning["pool_size"] = env["SEMO_PG_POOL_SIZE"].strip()
        if env.get("SEMO_PG_POOLER"):
            tuning["pooler"] = env["SEMO_PG_POOLER"].strip().lower()
        if env.get("SEMO_PG_WAKEUPS"):
            tuning["wakeups"] = env["SEMO_PG_WAKEUPS"].strip().lower()
        try:
            # the variables' text, parsed and checked by the model
            return cls.model_validate(
                {
                    "backend": backend,
                    "database_url": env.get("SEMO_DATABASE_URL") or None,
                    "sqlite_path": env.get("SEMO_SQLITE_PATH") or None,
                    "supabase_url": env.get("SUPABASE_URL") or None,
                    "supabase_key": env.get("SUPABASE_SERVICE_ROLE_KEY") or None,
                    **tuning,
                }
            )
        except ValidationError as error:
            if any(e["loc"] and e["loc"][0] in tuning for e in error.errors()):
                raise StoreError(
                    "SEMO_PG_POOL_SIZE must be a whole number from 1 to 100, SEMO_PG_POOLER "
                    "'session' or 'transaction' and SEMO_PG_WAKEUPS 'poll' or 'listen', "
                    f"not {tuning}"
                ) from None
            raise StoreError(
                f"SEMO_STORE={backend!r} is not a store backend (use sqlite, postgres or supabase)"
            ) from None

    def dsn(self) -> str:
        """The Postgres connection string (StoreError when SEMO_DATABASE_URL is not set)."""
        if self.database_url is None or not self.database_url.get_secret_value():
            raise StoreError(
                f"the {self.backend} store needs SEMO_DATABASE_URL "
                "(e.g. postgresql://postgres@127.0.0.1:5432/semo)"
            )
        return self.database_url.get_secret_value()

    def describe(self) -> str:
        """One line for logs and status bars, without secrets."""
        if self.backend == "sqlite":
            from semo.engine.store.sqlite import default_sqlite_path

            return f"sqlite {self.sqlite_path or default_sqlite_path()}"
        if self.backend == "postgres":
            url = self.database_url.get_secret_value() if self.database_url else "(no URL)"
            return f"postgres {redact_dsn(url)}"
        return f"supabase {self.supabase_url or '(no SUPABASE_URL)'}"
