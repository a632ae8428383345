"""Hostile agents against the control socket (engine/control), on real processes.

An agent runs as the operator's uid, so the uid check lets it connect; the engine refuses
connections from its own descendants. An agent that daemonizes (fork, setsid, fork, the
middle process exits) is reparented: to init if nothing else, which would make it a stranger
to the engine. The engine is a child subreaper while it serves the socket, so the daemon is
reparented to the engine, stays its descendant and is refused; when it exits, the engine
reaps it (no zombie left).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.control.office import SEMO, Office, alive, wait_until
from tests.support.hostile_control import CONFIG

pytestmark = pytest.mark.timeout(120)

# argv: the runtime folder (the socket is <runtime>/semo/control-*.sock; the hook socket is
# there too) and a report file.
DAEMON = r"""
import json, os, socket, struct, sys, time
runtime, report = sys.argv[1], sys.argv[2]
agent = os.getpid()
if os.fork() == 0:
    os.setsid()
    middle = os.getpid()
    if os.fork() == 0:
        while os.getppid() == middle:  # until the middle process has exited
            time.sleep(0.01)
        os.chdir("/")
        for fd in (0, 1, 2):
            os.close(fd)
        sockets = []
        while not sockets:
            sockets = [
                f for f in os.listdir(runtime + "/semo")
                if f.startswith("control-") and f.endswith(".sock")
            ]
            time.sleep(0.05)
        result = {"pid": os.getpid(), "ppid": os.getppid()}
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        try:
            s.connect(runtime + "/semo/" + sockets[0])
            body = json.dumps({"op": "ping", "id": 1}).encode()
            s.sendall(struct.pack(">I", len(body)) + body)
            data = s.recv(65536)
            result["answer"] = data[4:].decode("utf-8", "replace") if data else ""
        except OSError as error:
            result["answer"] = ""
            result["error"] = str(error)
        tmp = report + ".tmp"
        with open(tmp, "w") as out:
            json.dump(result, out)
        os.rename(tmp, report)
        time.sleep(2)
        os._exit(0)
    os._exit(0)
os.wait()
print("$ ", end="", flush=True)
sys.stdin.read()
"""


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] == b"Z"
    except OSError:
        return False


def test_a_daemonized_agent_stays_a_descendant_and_is_refused(tmp_path: Path) -> None:
    office = Office(tmp_path)
    script = tmp_path / "daemon.py"
    script.write_text(DAEMON)
    report = tmp_path / "report.json"
    command = json.dumps([sys.executable, str(script), str(office.runtime), str(report)])
    (tmp_path / "semo.toml").write_text(CONFIG.format(command=command))
    log = (tmp_path / "engine.log").open("wb")
    engine = subprocess.Popen(
        [str(SEMO), "engine", "--config", "semo.toml"],
        cwd=tmp_path,
        env=office.env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until(report.exists, "the daemon's report")
        result = json.loads(report.read_text())
        # reparented to the engine (its subreaper), not to init
        assert result["ppid"] == engine.pid
        # refused: the connection closed without a hello
        assert '"hello"' not in result["answer"], result
        assert result["answer"] == ""
        wait_until(lambda: not alive(result["pid"]) and not _zombie(result["pid"]), "reaped")
        log.flush()
        text = (tmp_path / "engine.log").read_text()
        assert f"refused process {result['pid']}" in text
        engine.send_signal(signal.SIGTERM)
        assert engine.wait(30) == 0
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.wait(30)  # reaped: no zombie left in pytest
        log.close()
        office.cleanup()
