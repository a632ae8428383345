"""Where an office's control socket, pid file and background log live.

One socket per office on a machine: `<runtime>/control-<office>-<hash>.sock`, where `<runtime>`
is `$XDG_RUNTIME_DIR/semo` (else a 0700 `<tmp>/semo-<uid>`) and the hash covers the store the
office lives in (two stores may each have an office called "demo"). Beside it
`control-<office>-<hash>.json` records the serving engine's pid and id. The background engine's
log goes to the state folder (`$XDG_STATE_HOME/semo/engine-<office>-<hash>.log`).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from semo.engine.runtime import RuntimeDirError, runtime_dir
from semo.engine.runtime import private_dir as _private_dir
from semo.engine.store import StoreConfig

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class ControlPathError(RuntimeDirError):
    """The runtime folder is not ours or not private."""


def private_dir(path: Path) -> Path:
    """`semo.engine.runtime.private_dir`, failing with ControlPathError."""
    return _private_dir(path, ControlPathError)


def store_identity(store: StoreConfig) -> str:
    """Which store: the backend and where it is (the database URL only ever hashed)."""
    if store.backend == "sqlite":
        from semo.engine.store.sqlite import default_sqlite_path

        where = str((store.sqlite_path or default_sqlite_path()).expanduser().absolute())
    elif store.backend == "postgres":
        where = store.database_url.get_secret_value() if store.database_url else ""
    else:
        where = store.supabase_url or ""
    return f"{store.backend}:{where}"


@dataclass(frozen=True)
class OfficePaths:
    office: str
    socket: Path
    info: Path
    log: Path

    @property
    def label(self) -> str:
        return self.socket.stem


def office_paths(office: str, store: StoreConfig, *, base: Path | None = None) -> OfficePaths:
    """The control socket, info file and log of `office` in `store` (nothing is created)."""
    digest = hashlib.sha256(f"{store_identity(store)}\0{office}".encode()).hexdigest()[:12]
    name = f"{_UNSAFE.sub('_', office)[:40]}-{digest}"
    folder = base or runtime_dir()
    return OfficePaths(
        office=office,
        socket=folder / f"control-{name}.sock",
        info=folder / f"control-{name}.json",
        log=state_dir() / f"engine-{name}.log",
    )


def state_dir() -> Path:
    """`$XDG_STATE_HOME/semo`, else `~/.local/state/semo` (where the SQLite store lives)."""
    state = os.environ.get("XDG_STATE_HOME", "")
    base = Path(state) if state and Path(state).is_absolute() else Path.home() / ".local/state"
    return base / "semo"
