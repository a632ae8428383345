"""open_store: the configured backend, not connected yet.

Re-exported by semo.engine.store, which loads this module on first use so that `semo --help`
does not import pydantic."""

from __future__ import annotations

import importlib.util

from semo.engine.store.base import Store, StoreError
from semo.engine.store.settings import StoreConfig


def open_store(config: StoreConfig | None = None) -> Store:
    """The configured store, not yet connected: use `async with open_store() as store:`."""
    config = config or StoreConfig.from_env()
    if config.backend == "sqlite":
        from semo.engine.store.sqlite import SqliteStore

        return SqliteStore(config.sqlite_path)
    if config.backend == "postgres":
        dsn = config.dsn()
        try:
            from semo.engine.store.postgres import PostgresStore
        except ImportError as error:
            raise StoreError(
                f"the postgres store needs psycopg 3: pip install 'psycopg[binary]' ({error})"
            ) from None
        wakeups = "poll" if config.pooler == "transaction" else config.wakeups
        return PostgresStore(dsn, pool_size=config.pool_size, pooler=config.pooler, wakeups=wakeups)
    if importlib.util.find_spec("semo.engine.store.supabase") is None:
        raise StoreError(
            "the supabase store is not available yet: it arrives with the Supabase emulator. "
            "Meanwhile use SEMO_STORE=postgres with the project's direct connection string "
            "as SEMO_DATABASE_URL"
        )
    from semo.engine.store import supabase

    factory = getattr(supabase, "from_config", None) or supabase.SupabaseStore.from_config
    return factory(config)
