"""`semo capture` end to end: real programs in a real PTY, through the console script."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from semo.engine.terminal.session import TerminalSession

SEMO = [sys.executable, "-m", "semo.engine.cli"]


def run_semo(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SEMO, *args], capture_output=True, text=True, timeout=timeout)


def test_capture_prints_settled_rows_trimmed():
    result = run_semo("capture", "--cols", "30", "--rows", "4", "--", "printf", "a  \\nb\\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["a", "b", "", ""]


def test_capture_types_keys_and_json_reports_state():
    result = run_semo(
        "capture", "--json", "--cols", "40", "--rows", "5", "--settle", "200",
        "--keys", "echo hi<Enter>", "printf '\\e]2;T\\a\\e[?2004h\\e[1;31mR'<Enter>",
        "--", "bash", "--norc", "--noprofile",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert "hi" in data["lines"]
    assert data["title"] == "T"
    assert 2004 in data["modes"]
    assert data["alternate_screen"] is False
    row = next(i for i, line in enumerate(data["lines"]) if line.startswith("R"))
    assert any(s["fg"] == "red" and s["bold"] and s["start"] == 0 for s in data["styles"][row])
    assert data["exit"] is None


def test_capture_waits_for_a_slow_starting_program_to_draw():
    # silent for longer than --settle before the first byte (vim on a loaded machine): the
    # screen was empty, and quiet, but the program had not drawn yet
    result = run_semo(
        "capture", "--settle", "100", "--", "sh", "-c", "sleep 0.6; echo drawn; sleep 5"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "drawn"


def test_capture_types_into_a_program_that_writes_nothing_first():
    result = run_semo("capture", "--rows", "3", "--keys", "typed<Enter>", "--", "cat")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:2] == ["typed", "typed"]  # the echo, then cat's copy


def test_capture_reports_exit_status_of_a_finished_program():
    result = run_semo("capture", "--json", "--", "sh", "-c", "echo bye; exit 3")
    data = json.loads(result.stdout)
    assert data["exit"] == {"code": 3, "signal": None}
    assert data["lines"][0] == "bye"


def test_capture_answers_cursor_position_queries():
    script = (
        "import sys,tty,termios,os;fd=0;old=termios.tcgetattr(fd);tty.setraw(fd);"
        "os.write(1,b'abc\\x1b[6n');r=b''\n"
        "while not r.endswith(b'R'): r+=os.read(fd,1)\n"
        "termios.tcsetattr(fd,termios.TCSADRAIN,old);print(' got',r[1:].decode())"
    )
    result = run_semo("capture", "--", sys.executable, "-c", script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "abc got [1;4R"


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        (["--keys", "<Nope>", "--", "true"], "unknown key <Nope>", 2),
        (["--"], "give the command after --", 2),
        (["--", "/no/such/program"], "/no/such/program", 127),
        (["--cols", "0", "--", "true"], "must be > 0", 2),
    ],
)
def test_capture_bad_input_is_a_clear_error(args, message, code):
    result = run_semo("capture", *args)
    assert result.returncode == code
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_capture_that_never_settles_says_so():
    result = run_semo(
        "capture", "--timeout", "1", "--settle", "500", "--",
        sys.executable, "-c", "import time\nwhile True: print('x', flush=True); time.sleep(0.05)",
    )  # fmt: skip
    assert result.returncode == 3
    assert "still changing" in result.stderr


async def test_session_resize_reaches_the_child():
    session = TerminalSession(["bash", "--norc", "--noprofile"], cols=80, rows=24)
    session.start()
    try:
        await session.wait_quiet(0.2, 5)
        session.resize(50, 10)
        assert (session.screen.columns, session.screen.lines) == (50, 10)
        await session.send_keys("stty size<Enter>")
        await session.wait_quiet(0.3, 5)
        assert "10 50" in session.screen.text_rows()
    finally:
        await session.close()


async def test_session_records_an_asciicast(tmp_path):
    from semo.engine.terminal.asciicast import read_asciicast, replay_output

    cast = tmp_path / "s.cast"
    session = TerminalSession(["sh", "-c", "read x; echo got $x"], record=cast, cols=30, rows=5)
    session.start()
    await session.send_keys("hello<Enter>")
    await session.wait()
    await session.close()
    header, events = read_asciicast(cast)
    assert (header.width, header.height) == (30, 5)
    assert [e.data for e in events if e.kind == "i"] == ["hello\r"]
    assert "got hello" in replay_output(events)


async def test_agents_never_inherit_the_engine_store_credentials(monkeypatch):
    monkeypatch.setenv("SEMO_DATABASE_URL", "postgresql://semo:hunter2@db/semo")
    monkeypatch.setenv("SUPABASE_SERVICE_ROLE_KEY", "service-role-secret")
    monkeypatch.setenv("SEMO_HARMLESS_LOOKING", "x")
    monkeypatch.setenv("PROJECT_VAR", "kept")
    script = "env | grep -E 'SEMO_|SUPABASE_|PROJECT_VAR|hunter2|secret'; sleep 5"
    session = TerminalSession(["sh", "-c", script], cols=200, rows=50)
    session.start()
    try:
        await session.wait_quiet(0.3, 5)
        text = "\n".join(session.screen.text_rows())
        assert "PROJECT_VAR=kept" in text
        assert "hunter2" not in text and "service-role-secret" not in text
        assert "SEMO_" not in text and "SUPABASE_" not in text
    finally:
        await session.close()
