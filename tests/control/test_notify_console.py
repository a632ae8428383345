"""A console attached inside tmux writes the terminal's desktop notifications (OSC 9 and
OSC 777 in tmux's passthrough, and the bell) for a new question, and once for an engine that
died under it: read from tmux (`pipe-pane`: every byte the console wrote to its pane), and
from a tmux client attached in a PTY of its own (with `allow-passthrough on`, tmux hands the
sequences on to the operator's terminal)."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.control.office import (
    BASH,
    Console,
    Office,
    consoles,
    ctl_config,
    office_fixture,
    ready,
)
from tests.support.tmux import TmuxClient
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(240)

REPO = Path(__file__).resolve().parents[2]

office = office_fixture()

#: tmux's passthrough (ESC P tmux; ... ESC \) around an OSC whose ESCs are doubled
PASSTHROUGH = re.compile(rb"\x1bPtmux;\x1b\x1b\](9|777);(.*?)\x1b\x1b\\\x1b\\", re.DOTALL)


def notifications(path: Path) -> list[tuple[str, str]]:
    data = path.read_bytes() if path.exists() else b""
    return [(m.group(1).decode(), m.group(2).decode()) for m in PASSTHROUGH.finditer(data)]


def wait_for(
    path: Path, predicate: Callable[[list[tuple[str, str]]], object], what: str, timeout: float = 60
) -> list[tuple[str, str]]:
    """The notifications `path` has recorded, once `predicate` holds for them."""
    return wait_until(lambda: notifications(path), what, timeout, until=predicate)


def _ask_on_first_prompt(folder: Path) -> str:
    """The rest of agent A's [[agents]] table: a scripted agent that asks a question when it
    gets its first prompt."""
    script = folder / "a.json"
    body = {"type": "choice", "question": "Which database?", "options": ["postgres", "sqlite"]}
    script.write_text(json.dumps([f"[ASK_USER]\n{json.dumps(body)}\n[/ASK_USER]"]))
    command = [sys.executable, "-m", "tests.support.script_agent", "--script", str(script)]
    command += ["--log", str(folder / "a.log")]
    return f"command = {json.dumps(command)}\nreads_prompts = true"


def test_a_console_in_tmux_notifies_a_question_and_an_engine_death(
    office: Office, tmp_path: Path
) -> None:
    written = tmp_path / "pane.bytes"
    # what tmux puts in a pane's environment (the tmux harness starts programs with `env -i`)
    office.env["TMUX"] = f"{tmp_path}/tmux-sock,{os.getpid()},0"
    office.env["PYTHONPATH"] = str(REPO)
    (office.folder / "semo.toml").write_text(ctl_config(1, _ask_on_first_prompt(tmp_path), BASH))
    with consoles() as opened:
        console = Console(office, "console", cols=120, rows=36)
        opened.append(console)
        console.wait(lambda s: ready(s, "A") and ready(s, "B"), "both agents ready")
        console.tmux("pipe-pane", "-t", "fid", "-o", f"cat >> {written}")
        console.tmux("set", "-g", "allow-passthrough", "on")
        client = TmuxClient(console.tmux, cols=120, rows=36)  # the operator's terminal
        [agent_a] = [s for s in office.sessions() if s["role"] == "A"]
        payload = json.dumps({"prompt": "go"})
        office.semo(
            "command", "--office", "ctl", "send_prompt", "--session", str(agent_a["session_id"]),
            "--payload", payload,
        )  # fmt: skip

        found = wait_for(written, lambda f: {"9", "777"} <= {k for k, _ in f}, "OSC 9 and 777")
        osc9 = next(text for kind, text in found if kind == "9")
        osc777 = next(text for kind, text in found if kind == "777")
        assert osc9.startswith("semo ctl: A asks you") and "Which database?" in osc9
        assert "semo answer " in osc9  # the command that answers it
        assert osc777.startswith("notify;semo ctl: A asks you;")
        questions = len(found)
        # tmux unwrapped them for the terminal attached to it
        wait_until(
            lambda: b"\x1b]9;semo ctl: A asks you" in client.received(),
            "the terminal to get the question's OSC 9",
            30,
            detail=lambda: client.received()[-2000:],
        )
        assert b"\x1b]777;notify;semo ctl: A asks you;" in client.received()
        client.close()

        os.kill(office.engine_pid(), signal.SIGKILL)
        found = wait_for(written, lambda f: any("died" in t for _, t in f), "the death notice")
        deaths = [text for kind, text in found if kind == "9" and "died" in text]
        assert len(deaths) == 1 and len(found) == questions + 2  # OSC 9 and 777, once
