"""`semo stop` when the engine does not answer on its control socket: it never hangs.

- A real `semo engine` stopped with SIGSTOP: `semo stop` gives up asking after its ask timeout,
  sends the recorded pid SIGTERM (and SIGCONT), and the engine stops as on SIGTERM: exit 0,
  its bash agents gone; `semo stop` exits 0 and says the engine did not answer.
- A process that holds the office's socket without ever answering and ignores SIGTERM (the
  recorded pid, started before its info file was written): SIGTERM, then SIGKILL once
  `grace + margin` is over; stop_engine says it was killed and the process is dead.
- The info file names a live process that started after the file was written (the engine's
  pid reused by another program): nothing is signalled, stop_engine raises LaunchError and the
  process is still alive.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from semo.engine.control.launcher import LaunchError, stop_engine
from semo.engine.control.paths import OfficePaths
from tests.control.office import Office, alive, office_fixture, run_semo, wait_until

pytestmark = pytest.mark.timeout(180)


office = office_fixture()


def children(pid: int) -> list[int]:
    """Live processes whose parent is `pid`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_bytes().rpartition(b")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] not in (b"Z", b"X"):
            found.append(int(entry))
    return found


def test_semo_stop_of_a_sigstopped_engine_sends_it_sigterm(office: Office) -> None:
    engine = office.engine(office.folder / "engine.log")
    try:
        wait_until(lambda: len(children(engine.pid)) >= 2, "the two agents")
        wait_until(lambda: office.engine_pid() == engine.pid, "the info file")
        agents = children(engine.pid)
        os.kill(engine.pid, signal.SIGSTOP)
        stopped = run_semo(  # (within its timeout: the old `semo stop` never returned)
            "stop", env={**office.env, "SEMO_STOP_MARGIN": "5"}, cwd=office.folder
        )
        assert stopped.returncode == 0, stopped
        assert f"engine {engine.pid} stopped" in stopped.stdout
        assert "did not answer" in stopped.stdout and "SIGTERM" in stopped.stdout
        assert engine.wait(30) == 0  # its SIGTERM handler stopped it, as `semo stop` would
        assert not any(alive(pid) for pid in agents)
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.wait(30)


#: holds the socket (listening, never accepting: connects succeed and no hello ever comes),
#: ignores SIGTERM, records its pid in the info file once it listens
SILENT = """
import json, os, signal, socket, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
server = socket.socket(socket.AF_UNIX)
server.bind(sys.argv[1])
server.listen(8)
time.sleep(0.05)
with open(sys.argv[2], "w") as out:
    json.dump({"pid": os.getpid()}, out)
while True:
    time.sleep(1)
"""


def paths_in(folder: Path) -> OfficePaths:
    return OfficePaths(
        office="silent",
        socket=folder / "control-silent.sock",
        info=folder / "control-silent.json",
        log=folder / "engine.log",
    )


def test_an_engine_that_never_answers_nor_takes_sigterm_is_killed(tmp_path: Path) -> None:
    paths = paths_in(tmp_path)
    silent = subprocess.Popen([sys.executable, "-c", SILENT, str(paths.socket), str(paths.info)])
    try:
        wait_until(lambda: paths.info.exists() and paths.info.read_text(), "the info file")
        said = stop_engine(paths, grace=0.5, margin=1.0, ask_timeout=2.0)
        assert f"engine {silent.pid} did not stop" in said and "SIGKILL" in said
        assert "did not answer" in said
        assert silent.wait(10) == -signal.SIGKILL
    finally:
        if silent.poll() is None:
            silent.kill()
            silent.wait(10)


def test_a_recorded_pid_now_of_another_process_is_left_alone(tmp_path: Path) -> None:
    paths = paths_in(tmp_path)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(paths.socket))
    listener.listen(8)  # connects succeed, nothing answers
    paths.info.write_text("{}")
    past = time.time() - 60
    os.utime(paths.info, (past, past))  # written a minute ago
    other = subprocess.Popen(["sleep", "300"])  # started now: not the engine that wrote it
    try:
        paths.info.write_text(json.dumps({"pid": other.pid}))
        os.utime(paths.info, (past, past))
        with pytest.raises(LaunchError, match="did not answer"):
            stop_engine(paths, grace=0.5, margin=1.0, ask_timeout=2.0)
        assert alive(other.pid)
        assert other.poll() is None
    finally:
        listener.close()
        other.kill()
        other.wait(10)
