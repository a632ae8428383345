"""`semo stop` on real processes: the agents get `[engine] shutdown_grace`, then are killed.

- An agent that ignores SIGHUP, SIGINT and SIGTERM (`shutdown_grace = 6`) is still alive 3 s
  after the polite agent beside it (plain bash, gone as soon as it is signalled) has gone, so
  3 s into the stop (the old fixed 2 s kill is gone), and dead once `semo stop` returned: both
  are signalled at once, the deaf one is killed when the grace is over.
- What an agent started outside its process group is stopped with it: a job of its
  interactive bash (its own process group, the agent's terminal session) and a process that
  left the agent's session with setsid(1) (whose parent ends on the SIGHUP: it is orphaned
  during the stop and adopted by the engine), and one orphaned at once by `(setsid cmd &)`
  (adopted by the engine before the stop; it still has the agent's terminal open), all
  ignoring SIGHUP/SIGTERM/SIGINT, are dead once `semo stop` returned.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.control.office import SEMO, Office, alive, ctl_config, office_fixture, wait_until

pytestmark = pytest.mark.timeout(180)

GRACE = 6

#: an agent deaf to SIGHUP, SIGINT and SIGTERM that stays when its terminal is gone (an
#: interactive bash cannot be made so: it exits on SIGHUP even when started with it ignored)
DEAF = """
import os, signal, sys, time
for number in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
    signal.signal(number, signal.SIG_IGN)
with open("PIDFILE", "w") as out:
    out.write(str(os.getpid()))
sys.stdout.write("$ ")
sys.stdout.flush()
while True:
    try:
        line = sys.stdin.readline()
    except OSError:
        line = ""
    if not line:  # the terminal is gone: stay anyway
        time.sleep(0.2)
        continue
    sys.stdout.write("$ ")
    sys.stdout.flush()
"""


def config(folder: Path) -> str:
    """Office "ctl": A ignores HUP/INT/TERM (DEAF), B is a plain interactive bash; each writes
    its pid, and B's rc file starts the two escapees of the second test when `escape` exists."""
    pids = folder / "pids"
    pids.mkdir()
    rc = folder / "b.rc"
    rc.write_text(
        "PS1='$ '\n"
        f"echo $$ > {pids}/B\n"
        f"if [ -e {folder}/escape ]; then\n"
        "  set -m\n"  # job control (not on yet while the rc file runs): jobs get own groups
        # its own process group (a job of an interactive shell), deaf to HUP/TERM/INT
        f"  bash -c \"trap '' HUP TERM INT; echo \\$\\$ > {pids}/job; exec sleep 611\" &\n"
        # its own session, its parent (setsid -w, a job of the shell) ends on SIGHUP: then it
        # is no descendant of the agent any more (the engine adopts it)
        f"  setsid -w bash -c \"trap '' HUP TERM INT; echo \\$\\$ > {pids}/setsid; "
        'exec sleep 622" &\n'
        # its own session, orphaned at once (adopted by the engine), the terminal still open
        f"  (setsid bash -c \"trap '' HUP TERM INT; echo \\$\\$ > {pids}/orphan; "
        'exec sleep 633" &)\n'
        "fi\n"
    )
    deaf = folder / "deaf.py"
    deaf.write_text(DEAF.replace("PIDFILE", str(pids / "A")))
    return ctl_config(
        GRACE,
        f'command = ["{sys.executable}", "{deaf}"]',
        f'command = ["bash", "--noprofile", "--rcfile", "{rc}", "-i"]',
    )


office = office_fixture(config)


def pid_of(office: Office, name: str) -> int:
    path = office.folder / "pids" / name
    wait_until(lambda: path.exists() and path.read_text().strip(), f"the pid of {name}")
    return int(path.read_text())


def start(office: Office) -> subprocess.Popen[bytes]:
    engine = office.engine(office.folder / "engine.log")
    wait_until(lambda: both_ready(office), "both agents ready")
    return engine


def both_ready(office: Office) -> bool:
    listed = office.semo("sessions", "--office", "ctl", "--json", check=False)
    if listed.returncode != 0:  # no office in the store yet
        return False
    return sorted((s["role"], s["status"]) for s in json.loads(listed.stdout)) == [
        ("A", "ready"),
        ("B", "ready"),
    ]


def semo_stop(office: Office) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(SEMO), "stop"],
        cwd=office.folder,
        env=office.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_semo_stop_gives_the_agents_shutdown_grace_then_kills_them(office: Office) -> None:
    engine = start(office)
    try:
        stubborn, polite = pid_of(office, "A"), pid_of(office, "B")
        assert alive(stubborn) and alive(polite)
        stop = semo_stop(office)
        # the polite agent goes at once: the stop has begun (both were signalled then)
        wait_until(lambda: not alive(polite), "the polite agent gone")
        assert alive(stubborn)
        # it says what it waits for while it waits (it used to be silent until the end)
        assert stop.stdout is not None
        said = stop.stdout.readline()
        assert said == (
            f"semo stop: stopping engine {engine.pid} and 2 agents "
            f"(grace {GRACE} s, killed after {GRACE + 20} s)...\n"
        )
        assert stop.poll() is None and alive(stubborn)
        time.sleep(3)
        # past the old fixed 2 s, within the 6 s grace: the deaf agent still runs
        assert stop.poll() is None, stop.communicate()
        assert alive(stubborn)
        out, _ = stop.communicate(timeout=60)
        assert stop.returncode == 0, out
        assert out == f"semo stop: engine {engine.pid} stopped\n"  # then the result
        assert not alive(stubborn)
        assert engine.wait(30) == 0
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.wait(30)


def test_semo_stop_ends_what_an_agent_started_outside_its_process_group(
    office: Office,
) -> None:
    (office.folder / "escape").touch()
    engine = start(office)
    try:
        agent, job, escaped, orphan = (
            pid_of(office, name) for name in ("B", "job", "setsid", "orphan")
        )
        assert all(alive(pid) for pid in (agent, job, escaped, orphan))
        # the job: same terminal session as the agent, its own process group
        assert os.getsid(job) == agent and os.getpgid(job) != agent
        # the setsid'd one: its own session (a descendant of the agent until the stop)
        assert os.getsid(escaped) == escaped
        # the other one: orphaned at once, so adopted by the engine (its child subreaper)
        assert os.getsid(orphan) == orphan
        wait_until(lambda: parent(orphan) == engine.pid, "the orphan adopted by the engine")
        stopped = semo_stop(office)
        out, _ = stopped.communicate(timeout=60)
        assert stopped.returncode == 0, out
        assert engine.wait(30) == 0
        # both ignored SIGHUP/SIGTERM/SIGINT: they were killed when the grace was over
        assert not alive(job)
        assert not alive(escaped)
        assert not alive(orphan)
        assert not alive(agent)
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.wait(30)
        for name in ("job", "setsid", "orphan"):
            with contextlib.suppress(Exception):
                os.kill(int((office.folder / "pids" / name).read_text()), signal.SIGKILL)


def parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return int(stat.rpartition(b")")[2].split()[1])
