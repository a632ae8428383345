"""A console attached inside tmux writes the terminal's desktop notifications (OSC 9 and
OSC 777 in tmux's passthrough, and the bell) for a new question, and once for an engine that
died under it: read from tmux (`pipe-pane`: every byte the console wrote to its pane), and
from a tmux client attached in a PTY of its own (with `allow-passthrough on`, tmux hands the
sequences on to the operator's terminal)."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

from tests.control.office import Console, Office, consoles, office_fixture
from tests.support.tmux import TmuxClient

pytestmark = pytest.mark.timeout(240)

office = office_fixture()

#: tmux's passthrough (ESC P tmux; ... ESC \) around an OSC whose ESCs are doubled
PASSTHROUGH = re.compile(rb"\x1bPtmux;\x1b\x1b\](9|777);(.*?)\x1b\x1b\\\x1b\\", re.DOTALL)


def notifications(path: Path) -> list[tuple[str, str]]:
    data = path.read_bytes() if path.exists() else b""
    return [(m.group(1).decode(), m.group(2).decode()) for m in PASSTHROUGH.finditer(data)]


def wait_for(
    path: Path, predicate: object, what: str, timeout: float = 60
) -> list[tuple[str, str]]:
    deadline = time.monotonic() + timeout
    while True:
        found = notifications(path)
        if predicate(found):  # type: ignore[operator]
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; got {found}")
        time.sleep(0.1)


def test_a_console_in_tmux_notifies_a_question_and_an_engine_death(
    office: Office, tmp_path: Path
) -> None:
    written = tmp_path / "pane.bytes"
    # what tmux puts in a pane's environment (the tmux harness starts programs with `env -i`)
    office.env["TMUX"] = f"{tmp_path}/tmux-sock,{os.getpid()},0"
    with consoles() as opened:
        console = Console(office, "demo", cols=120, rows=36)
        opened.append(console)
        console.tmux("pipe-pane", "-t", "fid", "-o", f"cat >> {written}")
        console.tmux("set", "-g", "allow-passthrough", "on")
        client = TmuxClient(console.tmux, cols=120, rows=36)  # the operator's terminal
        console.wait_for("1 postgres")  # the demo's job asks which database

        found = wait_for(written, lambda f: {"9", "777"} <= {k for k, _ in f}, "OSC 9 and 777")
        osc9 = next(text for kind, text in found if kind == "9")
        osc777 = next(text for kind, text in found if kind == "777")
        assert osc9.startswith("semo demo: ") and "asks you" in osc9
        assert "semo answer " in osc9  # the command that answers it
        assert osc777.startswith("notify;semo demo: ") and "asks you;" in osc777
        questions = len(found)
        # tmux unwrapped them for the terminal attached to it
        deadline = time.monotonic() + 30
        while b"\x1b]9;semo demo: " not in client.received():
            assert time.monotonic() < deadline, client.received()[-2000:]
            time.sleep(0.1)
        assert b"\x1b]777;notify;semo demo: " in client.received()
        client.close()

        os.kill(office.engine_pid(), signal.SIGKILL)
        console.wait_for("Engine gone")
        found = wait_for(written, lambda f: any("died" in t for _, t in f), "the death notice")
        deaths = [text for kind, text in found if kind == "9" and "died" in text]
        assert len(deaths) == 1 and len(found) == questions + 2  # OSC 9 and 777, once
    office.cleanup("--demo")
