"""The durable office on real processes: `semo console` / `semo demo` in tmux, the engine they
start in the background, `semo stop`, `semo sessions` and `semo answer`.

- Closing the console's terminal (its tmux server killed: SIGHUP) detaches: the engine and its
  bash agents keep running and `semo sessions` lists them live; a new console attaches and
  shows them; `semo stop` ends them (sessions terminated, engine gone, socket removed) and the
  attached console says the engine stopped.
- Two consoles of different sizes at once show the same panes, scrollback included, and both
  type into the same session; each sees what the other typed.
- SIGKILL of the engine under an attached console: the console says the engine is gone;
  `semo answer` on the question of its session is refused (exit 2) and the question stays
  pending; a prompt for the session (`semo command send_prompt`) is not queued (exit
  2); ctrl+r starts the engine again.
- SIGTERM to the console detaches and restores the terminal (alternate screen and mouse
  reporting off); the engine keeps running.
- A foreground `semo engine` serves consoles too (none is started beside it) and stops, exit 0,
  on `semo stop`.
"""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import pytest

from semo.engine.runtime import socket_answers
from tests.control.office import (
    Console,
    Office,
    alive,
    consoles,
    office_fixture,
    ready,
    wait_until,
)

pytestmark = pytest.mark.timeout(240)


office = office_fixture()


def _socket(office: Office) -> Path:
    return Path(str(office.info()["socket"]))


def test_closing_the_terminal_detaches_and_semo_stop_ends_the_agents(office: Office) -> None:
    with consoles() as opened:
        first = Console(office, "console")
        opened.append(first)
        first.wait(lambda s: ready(s, "A") and ready(s, "B"), "both agents ready")
        engine_pid = office.engine_pid()
        assert first.pid != engine_pid
        before = {s["role"]: s for s in office.sessions()}
        assert sorted(before) == ["A", "B"]

        first.kill()  # the terminal goes away: tmux hangs up on the console
        wait_until(lambda: not alive(first.pid), "the console to exit")

        assert alive(engine_pid)
        after = {s["role"]: s for s in office.sessions()}
        assert {r: (s["session_id"], s["status"]) for r, s in after.items()} == {
            r: (s["session_id"], "ready") for r, s in before.items()
        }
        for session in after.values():
            assert alive(int(session["pid"]))  # type: ignore[call-overload]

        second = Console(office, "console", cols=100, rows=30)
        opened.append(second)
        second.wait(lambda s: ready(s, "A") and ready(s, "B"), "the same sessions")
        assert office.engine_pid() == engine_pid  # attached, not a new engine

        stopped = office.semo("stop")
        assert f"engine {engine_pid} stopped" in stopped.stdout
        assert not alive(engine_pid)
        assert not list((office.runtime / "semo").glob("control-*.sock"))
        assert all(s["status"] == "terminated" for s in office.sessions_all())
        second.wait_for("the engine stopped")
        # nothing is running any more: stopping again says so
        again = office.semo("stop", check=False)
        assert again.returncode == 1 and "no engine serves office 'ctl'" in again.stderr


def test_two_consoles_share_panes_scrollback_and_typing(office: Office) -> None:
    with consoles() as opened:
        one = Console(office, "console", cols=120, rows=32)
        opened.append(one)
        one.wait(lambda s: ready(s, "A"), "agent A")
        one.click(80, 5)  # into A's pane (the selected session, right of the session list)
        one.type("seq 1 120\r")
        one.wait(lambda s: "│120" in s, "the end of seq in console one")

        two = Console(office, "console", cols=100, rows=32)
        opened.append(two)
        two.wait(lambda s: "│120" in s and ready(s, "B"), "the same pane in console two")

        two.click(70, 5)
        two.type("echo from-two\r")
        one.wait_for("from-two")
        one.type("echo from-one\r")
        two.wait_for("│from-one")

        live = _left_numbers(two.text())
        two.key("S-PPage")  # the scrollback came with the attach: page back into it
        scrolled = _left_numbers(two.wait_for("scrollback -"))
        assert scrolled and min(scrolled) < min(live) - 10, (live, scrolled)


def _left_numbers(screen: str) -> list[int]:
    """The numbers `seq` printed, as shown in the selected session's pane."""
    return [int(m.group(1)) for m in re.finditer(r"│ *│(\d+) *│$", screen, re.MULTILINE)]


def test_engine_killed_under_a_console_answers_are_refused(office: Office) -> None:
    with consoles() as opened:
        console = Console(office, "demo", cols=120, rows=36)
        opened.append(console)
        console.wait_for("1 postgres")
        [question] = json.loads(office.semo("questions", "--office", "demo", "--json").stdout)
        engine_pid = office.engine_pid()

        os.kill(engine_pid, signal.SIGKILL)
        console.wait_for("Engine gone")

        refused = office.semo("answer", question["id"], "--option", "1", check=False)
        assert refused.returncode == 2, refused
        assert "is not running" in refused.stderr and "not recorded" in refused.stderr
        [still] = json.loads(office.semo("questions", "--office", "demo", "--json").stdout)
        assert still["status"] == "pending" and still["answer"] is None
        prompt = office.semo(
            "command",
            "--office",
            "demo",
            "send_prompt",
            "--session",
            question["session_id"],
            "--payload",
            '{"prompt": "are you there?"}',
            check=False,
        )
        assert prompt.returncode == 2, prompt
        assert "is not running" in prompt.stderr and "was not queued" in prompt.stderr

        console.key("C-r")  # start it again from the console
        console.wait_for("the engine runs again")
        assert office.engine_pid() != engine_pid
        console.wait_for("1 postgres")  # the demo's new job asks again
    office.cleanup("--demo")


def test_sigterm_detaches_and_restores_the_terminal(office: Office) -> None:
    with consoles() as opened:
        console = Console(office, "console")
        opened.append(console)
        console.wait(lambda s: ready(s, "A"), "the console")
        assert console.flag("alternate_on") == "1"
        assert console.flag("mouse_any_flag") == "1"

        os.kill(console.pid, signal.SIGTERM)
        console.wait_dead()
        assert console.flag("alternate_on") == "0"
        assert console.flag("mouse_any_flag") == "0"
        assert console.flag("mouse_sgr_flag") == "0"
        assert "detached from office 'ctl' (SIGTERM)" in console.text()
        assert socket_answers(_socket(office))
        assert {s["status"] for s in office.sessions()} == {"ready"}


def test_a_foreground_engine_takes_consoles_and_stops_with_semo_stop(office: Office) -> None:
    engine = office.engine(office.folder / "engine.log")
    try:
        wait_until(lambda: list((office.runtime / "semo").glob("control-*.json")), "its socket")
        assert office.engine_pid() == engine.pid
        with consoles() as opened:
            console = Console(office, "console")
            opened.append(console)
            console.wait(lambda s: ready(s, "A") and ready(s, "B"), "both agents")
            assert office.engine_pid() == engine.pid  # attached to it, none started
            assert "stopped" in office.semo("stop").stdout
            assert engine.wait(30) == 0
            console.wait_for("the engine stopped")
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.wait(30)  # reaped: no zombie left in pytest
