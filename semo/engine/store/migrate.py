"""Apply `migrations/*.sql` to a Postgres/Supabase database, in order, each exactly once.

Each file runs in its own transaction and is recorded in `semo_migrations` (name, checksum,
applied_at) in that same transaction, so a failing file leaves nothing behind. A session-level
advisory lock makes two engines (or two `semo migrate`) running at once safe: the second waits,
then finds nothing left to do.

Where the files are: `$SEMO_MIGRATIONS_DIR` if set; else `migrations/` at the root of a source
checkout; else the copy a wheel installs as data files into `<prefix>/share/semo/migrations`
(see `migrations_dir`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import sysconfig
from pathlib import Path

import psycopg

from semo.engine.store._shared import redact_dsn
from semo.engine.store.base import StoreError, StoreUnavailable

log = logging.getLogger(__name__)

#: pg_advisory_lock key: "semo" in ASCII
LOCK_KEY = 0x73656D6F

_HERE = Path(__file__).resolve().parent
#: where an installed wheel keeps the files, under the installation's data directory
INSTALLED_SUBDIR = "share/semo/migrations"


def migrations_dir() -> Path:
    """The folder holding the migration files (see the module docstring)."""
    override = os.environ.get("SEMO_MIGRATIONS_DIR")
    if override:
        return Path(override)
    candidates = [_HERE.parents[2] / "migrations"]  # source checkout (also editable installs)
    # installed wheel: pyproject's [tool.setuptools.data-files] puts them in <data>/share/semo
    for scheme in (sysconfig.get_default_scheme(), sysconfig.get_preferred_scheme("user")):
        with contextlib.suppress(KeyError, ValueError):
            candidates.append(Path(sysconfig.get_path("data", scheme)) / INSTALLED_SUBDIR)
    for candidate in candidates:
        if candidate.is_dir() and any(candidate.glob("*.sql")):
            return candidate
    looked = ", ".join(str(c) for c in dict.fromkeys(candidates))
    raise StoreError(
        f"cannot find the migrations folder (looked in {looked}); set SEMO_MIGRATIONS_DIR"
    )


def migration_files(folder: Path | None = None) -> list[Path]:
    return sorted((folder or migrations_dir()).glob("*.sql"), key=lambda p: p.name)


async def migrate(
    dsn: str, *, folder: Path | None = None, connect_timeout: float = 10.0
) -> list[str]:
    """Apply the migrations not applied yet; return their names (empty when up to date)."""
    files = migration_files(folder)
    where = redact_dsn(dsn)
    try:
        async with asyncio.timeout(connect_timeout + 1):
            conn = await psycopg.AsyncConnection.connect(
                dsn, autocommit=True, connect_timeout=max(2, round(connect_timeout))
            )
    except TimeoutError:
        raise StoreUnavailable(f"cannot connect to {where}: no answer") from None
    except psycopg.Error as error:
        raise StoreUnavailable(f"cannot connect to {where}: {str(error).strip()}") from None
    applied: list[str] = []
    try:
        async with conn:
            await conn.execute("select pg_advisory_lock(%s)", (LOCK_KEY,))
            try:
                await conn.execute(
                    "create table if not exists semo_migrations ("
                    " name text primary key,"
                    " checksum text not null,"
                    " applied_at timestamptz not null default now())"
                )
                cur = await conn.execute("select name, checksum from semo_migrations")
                done: dict[str, str] = dict(await cur.fetchall())
                for path in files:
                    text = path.read_text(encoding="utf-8")
                    checksum = hashlib.sha256(text.encode()).hexdigest()
                    if path.name in done:
                        if done[path.name] != checksum:
                            log.warning(
                                "semo migrate: %s changed since it was applied; not re-applied",
                                path.name,
                            )
                        continue
                    try:
                        async with conn.transaction():
                            await conn.execute(text.encode())  # no parameters: many statements
                            await conn.execute(
                                "insert into semo_migrations (name, checksum) values (%s, %s)",
                                (path.name, checksum),
                            )
                    except psycopg.Error as error:
                        if isinstance(error, psycopg.OperationalError):
                            raise
                        raise StoreError(
                            f"migration {path.name} failed (nothing of it was applied): "
                            f"{(error.diag.message_primary or str(error)).strip()}"
                        ) from None
                    log.info("semo migrate: applied %s", path.name)
                    applied.append(path.name)
            finally:
                if not conn.closed and not conn.broken:
                    await conn.execute("select pg_advisory_unlock(%s)", (LOCK_KEY,))
    except psycopg.Error as error:
        raise StoreUnavailable(f"migrating {where} failed: {str(error).strip()}") from None
    return applied
