"""Where a config file's office engine listens, remembered between console starts.

How it works: docs/CONSOLE.md, "The console's target cache".
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from semo.engine.fsutil import atomic_write, private_dir

CACHE_NAME = "console-targets.json"
#: a machine has a handful of offices; beyond this many files the oldest entries go
MAX_ENTRIES = 32
_ENV_PREFIXES = ("SEMO_", "SUPABASE_", "XDG_")
_ENV_NAMES = ("HOME", "TMPDIR", "TEMP", "TMP")
#: console settings that do not decide where the office's socket is
_ENV_IGNORED = ("SEMO_FIRST_FRAME",)
_ROOT = Path(__file__).resolve().parents[1]
#: the code that turns a config into a socket path: a change to it forgets every entry
_CODE = ("engine/config.py", "engine/control/paths.py", "engine/store/settings.py")


@dataclass(frozen=True)
class Target:
    """An office's control socket, info file and engine log (semo.engine.control.paths.OfficePaths's
    fields), and the console's prefix chord from the same config."""

    office: str
    socket: Path
    info: Path
    log: Path
    prefix: str
    sort: str = "attention"  # `[console] sort`


def state_dir() -> Path:
    """semo.engine.control.paths.state_dir (that module imports the store's settings)."""
    state = os.environ.get("XDG_STATE_HOME", "")
    base = Path(state) if state and Path(state).is_absolute() else Path.home() / ".local/state"
    return base / "semo"


def fingerprint(config: Path, raw: bytes) -> str:
    digest = hashlib.sha256()
    digest.update(str(config.absolute()).encode(errors="surrogateescape") + b"\0")
    digest.update(hashlib.sha256(raw).digest())
    for name in sorted(os.environ):
        if (name.startswith(_ENV_PREFIXES) or name in _ENV_NAMES) and name not in _ENV_IGNORED:
            value = os.environ[name]
            digest.update(f"{name}={value}\0".encode(errors="surrogateescape"))
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    digest.update(
        f"uid={os.getuid()} runtime_is_dir={bool(runtime) and os.path.isdir(runtime)}\0".encode()
    )
    for name in _CODE:
        with contextlib.suppress(OSError):
            info = (_ROOT / name).stat()
            digest.update(f"{name}:{info.st_size}:{info.st_mtime_ns}\0".encode())
    return digest.hexdigest()


def _cache_path() -> Path:
    return state_dir() / CACHE_NAME


def _read() -> dict[str, dict[str, str]]:
    try:
        data = json.loads(_cache_path().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


#: the demo office has no file: its config is made by this module (its bytes stand in)
DEMO_CONFIG = _ROOT / "engine/demo/office.py"
_DEMO_KEY = "<demo>"


def _key_and_raw(config: Path | None) -> tuple[str, Path, bytes]:
    """The cache key, the path and the bytes that stand for `config` (None: the demo)."""
    if config is None:
        return _DEMO_KEY, DEMO_CONFIG, DEMO_CONFIG.read_bytes()
    return str(config.absolute()), config, config.read_bytes()


def cached_target(config: Path | None) -> Target | None:
    """The target remembered for `config` (None: the demo office) as it is now; None when
    unknown or changed (or the file cannot be read: the full load says why)."""
    try:
        key, path, raw = _key_and_raw(config)
    except OSError:
        return None
    entry = _read().get(key)
    if not isinstance(entry, dict) or entry.get("fingerprint") != fingerprint(path, raw):
        return None
    try:
        return Target(
            office=str(entry["office"]),
            socket=Path(entry["socket"]),
            info=Path(entry["info"]),
            log=Path(entry["log"]),
            prefix=str(entry["prefix"]),
            sort=str(entry.get("sort", "attention")),
        )
    except (KeyError, TypeError):
        return None


def remember_target(config: Path | None, target: Target) -> None:
    """Keep `target` for `config` (None: the demo office) as read now (best effort: a cache
    it cannot write only costs the next start the full load)."""
    try:
        key, path, raw = _key_and_raw(config)
        entries = _read()
        entries.pop(key, None)
        entries[key] = {
            "fingerprint": fingerprint(path, raw),
            "office": target.office,
            "socket": str(target.socket),
            "info": str(target.info),
            "log": str(target.log),
            "prefix": target.prefix,
            "sort": target.sort,
        }
        while len(entries) > MAX_ENTRIES:
            entries.pop(next(iter(entries)))
        private_dir(_cache_path().parent)
        atomic_write(_cache_path(), json.dumps(entries, indent=1), mode=0o600)
    except (OSError, ValueError):
        return
