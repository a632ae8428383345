"""Pydantic row models, the async Store interface and its backends.

    store = open_store()          # from SEMO_STORE / SEMO_DATABASE_URL / SEMO_SQLITE_PATH
    async with store:             # connects (sqlite: creates the schema)
        await store.insert_command(office_id, "send_prompt", {"prompt": "hi"}, session_id=s)

`open_store` builds the store without connecting; `async with` (or `await store.open()`) does.
Backends are imported lazily, so the sqlite default never imports psycopg.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from semo.engine.store._shared import redact_dsn
    from semo.engine.store.base import (
        DEFAULT_LEASE_SECONDS,
        NotFound,
        Store,
        StoreConflict,
        StoreError,
        StoreUnavailable,
    )
    from semo.engine.store.factory import open_store
    from semo.engine.store.settings import StoreConfig

__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "NotFound",
    "Store",
    "StoreConfig",
    "StoreConflict",
    "StoreError",
    "StoreUnavailable",
    "open_store",
    "redact_dsn",
]

_HOME = {"StoreConfig": "settings", "open_store": "factory", "redact_dsn": "_shared"}


def __getattr__(name: str) -> Any:
    """Names load on first use: the store commands (imported for `semo --help`) run this package's
    __init__, which must not import pydantic and the models."""
    if name not in __all__:
        raise AttributeError(f"module 'semo.engine.store' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"semo.engine.store.{_HOME.get(name, 'base')}"), name)
    globals()[name] = value
    return value
