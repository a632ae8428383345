"""The engine as its agents' child subreaper (Linux `PR_SET_CHILD_SUBREAPER`).

How it works: docs/OPERATIONS.md, "The engine as its agents' subreaper".
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os

from semo.engine.runtime import stat_fields

log = logging.getLogger("semo.control")

PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37
SCAN_SECONDS = 5.0


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(option, value, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def set_subreaper(on: bool) -> bool:
    """Make this process a child subreaper (or stop being one); False where the OS cannot."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0)


def is_subreaper() -> bool:
    value = ctypes.c_int(0)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(value), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    return value.value != 0


def zombie_children(parent: int) -> set[int]:
    """Pids of `parent`'s children that have exited and wait to be reaped (by /proc)."""
    found: set[int] = set()
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        fields = stat_fields(name)
        if fields and len(fields) > 1 and fields[0] == b"Z" and fields[1] == str(parent).encode():
            found.add(int(name))
    return found


class OrphanReaper:
    """Reaps the adopted orphans' zombies while the engine serves its control socket."""

    def __init__(self, interval: float = SCAN_SECONDS) -> None:
        self.interval = interval
        self.reaped = 0
        self._seen: set[int] = set()

    def scan(self) -> None:
        zombies = zombie_children(os.getpid())
        for pid in zombies & self._seen:
            with contextlib.suppress(ChildProcessError, OSError):
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    self.reaped += 1
        self._seen = zombies - self._seen

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await asyncio.to_thread(self.scan)
            except Exception:  # a scan that fails is retried at the next one
                log.exception("reaping orphaned processes failed")
