"""`semo demo` in tmux, the reference terminal, at 80x24 under TERM=screen and
TERM=xterm-256color: the console draws its panels, shows the pane of the session that asks,
answers a question from the keyboard (F4 and a digit typed together), counts what needs the
operator in the header and the terminal's title (tmux's pane title) before and after, lists
the demo's steps in the commands panel, shows detach in the footer (outside a pane and in
one) and detaches on ctrl+q (xterm-256color) or, typed as fast as tmux sends them, the prefix
twice (into the pane) and the prefix then d (TERM=screen), leaving the demo's rows answered
in the store; the background demo engine is stopped with `semo stop --demo`."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.tmux import TmuxServer
from tests.support.waiting import wait_until

TIMEOUT = 40.0


def demo_env(tmp_path: Path, term: str, **extra: str) -> dict[str, str]:
    """A `semo demo` of its own: home, state, store and runtime folder in `tmp_path`."""
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "SEMO_SQLITE_PATH": str(tmp_path / "semo.db"),
        "XDG_RUNTIME_DIR": str(tmp_path),
        "TERM": term,
        **extra,
    }


def wait_screen(server: TmuxServer, predicate: Callable[[str], object], what: str) -> str:
    """The pane's text once `predicate` holds for it."""
    return wait_until(lambda: "\n".join(server.state()[0]), what, TIMEOUT, until=predicate)


def wait_title(server: TmuxServer, predicate: Callable[[str], object], what: str) -> str:
    """The pane's title (what the program set with OSC 2) once `predicate` holds."""

    def title() -> str:
        return server("display-message", "-p", "#{pane_title}").strip()

    return wait_until(title, what, TIMEOUT, until=predicate)


@pytest.mark.parametrize("term", ["screen", "xterm-256color"])
def test_demo_console_in_tmux(tmp_path: Path, term: str) -> None:
    semo = Path(sys.executable).with_name("semo")
    env = demo_env(tmp_path, term)
    server = TmuxServer()
    try:
        server.start([str(semo), "demo"], cols=80, rows=24, env=env, cwd=tmp_path, term=term)
        wait_screen(server, lambda s: "Questions" in s and "Sessions" in s, "the console")
        wait_screen(server, lambda s: "1 postgres" in s, "FE's question in the inbox")
        wait_screen(server, lambda s: "FE " in s.split("\n")[1], "FE's pane shown (it asked)")
        # typed fast: F4 and the digit in one tmux command, no wait for a frame between (the
        # digit goes where F4 moved the focus: F4 is a priority binding, focus_now)
        # what needs the operator: in the header and in the terminal's title (OSC 2, which
        # tmux keeps as the pane's title)
        wait_screen(server, lambda s: "1 needs you" in s.split("\n")[0], "the count in the header")
        wait_title(server, lambda t: t == "semo: 1 needs you · demo", "the count in the title")
        server.send("<F4>1")
        wait_screen(server, lambda s: "FE: postgres" in s, "the answer notification")
        wait_title(server, lambda t: t == "semo · demo", "nothing needs the operator")
        wait_screen(server, lambda s: "FE invokes" in s, "the demo's steps in the commands")
        wait_screen(server, lambda s: "^q Detach" in s.split("\n")[-1], "detach in the footer")
        if term != "screen":
            server.send("<C-q>")
        else:  # the prefix twice: into the selected pane; its footer; then the prefix and d
            server.send("<C-]><C-]>")
            wait_screen(
                server,
                lambda s: "ctrl+] then d detach" in s.split("\n")[-1],
                "the pane's keys in the footer",
            )
            server.send("<C-]>d")
        wait_until(
            server.dead,
            "semo demo to detach",
            TIMEOUT,
            detail=lambda: "screen:\n" + "\n".join(server.state()[0]),
        )
    finally:
        server.kill()
        subprocess.run([str(semo), "stop", "--demo"], env=env, timeout=60, capture_output=True)
    out = subprocess.run(
        [str(semo), "questions", "--office", "demo", "--all", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=True,
    ).stdout
    assert [q["answer"] for q in json.loads(out)] == ["postgres"]


def test_closing_the_terminal_with_a_title_set_ends_the_console(tmp_path: Path) -> None:
    """The terminal goes away (tmux killed: a hang-up, as an SSH drop) while the console has set
    the terminal's title (a question is pending): the console ends, the engine stays. Writing
    the title back on the way out used to wait for ever in Textual's full writer queue."""
    semo = Path(sys.executable).with_name("semo")
    # as in many containers: each write reaches the terminal at once, so the first one after
    # the hang-up fails and ends Textual's writer thread
    env = demo_env(tmp_path, "xterm-256color", PYTHONUNBUFFERED="1")
    server = TmuxServer()
    try:
        server.start(
            [str(semo), "demo"], cols=100, rows=30, env=env, cwd=tmp_path, term="xterm-256color"
        )
        wait_title(server, lambda t: t == "semo: 1 needs you · demo", "the count in the title")
        wait_screen(server, lambda s: "1 postgres" in s, "FE's question in the inbox")
        console = int(server("display-message", "-p", "#{pane_pid}").strip())
        time.sleep(3)  # the console at rest, as an operator leaves it
        server.kill()
        deadline = time.monotonic() + TIMEOUT
        while os.path.exists(f"/proc/{console}") and time.monotonic() < deadline:
            with open(f"/proc/{console}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break  # ended (a zombie until tmux's reaper is gone too)
            time.sleep(0.1)
        alive = os.path.exists(f"/proc/{console}")
        if alive:
            with open(f"/proc/{console}/stat") as stat:
                alive = stat.read().rsplit(")", 1)[1].split()[0] != "Z"
        assert not alive, "the console outlived its terminal"
        listed = subprocess.run(
            [str(semo), "sessions", "--office", "demo", "--json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
            check=True,
        ).stdout
        assert {s["role"] for s in json.loads(listed)} == {"FE", "BE", "QA"}  # still serving
    finally:
        with contextlib.suppress(ProcessLookupError, NameError):
            os.kill(console, 9)
        subprocess.run([str(semo), "stop", "--demo"], env=env, timeout=60, capture_output=True)
