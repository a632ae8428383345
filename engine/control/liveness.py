"""Is an engine of this machine gone? Answered from local facts, without waiting for its
heartbeat to run out (which takes 3 x lease_seconds after a SIGKILL)."""

from __future__ import annotations

import json
import socket

from engine.control.paths import OfficePaths, runtime_dir
from engine.control.server import socket_answers
from engine.runtime import pid_alive

__all__ = ["local_engine_gone", "pid_alive"]


def local_engine_gone(engine_id: str) -> str | None:
    """Why `engine_id` is known to be gone on this machine, or None when it may be running
    (or runs elsewhere). An engine id `<this host>-<pid>` (the default) whose process has
    exited is gone; so is one whose control info file (left behind by a killed engine) names
    a pid that has exited."""
    host, _, pid = engine_id.rpartition("-")
    if host == socket.gethostname() and pid.isdigit() and not pid_alive(int(pid)):
        return f"its process {pid} on this machine has exited"
    try:
        infos = list(runtime_dir().glob("control-*.json"))
    except OSError:
        return None
    for path in infos:
        try:
            info = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(info, dict) or info.get("engine_id") != engine_id:
            continue
        recorded = info.get("pid")
        if isinstance(recorded, int) and recorded > 0 and not pid_alive(recorded):
            return f"its process {recorded} on this machine has exited"
    return None


def killed_run_of_office(paths: OfficePaths, engine_id: str, started_at: str) -> str | None:
    """Why the run of `engine_id` whose heartbeat row started at `started_at` (ISO, the store's
    own value) is known to be gone on this machine, or None. It is when the office's control
    info file, which only a killed engine leaves behind, names that very run (engine id and
    heartbeat start), its pid has exited and nothing answers on the office's socket: a run of
    the same id elsewhere, or a later one, has another heartbeat start and is not taken for
    dead."""
    try:
        info = json.loads(paths.info.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or info.get("engine_id") != engine_id:
        return None
    if info.get("heartbeat_started_at") != started_at:
        return None
    pid = info.get("pid")
    if not isinstance(pid, int) or pid <= 0 or pid_alive(pid) or socket_answers(paths.socket):
        return None
    return f"its process {pid} on this machine has exited and its control socket is closed"
