"""Is an engine of this machine gone? Answered from local facts, without waiting.

Its heartbeat would take 3 x lease_seconds to run out after a SIGKILL.

`local_engine_gone` is the one judgement `semo answer`, prompts to a session, and the listings
(`semo sessions`, `semo engines`, the REST API's sessions) use
(semo/engine/office/operations.py)."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from semo.engine.info_file import live_engine_ids, read_info
from semo.engine.runtime import own_folder, pid_alive, runtime_dir, socket_answers, start_ticks

if TYPE_CHECKING:
    from semo.engine.store.models import EngineHeartbeat


class OfficeFiles(Protocol):
    """An office's control info file and socket (control.paths.OfficePaths has them)."""

    @property
    def info(self) -> Path: ...

    @property
    def socket(self) -> Path: ...


#: seconds of slack in the process-start comparisons (clock ticks, the store's rounding)
START_SLACK = 2.0


def local_engine_gone(engine_id: str, row: EngineHeartbeat | None = None) -> str | None:
    """Why `engine_id` is known to be gone on this machine, or None when it may be running
    (or runs elsewhere). An engine id `<this host>-<pid>` (the default) whose process has
    exited is gone; so is one whose control info file (left behind by a killed engine) names
    a pid that has exited. With the engine's heartbeat row, a pid that is alive but is another
    process now (started after the run's last beat: `other_process`) counts as exited, and an
    info file written by another run of the id (another heartbeat start) is not used."""
    host, _, pid = engine_id.rpartition("-")
    if host == socket.gethostname() and pid.isdigit():
        why = _pid_gone(int(pid), row)
        if why is not None:
            return why
    folder = runtime_dir()
    for recorded in _recorded_pids(folder, engine_id, row):
        why = _pid_gone(recorded, row)
        if why is not None:
            # a claim anyone of our uid could have written: not when the engine answers
            live = live_engine_ids(folder)
            return why if live is not None and engine_id not in live else None
    return None


def engine_pid(engine_id: str, row: EngineHeartbeat | None = None) -> int | None:
    """The process id of engine `engine_id` when this machine can tell: the pid of a default
    id `<this host>-<pid>`, or the one a control info file of that run (`row`'s heartbeat
    start) records; None for an engine of another machine or an id nothing here names."""
    host, _, pid = engine_id.rpartition("-")
    if host == socket.gethostname() and pid.isdigit():
        return int(pid)
    return next(iter(_recorded_pids(runtime_dir(), engine_id, row)), None)


def _recorded_pids(folder: Path, engine_id: str, row: EngineHeartbeat | None) -> list[int]:
    """The pids the control info files in `folder` record for `engine_id` (for `row`'s run
    when given); none when the folder is another user's or unreadable."""
    if not own_folder(folder):  # another user's folder (made first): nothing there is ours
        return []
    try:
        infos = sorted(folder.glob("control-*.json"))
    except OSError:
        return []
    pids = []
    for path in infos:
        info = read_info(path)
        if info is None or info.get("engine_id") != engine_id:
            continue
        run = info.get("heartbeat_started_at")
        if row is not None and isinstance(run, str) and run != row.started_at.isoformat():
            continue  # a file of another run of this id (an earlier one, or one elsewhere)
        recorded = info.get("pid")
        if isinstance(recorded, int) and recorded > 0:
            pids.append(recorded)
    return pids


def _pid_gone(pid: int, row: EngineHeartbeat | None) -> str | None:
    if not pid_alive(pid):
        return f"its process {pid} on this machine has exited"
    if row is not None and other_process(pid, row):
        return f"its process {pid} on this machine has exited (pid reused)"
    return None


def other_process(pid: int, row: EngineHeartbeat) -> bool:
    """Whether the live process `pid` is known not to be the engine run of heartbeat row
    `row` (a pid reused after the engine died). It is when it started after the run's last
    beat, by this machine's clock, and is younger than the run was at that beat, by the
    store's clock alone (`last_seen - started_at`, no clock skew between this machine and the
    database). Each test alone could be fooled (a database clock behind ours; a clock step
    between the run's start and its last beat); both together are not. A pid reused soon
    after a short run is not recognised: the heartbeat decides then."""
    age = process_age(pid)
    if age is None:
        return False
    ran = (row.last_seen - row.started_at).total_seconds()
    started = time.time() - age
    return age + START_SLACK < ran and started > row.last_seen.timestamp() + START_SLACK


def process_age(pid: int) -> float | None:
    """Seconds since process `pid` started, by the boot clock (no wall clock involved), or
    None when this system does not tell (no /proc)."""
    ticks = start_ticks(pid)
    if ticks is None:
        return None
    try:
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, AttributeError):
        return None
    return age if age >= 0 else None


def killed_run_of_office(paths: OfficeFiles, engine_id: str, started_at: str) -> str | None:
    """Why the run of `engine_id` whose heartbeat row started at `started_at` (ISO, the store's
    own value) is known to be gone on this machine, or None. It is when the office's control
    info file, which only a killed engine leaves behind, names that very run (engine id and
    heartbeat start), its pid has exited and nothing answers on the office's socket: a run of
    the same id elsewhere, or a later one, has another heartbeat start and is not taken for
    dead."""
    info = read_info(paths.info)
    if info is None or info.get("engine_id") != engine_id:
        return None
    if info.get("heartbeat_started_at") != started_at:
        return None
    pid = info.get("pid")
    if not isinstance(pid, int) or pid <= 0 or pid_alive(pid) or socket_answers(paths.socket):
        return None
    return f"its process {pid} on this machine has exited and its control socket is closed"
