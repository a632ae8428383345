"""The first frame `semo console` paints from the engine's snapshot before Textual has loaded
(console/first_frame.py, issue 14's attach budget).

- On a real office (a `semo engine` of two bash agents, one command carried out): the frame
  painted from what a `Preconnect` got, shown in tmux, reads as the real console's own frame
  does in tmux at the same size, row for row (the header, the session list with each
  session's last line, the inbox, the commands, the pane with its screen, the key bar).
- At 80x24 with six scripted agents and a long question (341 characters, 4 options; alone or
  with two more pending), the painted inbox is the console's: a row of the list, the text
  scrolling beside its scrollbar, every option, `N pending · PgDn: more`, and the commands
  panel below kept. The question's text and options wrap as Textual's Static wraps them.
- A real `semo console` paints it: the selected session's screen is on the terminal before
  Textual has entered its own modes, and with `SEMO_FIRST_FRAME=0` it is not.
- A hostile office (escape sequences, OSC 52, C1 controls and bidi overrides in role names,
  questions and screen rows; a snapshot with missing or wrong fields) paints no control
  sequence but the painter's own, and what it cannot read is left out.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.text import Text
from textual.content import Content

from semo.console.first_frame import LEAVE_FIRST_FRAME, _wrap, paint, selected_session
from semo.console.panel_text import DETACH_KEY, question_answer_parts, question_text_parts
from semo.console.targets import CACHE_NAME
from semo.engine.control.client import FirstScreen, Preconnect
from tests.console.console_snapshot_app import LONG
from tests.control.office import SEMO, Console, Office, consoles
from tests.support.office_toml import sqlite_office_toml
from tests.support.tmux import TmuxServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(180)
COLS, ROWS = 120, 32
TERM = "xterm-256color"
CONSOLE_ARGS = "console --config semo.toml"
#: what the painter writes: CSI sequences with numeric parameters, nothing else
OWN_SEQUENCES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture
def office(tmp_path: Path) -> Iterator[Office]:
    office = Office(tmp_path)
    try:
        yield office
    finally:
        office.cleanup()


def first_screen(office: Office) -> FirstScreen:
    [info] = (office.runtime / "semo").glob("control-*.json")
    socket = Path(json.loads(info.read_text())["socket"])
    found = Preconnect(socket, "ctl", pick=selected_session).first_screen(30)
    assert found is not None and list(found.screens) == selected_session(found.snapshot)
    return found


def shown_in_tmux(frame: str, folder: Path, size: tuple[int, int]) -> list[str]:
    """The rows tmux shows after `frame` was written to a terminal of `size`."""
    path = folder / "frame.ans"
    path.write_text(frame)
    tmux = TmuxServer()
    try:
        command = ["sh", "-c", f"cat {path}; sleep 60"]
        cols, rows = size
        tmux.start(command, cols=cols, rows=rows, env={"LANG": "C.UTF-8"}, cwd=folder, term=TERM)
        shown = wait_until(
            lambda: tmux.state()[0],
            "the key bar (painted last)",
            20,
            until=lambda rows: "Palette" in rows[-1],
            interval=0.05,
        )
        return [row.rstrip() for row in shown]
    finally:
        tmux.kill()


def settled(console: Console, shown: str = "MARK-42") -> list[str]:
    """The console's rows once they stopped changing for 1.5 s (its panels fill in over a few
    frames; the session list's last lines at its 0.5 s refresh, the store's rows each second)."""
    console.wait_for(shown)
    previous: list[str] = []
    same = 0
    for _ in range(200):
        rows = [row.rstrip() for row in console.text().split("\n")]
        same = same + 1 if rows == previous else 0
        if same == 5:
            return rows
        previous = rows
        time.sleep(0.3)
    return previous


@pytest.mark.parametrize("size", [(120, 32), (80, 24), (200, 50)], ids=lambda s: f"{s}")
def test_the_first_frame_reads_as_the_console_s_own(
    office: Office, tmp_path: Path, size: tuple[int, int]
) -> None:
    cols, rows = size
    with consoles() as opened:  # starts the engine in the background, remembers its socket
        opened.append(Console(office, "console", "--config", "semo.toml", cols=cols, rows=rows))
        console = opened[0]
        console.wait(lambda s: "A " in s and "B " in s and "#1" in s, "the sessions")
        console.key("Enter")  # into A's pane (the first by role, selected)
        console.wait(lambda s: "│$" in s, "A's prompt")
        console.type("clear; echo MARK-$((6*7))\r")
        console.wait_for("MARK-42")
        console.kill()  # the terminal gone: the engine goes on
    # B prints a line (its last line in the list) through a command (a row in Commands)
    [b_session] = [s["session_id"] for s in office.sessions() if s["role"] == "B"]
    payload = json.dumps({"text": "echo LINE-$((2*21))-B\r"})
    office.semo("command", "send_text", "--session", str(b_session), "--payload", payload, "--wait")
    time.sleep(0.5)  # bash prints it

    assert_painted_as_shown(office, tmp_path, size, "MARK-42")


def assert_painted_as_shown(
    office: Office, folder: Path, size: tuple[int, int], shown: str
) -> None:
    """The frame painted from a `Preconnect`'s snapshot reads, in tmux, row for row as a
    console opened next at `size` once it has settled (and shows `shown`)."""
    cols, rows = size
    first = first_screen(office)
    painted = shown_in_tmux(paint(first.snapshot, first.screens, size, DETACH_KEY), folder, size)
    with consoles() as opened:
        opened.append(Console(office, "console", "--config", "semo.toml", cols=cols, rows=rows))
        real = settled(opened[0], shown)
    assert len(painted) == len(real) == rows
    differ = [
        f"row {y}:\n  painted: {mine!r}\n  console: {theirs!r}"
        for y, (mine, theirs) in enumerate(zip(painted, real, strict=True))
        if mine != theirs
    ]
    assert not differ, "\n".join(differ)


SCRIPT_ROLES = ["FE", "BE", "QA", "DB", "OPS", "DOCS"]


SHORT = {"type": "choice", "question": "Which port?", "options": ["8080", "9090"]}


def script_office_toml(folder: Path, asking: int) -> str:
    """Six scripted agents (tests/support/script_agent.py): when told "go" FE asks LONG, the
    next `asking` - 1 ask SHORT a moment later (FE's stays the oldest), the others say a
    line."""
    repo = json.dumps(str(Path(__file__).resolve().parents[2]))
    text = sqlite_office_toml("ctl") + "\n[engine]\nshutdown_grace = 1\n\n[pool]\n"
    text += f"max_sessions = 6\nwarm_roles = {json.dumps(SCRIPT_ROLES)}\n"
    for index, role in enumerate(SCRIPT_ROLES):
        reply: dict[str, object] = {"match": "go", "text": f"{role.lower()}: done"}
        if index == 0:
            reply["text"] = f"[ASK_USER]\n{json.dumps(LONG)}\n[/ASK_USER]"
        elif index < asking:
            reply |= {"text": f"[ASK_USER]\n{json.dumps(SHORT)}\n[/ASK_USER]", "delay": 1.5}
        script = folder / f"{role}.json"
        script.write_text(json.dumps([reply]))
        command = [sys.executable, "-m", "tests.support.script_agent", "--script", str(script)]
        command += ["--log", str(folder / f"{role}.log")]
        text += f"""
[[agents]]
role = "{role}"
profile = "generic"
command = {json.dumps(command)}
reads_prompts = true
env = {{ PYTHONPATH = {repo} }}
"""
    return text


@pytest.mark.parametrize("asking", [1, 3])
def test_a_long_question_is_painted_as_the_inbox_lays_it_out(
    office: Office, tmp_path: Path, asking: int
) -> None:
    """At 80x24 with six sessions the oldest question (341 characters, 4 options) does not
    fit the sidebar: the painted inbox shows a row of the list (with the list's scrollbar
    when more questions wait), the start of the text with its scrollbar, every option,
    `N pending · PgDn: more`, and the commands panel below keeps its border and a row, as
    the console's own inbox does."""
    (office.folder / "semo.toml").write_text(script_office_toml(office.folder, asking))
    size = (80, 24)
    with consoles() as opened:  # the engine in the background; the panes size the agents
        opened.append(Console(office, "console", "--config", "semo.toml", cols=80, rows=24))
        opened[0].wait(lambda s: all(f"{role} " in s for role in SCRIPT_ROLES), "six sessions")
        time.sleep(2.0)  # the agents have their pane's size before they print
        for session in office.sessions():
            payload = json.dumps({"prompt": "go"})
            office.semo(
                "command", "send_prompt", "--session", str(session["session_id"]),
                "--payload", payload,
            )  # fmt: skip
        opened[0].wait_for(f"{asking} pending")
        opened[0].kill()
    assert_painted_as_shown(office, tmp_path, size, f"{asking} pending · PgDn: more")


def test_the_painted_inbox_wraps_text_as_textual_does() -> None:
    """The question's text and options, word-wrapped at each width as Textual's Static shows
    them (Content.wrap): the rows the inbox needs, and what each row says, are the same."""
    words = ["a", "db,", "sessions", "x" * 35, "漢字漢字", "  ", "page.", "\n", "🙂", "ok ", "\tb"]
    pick = random.Random(7)
    for case in range(1500):
        question = " ".join(pick.choice(words) for _ in range(pick.randint(0, 40)))
        width = pick.randint(3, 40)
        if case % 2:
            parts = question_text_parts("FE", question)
        else:
            parts = question_answer_parts("choice", question.split("\n"))
        painted = ["".join(text for text, _ in row).rstrip() for row in _wrap(parts, width)]
        content = Content.from_rich_text(Text.assemble(*parts))
        assert painted == [line.plain.rstrip() for line in content.wrap(width)], (width, question)


def test_a_console_paints_the_snapshot_before_textual_starts(office: Office) -> None:
    with consoles() as opened:
        opened.append(Console(office, "console", "--config", "semo.toml", cols=COLS, rows=ROWS))
        opened[0].wait(lambda s: "A " in s and "#1" in s, "the sessions")
        opened[0].key("Enter")
        opened[0].wait(lambda s: "│$" in s, "A's prompt")
        opened[0].type("echo MARK-$((6*7))\r")
        opened[0].wait_for("MARK-42")
        opened[0].kill()
    for enabled in (True, False):
        out = tmp_output(office, enabled)
        textual_start = out.find(b"\x1b[?1000h")  # Textual turns mouse reporting on first
        assert textual_start > 0, out[:2000]
        before = out[:textual_start]
        assert (b"MARK-42" in before) is enabled
        assert before.count(b"\x1b[?1049h") == (2 if enabled else 1)  # ours, then Textual's


def tmp_output(office: Office, first_frame: bool, semo_args: str = CONSOLE_ARGS) -> bytes:
    """What `semo console` writes to its terminal until it detaches, read through `script`
    (the console's terminal a pseudo-terminal with the usual cooked modes). ctrl+q is typed
    as soon as the sessions show, which may be the painted frame: it must reach the app as
    the detach key, not the line discipline as XON."""
    env = {**office.env, "TERM": TERM, "SEMO_FIRST_FRAME": "1" if first_frame else "0"}
    log = office.folder / f"typescript-{first_frame}-{len(semo_args)}"
    tmux = TmuxServer()
    try:
        modes = office.folder / f"stty-{first_frame}-{len(semo_args)}"
        command = f"script -q -c '{SEMO} {semo_args}; stty -a > {modes}' {log}"
        tmux.start(
            ["sh", "-c", command], cols=COLS, rows=ROWS, env=env, cwd=office.folder, term=TERM
        )
        deadline = time.monotonic() + 60
        wait_until(lambda: "\n".join(tmux.state()[0]), "session #1", 60, until=lambda t: "#1" in t)
        tmux("send-keys", "-t", "fid", "C-q")
        wait_until(tmux.dead, "the console to detach", max(deadline - time.monotonic(), 0))
        # the terminal's own modes are back once the console is gone (no raw input left)
        settings = modes.read_text().split()
        assert {"icanon", "echo", "isig", "ixon"} <= set(settings), settings
    finally:
        tmux.kill()
    return log.read_bytes()


def test_semo_demo_paints_its_office_too(office: Office) -> None:
    """The README's first command: the demo office's socket is remembered like a config's
    (keyed by the module that makes its config), so a second `semo demo` paints at once, on
    the session that asks (FE's question), as the console then selects it too."""
    with consoles() as opened:
        opened.append(Console(office, "demo", cols=COLS, rows=ROWS))
        opened[0].wait_for("1 postgres")
        opened[0].kill()
    try:
        cache = json.loads((office.folder / "state" / "semo" / CACHE_NAME).read_text())
        assert "<demo>" in cache and cache["<demo>"]["office"] == "demo"
        out = tmp_output(office, True, "demo")
        before = out[: out.find(b"\x1b[?1000h")]
        assert b"\x1b[?1049h" in before and b"semo demo agent" in before
        assert "FE #1 frontend · asks you".encode() in before  # the session that asks comes first
        with consoles() as opened:  # and Textual's main screen selects it too
            opened.append(Console(office, "demo", cols=COLS, rows=ROWS))
            opened[0].wait(lambda _s: opened[0].flag("mouse_any_flag") == "1", "the app")
            opened[0].wait(lambda s: "╭─ FE #1 frontend · asks you" in s, "FE's pane")
    finally:
        office.semo("stop", "--demo", check=False)


HOSTILE = "\x1b]52;c;cm0gLXJmIH4=\x07\x9b31m\u202eevil\x1b[2J\x1b[?1049l"


def hostile_snapshot() -> tuple[dict[str, object], dict[str, object]]:
    sessions = [
        {"session_id": "s1", "role": f"QA{HOSTILE}", "state": "waiting_input", "queued": 2},
        {"session_id": "s3", "role": "FE", "state": "ready", "last_line": f"ok {HOSTILE}"},
        {"session_id": "s2", "role": "BE", "state": f"ready{HOSTILE}"},
        {"no_id": True},
        "not a session",
    ]
    snapshot = {
        "name": f"office{HOSTILE}",
        "backend": HOSTILE,
        "connection": None,
        "agents": {"QA": {"id": "a1"}, "BE": "not a dict"},
        "sessions": sessions,
        "pool": {"total": 2, "max_sessions": 6, "down": [HOSTILE], "sessions": {"s1": {}}},
        "questions": [
            {
                "agent_id": "a1",
                "question": f"Pick {HOSTILE}\nsecond line",
                "question_type": "choice",
                "options": [f"o{HOSTILE}", "two"],
                "created_at": "not a date",
            }
        ],
        "commands": [{"id": "c1", "created_at": "2026-11-26T10:00:00+00:00", "status": HOSTILE}],
        "results": {"c1": HOSTILE},
    }
    styles = {"0": ["red", "default", 1], "1": ["ff00ff", "brightblue", 16]}
    rows = {
        "0": f"plain {HOSTILE}",
        "1": [f"wide 漢字 emoji 🙂 styled {HOSTILE}", [0, 4, 0, 5, 30, 1, 30, 99, 7], 1],
        "2": ["bad runs", ["x", 1, 0], 0],
    }
    return snapshot, {"t": "screen", "s": "s1", "full": 1, "rows": rows, "styles": styles}


def test_a_hostile_snapshot_paints_nothing_but_its_own_sequences() -> None:
    snapshot, screen = hostile_snapshot()
    assert selected_session(snapshot) == ["s1"]  # QA… asks: selected before BE, FE
    frame = paint(snapshot, {"s1": screen}, (COLS, ROWS), DETACH_KEY)
    rest = OWN_SEQUENCES.sub("", frame)
    for forbidden in ("\x1b", "\x07", "\x9b", "\u202e"):
        assert forbidden not in rest
    assert "\\x1b]52;c;" in rest  # shown, not obeyed
    assert "漢字" in rest and "second line" in rest and "bad runs" in rest
    assert frame.startswith("\x1b[?1049h") and "\x1b[?1049l" not in frame
    assert LEAVE_FIRST_FRAME.endswith("\x1b[?1049l")


def test_an_empty_or_odd_snapshot_still_paints_the_frame() -> None:
    for snapshot in ({}, {"sessions": None, "pool": None, "questions": None}):
        frame = paint(snapshot, {}, (80, 24), DETACH_KEY)
        rest = OWN_SEQUENCES.sub("", frame)
        assert "Sessions" in rest and "no pending questions" in rest and "Detach" in rest


def test_keys_and_clicks_on_the_painted_frame_reach_the_pane(office: Office) -> None:
    """The operator acts on the painted office before Textual runs: a click on the pane and a
    command typed are held until the main screen shows, then applied in order."""
    with consoles() as opened:
        opened.append(Console(office, "console", "--config", "semo.toml", cols=COLS, rows=ROWS))
        opened[0].wait(lambda s: "A " in s and "#1" in s, "the sessions")
        opened[0].kill()
    with consoles() as opened:
        console = Console(office, "console", "--config", "semo.toml", cols=COLS, rows=ROWS)
        opened.append(console)
        console.wait(lambda s: "A #1" in s, "the painted office")
        console.click(COLS - 20, 10)  # on A's pane
        console.type("echo early-$((2*3))\r")
        console.wait_for("│early-6")


SLOW_TEXTUAL = """
import importlib.abc, sys, time

class _Slow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "textual.app":
            time.sleep(30)  # the painted frame stays up: long enough to be signalled there
        return None

sys.meta_path.insert(0, _Slow())
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_a_signal_while_only_the_frame_is_painted_restores_the_terminal(
    office: Office, tmp_path: Path, signum: signal.Signals
) -> None:
    """SIGTERM or SIGHUP before the app has its handlers (Textual made to load slowly by a
    sitecustomize): the console leaves as a detach, the terminal's screen and modes as they
    were (no alternate screen, cursor shown, no mouse reporting, cooked input)."""
    with consoles() as opened:
        opened.append(Console(office, "console", "--config", "semo.toml", cols=COLS, rows=ROWS))
        opened[0].wait(lambda s: "A " in s and "#1" in s, "the sessions")
        opened[0].kill()
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text(SLOW_TEXTUAL)
    modes = tmp_path / "stty.txt"
    env = {**office.env, "PYTHONPATH": str(slow)}
    tmux = TmuxServer()
    try:
        command = f"{SEMO} console --config semo.toml; echo EXIT-$?; stty -a > {modes}; sleep 60"
        tmux.start(
            ["sh", "-c", command], cols=COLS, rows=ROWS, env=env, cwd=office.folder, term=TERM
        )
        shell = int(tmux("display-message", "-p", "-t", "fid", "#{pane_pid}").strip())
        deadline = time.monotonic() + 60
        wait_until(
            lambda: "\n".join(tmux.state()[0]),
            "session A #1",
            60,
            until=lambda t: "A #1" in t,
            interval=0.05,
        )
        assert tmux("display-message", "-p", "-t", "fid", "#{alternate_on}").strip() == "1"
        [semo] = subprocess.run(
            ["pgrep", "-P", str(shell)], capture_output=True, text=True
        ).stdout.split()
        os.kill(int(semo), signum)
        wait_until(
            lambda: "\n".join(tmux.state()[0]),
            "the shell's EXIT-0",
            max(deadline - time.monotonic(), 0),
            until=lambda t: "EXIT-0" in t,
            interval=0.05,
        )
        flags = "#{alternate_on} #{cursor_flag} #{mouse_any_flag} #{mouse_sgr_flag}"
        assert tmux("display-message", "-p", "-t", "fid", flags).split() == ["0", "1", "0", "0"]
        wait_until(
            lambda: modes.exists() and modes.read_text(),
            "the terminal's modes written",
            max(deadline - time.monotonic(), 0),
            interval=0.05,
        )
        assert {"icanon", "echo", "isig", "ixon"} <= set(modes.read_text().split())
    finally:
        tmux.kill()
    assert office.sessions()  # a detach: the engine and its agents go on
