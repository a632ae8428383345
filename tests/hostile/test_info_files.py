"""A forged control info file cannot make a live engine look dead (issue 21 #10).

The info file a killed engine leaves in the runtime folder is how `semo answer`, prompts and
the listings learn at once that it is gone. An agent runs as the operator's uid and can write
that folder: here it writes a file naming the live engine's id (and its heartbeat start,
which it can read from the store) with a pid that has exited, overwrites the engine's own
file likewise, and plants a FIFO where an info file would be. The engine answers on its socket
as itself, so it stays alive in every judgement, and no CLI blocks on the FIFO.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.control.office import Office, wait_until

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def office(tmp_path: Path) -> Iterator[Office]:
    made = Office(tmp_path)
    yield made
    made.cleanup()


def _exited_pid() -> int:
    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid


def _still_alive(office: Office) -> None:
    sessions = office.sessions()
    assert {(s["state"], s["lost_reason"]) for s in sessions} == {("ready", None)}, sessions
    [engine] = json.loads(office.semo("engines", "--office", "ctl", "--json").stdout)
    assert (engine["alive"], engine["dead_reason"]) == (True, None), engine
    prompt = office.semo(
        "command",
        "send_prompt",
        "--office",
        "ctl",
        "--session",
        str(sessions[0]["session_id"]),
        "--payload",
        '{"prompt": "echo still-here"}',
        "--wait",
        check=False,
    )
    assert prompt.returncode == 0, prompt


def test_forged_info_files_do_not_kill_a_live_engine(office: Office) -> None:
    engine = office.engine(office.folder / "engine.log")
    try:
        wait_until(office.both_ready, "both agents ready")
        folder = office.runtime / "semo"
        [genuine_path] = folder.glob("control-*.json")
        genuine = json.loads(genuine_path.read_text())
        forged = {**genuine, "pid": _exited_pid(), "socket": str(folder / "control-forged.sock")}

        (folder / "control-forged.json").write_text(json.dumps(forged))
        _still_alive(office)

        os.mkfifo(folder / "control-fifo.json")  # read it and wait forever
        _still_alive(office)

        genuine_path.write_text(json.dumps({**genuine, "pid": _exited_pid()}))
        _still_alive(office)
    finally:
        engine.terminate()
        engine.wait(60)
