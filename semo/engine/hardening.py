"""Keep same-user agents out of the engine's process.

Agents run as the engine's OS user, so by default they could read ``/proc/<engine>/environ``
(the store's credentials, API tokens), ``/proc/<engine>/mem`` or attach a debugger.
:func:`make_non_dumpable` clears the process's *dumpable* flag (``prctl(PR_SET_DUMPABLE, 0)``):
the kernel then hands the engine's ``/proc/<pid>`` files to root, refuses ptrace and
``process_vm_readv`` from same-uid processes without ``CAP_SYS_PTRACE``, and writes no core
dump. The flag is reset to "dumpable" by ``execve``, so the agents the engine starts are
ordinary processes. A debugger such as py-spy then needs root (``sudo py-spy dump --pid ...``).

Called first thing by every long-running entry point that holds secrets: ``semo engine``,
``semo api``, ``semo console`` and ``semo demo``.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys

__all__ = ["is_dumpable", "make_non_dumpable"]

log = logging.getLogger("semo.hardening")

PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4


def _prctl(option: int, arg: int = 0) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    prctl = libc.prctl
    prctl.restype = ctypes.c_int
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    result = prctl(option, arg, 0, 0, 0)
    if result < 0:
        error = ctypes.get_errno()
        raise OSError(error, f"prctl({option}): {os.strerror(error)}")
    return int(result)


def is_dumpable() -> bool | None:
    """This process's dumpable flag (None where prctl does not exist)."""
    if not sys.platform.startswith("linux"):
        return None
    return _prctl(PR_GET_DUMPABLE) != 0


def make_non_dumpable() -> bool:
    """Make this process non-dumpable (Linux). True when it is now; False (logged) where the
    platform has no such flag or the call failed: the process keeps running, less protected."""
    if not sys.platform.startswith("linux"):
        log.info("not Linux: the process stays dumpable (run agents as another OS user)")
        return False
    try:
        _prctl(PR_SET_DUMPABLE, 0)
        return not is_dumpable()
    except (OSError, AttributeError) as error:
        log.warning("cannot make the engine non-dumpable (%s): same-user agents can read it", error)
        return False
