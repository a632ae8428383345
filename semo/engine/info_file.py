"""The control info file beside an office's socket: read safely, believed only as a fallback.

How it works: docs/CONSOLE.md, "The control info file".
"""

from __future__ import annotations

import os
import socket
import stat
import struct
import time
from pathlib import Path
from typing import Any

from semo.engine.fsutil import UnsafePathError, read_text_in
from semo.engine.safe_json import JSONInputError, loads

#: an info file is a few hundred bytes; more is not an engine's
MAX_INFO_BYTES = 64 << 10
#: seconds to ask every control socket of the folder for its engine id, all together
ASK_SECONDS = 2.0


def read_info(path: Path) -> dict[str, Any] | None:
    """The JSON object in info file `path`, or None (missing, a link, a FIFO, too big, not
    a JSON object)."""
    try:
        text = read_text_in(
            path.parent, path.name, max_bytes=MAX_INFO_BYTES, where=str(path.parent)
        )
        info = loads(text, max_bytes=MAX_INFO_BYTES) if text is not None else None
    except (OSError, UnsafePathError, UnicodeDecodeError, JSONInputError):
        return None
    return info if isinstance(info, dict) else None


def live_engine_ids(folder: Path, timeout: float = ASK_SECONDS) -> set[str] | None:
    """The engine ids that answer on the control sockets in `folder`, each in its own greeting;
    None when a socket accepted a connection but did not greet in time (an engine that refuses
    us, a slow one, or a listener that is no engine): then nobody can be known gone from a file.
    A socket file nothing listens on (a killed engine's) is skipped."""
    deadline = time.monotonic() + timeout
    ids: set[str] = set()
    try:
        sockets = sorted(folder.glob("control-*.sock"))
    except OSError:
        return None
    for path in sockets:
        try:
            if not stat.S_ISSOCK(os.lstat(path).st_mode):
                continue
        except OSError:
            continue
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        try:
            answered = _greeting_engine_id(path, left)
        except (ConnectionRefusedError, FileNotFoundError):
            continue  # nothing listens there
        if answered is None:
            return None
        ids.add(answered)
    return ids


def _greeting_engine_id(path: Path, timeout: float) -> str | None:
    """The engine id in the greeting of the socket at `path` (served by our uid), or None."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(os.fspath(path))
        peercred = getattr(socket, "SO_PEERCRED", None)
        if peercred is not None:
            _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, peercred, 12))
            if uid != os.getuid():
                return None
        header = _read_exactly(sock, 4)
        size = int.from_bytes(header, "big")
        if size > MAX_INFO_BYTES:
            return None
        hello = loads(_read_exactly(sock, size), max_bytes=MAX_INFO_BYTES)
    except (ConnectionRefusedError, FileNotFoundError):
        raise
    except (OSError, JSONInputError, EOFError):
        return None
    finally:
        sock.close()
    if not isinstance(hello, dict) or hello.get("t") != "hello":
        return None
    engine_id = hello.get("engine_id")
    return engine_id if isinstance(engine_id, str) else None


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError("the socket closed")
        data += chunk
    return data
