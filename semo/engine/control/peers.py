"""Who may use the control socket: a process of our uid that this engine did not start.

    refusal = refuse_peer(sock, os.getpid())   # None: a console; else why it is refused
    refusal.kind, refusal.text                 # "descendant", "process 812, started by ..."

How it works: docs/SECURITY.md, "Who may use the control socket".
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import struct
import time
from typing import NamedTuple

from semo.engine.runtime import descends_from, process_parent

#: SO_PEERPIDFD (Linux 6.5+; Python 3.11's socket module does not name it)
SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77)

_TICKS = os.sysconf("SC_CLK_TCK")


class Refusal(NamedTuple):
    """Why a peer is refused: a kind (one log line per kind at most) and the sentence."""

    kind: str  # "uid", "unknown", "gone", "changed" or "descendant"
    text: str


def peer_credentials(sock: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the process at the other end of a Unix socket (SO_PEERCRED)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    return pid, uid


def boot_ticks() -> int:
    """Now, in clock ticks since boot (the unit of /proc/PID/stat's start time)."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * _TICKS)


def _peer_pidfd(sock: socket.socket) -> int | None:
    try:
        return int(sock.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD))
    except (OSError, ValueError):
        return None


def _exited(pidfd: int) -> bool:
    """Whether the process of `pidfd` has exited (a pidfd polls readable then)."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(0))


def refuse_peer(
    sock: socket.socket, engine_pid: int, accepted_at: int | None = None
) -> Refusal | None:
    """Why the peer of `sock` may not use the control socket, or None (a console).

    `accepted_at` (boot ticks, :func:`boot_ticks`) is when the connection was accepted; the
    peer had connected before, so a process at its pid that started later is another one."""
    try:
        pid, uid = peer_credentials(sock)
    except OSError as error:
        return Refusal("unknown", f"a peer whose credentials cannot be read ({error.strerror})")
    if uid != os.getuid():
        return Refusal("uid", f"a connection from uid {uid}")
    if pid <= 0:
        return Refusal("unknown", "a process the kernel does not name (another pid namespace)")
    accepted_at = boot_ticks() if accepted_at is None else accepted_at
    pidfd = _peer_pidfd(sock)
    try:
        first = process_parent(pid)
        if first is None or (pidfd is None and first[1] > accepted_at):
            return Refusal("gone", f"process {pid}, gone before it could be checked")
        verdict = descends_from(pid, engine_pid)
        # the pid must still be the peer's: its pidfd has not exited (else its start time is
        # unchanged and it still runs), so what /proc said was about the peer
        if pidfd is not None:
            same = not _exited(pidfd)
        else:
            again = process_parent(pid)
            same = again is not None and again[1] == first[1]
        if not same:
            return Refusal("gone", f"process {pid}, gone before it could be checked")
    finally:
        if pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(pidfd)
    if verdict is None:
        return Refusal("changed", f"process {pid}, whose ancestry changed while it was checked")
    if verdict:
        return Refusal("descendant", f"process {pid}, started by this engine")
    return None
