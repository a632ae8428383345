"""Apply `migrations/*.sql` to a Postgres/Supabase database, in order, each exactly once.

How it works: docs/STORE.md, "Migrations".
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import sysconfig
from collections.abc import Callable
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


#: pg_default_acl object types whose defaults a migration closes, and their ALTER DEFAULT names
_DEFAULT_KINDS = {"r": "tables", "S": "sequences", "f": "functions"}
#: the defaults the migrating role gives anon/authenticated/PUBLIC (schema and global ones)
_DEFAULTS = """
select d.defaclnamespace = 0, d.defaclobjtype::text,
       case when a.grantee = 0 then 'public' else pg_get_userbyid(a.grantee)::text end,
       a.privilege_type, a.is_grantable
  from pg_default_acl d, aclexplode(d.defaclacl) a
 where d.defaclrole = current_user::regrole
   and d.defaclnamespace in (0, current_schema()::regnamespace)
   and d.defaclobjtype in ('r', 'S', 'f')
   and (a.grantee = 0 or pg_get_userbyid(a.grantee) in ('anon', 'authenticated'))
"""
#: whether the role has a global default for functions (without one, PUBLIC may EXECUTE)
_GLOBAL_FUNCTIONS = """
select exists (select 1 from pg_default_acl where defaclrole = current_user::regrole
                  and defaclnamespace = 0 and defaclobjtype = 'f')
"""

Default = tuple[bool, str, str, str, bool]


def _alter_default(default: Default, schema: str, grant: bool) -> str:
    is_global, kind, grantee, privilege, grantable = default
    where = "" if is_global else f' in schema "{schema}"'
    who = "public" if grantee == "public" else f'"{grantee}"'
    if grant:
        option = " with grant option" if grantable else ""
        return (
            f"alter default privileges{where} grant {privilege} on {_DEFAULT_KINDS[kind]}"
            f" to {who}{option}"
        )
    return (
        f"alter default privileges{where} revoke {privilege} on {_DEFAULT_KINDS[kind]} from {who}"
    )


async def _close_defaults(conn: psycopg.AsyncConnection) -> list[Default]:
    """Take back the role's default grants to anon, authenticated and PUBLIC (in this
    transaction); the ones taken, for `_restore_defaults`."""
    schema = str((await (await conn.execute("select current_schema()")).fetchone() or [""])[0])
    taken: list[Default] = [tuple(r) for r in await (await conn.execute(_DEFAULTS)).fetchall()]
    if not (await (await conn.execute(_GLOBAL_FUNCTIONS)).fetchone() or [True])[0]:
        taken.append((True, "f", "public", "EXECUTE", False))  # the built-in default
    for default in taken:
        await conn.execute(_alter_default(default, schema, grant=False).encode())
    return taken


async def _restore_defaults(conn: psycopg.AsyncConnection, taken: list[Default]) -> None:
    schema = str((await (await conn.execute("select current_schema()")).fetchone() or [""])[0])
    for default in taken:
        await conn.execute(_alter_default(default, schema, grant=True).encode())


async def _channel_policy(conn: psycopg.AsyncConnection, warn: Callable[[str], None]) -> None:
    """Create the private-channel policy when realtime.messages has appeared (0019); `warn`
    when it is not there."""
    found = await (
        await conn.execute("select to_regprocedure('semo_ensure_channel_policy()') is not null")
    ).fetchone()
    if not found or not found[0]:
        return  # migrations from before 0019 (a folder of older files)
    status = await (await conn.execute("select semo_ensure_channel_policy()")).fetchone()
    text = str(status[0]) if status else "no answer"
    if text == "created":
        log.info("semo migrate: created the private-channel policy on realtime.messages")
    elif text != "present":
        warn(f"no private-channel policy on realtime.messages: {text}")


def migration_files(folder: Path | None = None) -> list[Path]:
    return sorted((folder or migrations_dir()).glob("*.sql"), key=lambda p: p.name)


async def migrate(
    dsn: str,
    *,
    folder: Path | None = None,
    connect_timeout: float = 10.0,
    warn: Callable[[str], None] | None = None,
) -> list[str]:
    """Apply the migrations not applied yet; return their names (empty when up to date).
    `warn` gets what the database could not set up (default: a log warning)."""
    warn = warn or (lambda text: log.warning("semo migrate: %s", text))
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
                            taken = await _close_defaults(conn)
                            await conn.execute(text.encode())  # no parameters: many statements
                            await conn.execute(
                                "insert into semo_migrations (name, checksum) values (%s, %s)",
                                (path.name, checksum),
                            )
                            await _restore_defaults(conn, taken)
                    except psycopg.Error as error:
                        if isinstance(error, psycopg.OperationalError):
                            raise
                        raise StoreError(
                            f"migration {path.name} failed (nothing of it was applied): "
                            f"{(error.diag.message_primary or str(error)).strip()}"
                        ) from None
                    log.info("semo migrate: applied %s", path.name)
                    applied.append(path.name)
                await _channel_policy(conn, warn)
            finally:
                if not conn.closed and not conn.broken:
                    await conn.execute("select pg_advisory_unlock(%s)", (LOCK_KEY,))
    except psycopg.Error as error:
        raise StoreUnavailable(f"migrating {where} failed: {str(error).strip()}") from None
    return applied
