"""`semo console` without a terminal (issue 25): stdin or stdout not a tty (a pipe, a file,
/dev/null) is refused with one clear line on stderr and exit 2, before any engine is
started, and nothing (no escape sequence) is written to stdout. Real `semo` processes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.control.office import Office, office_fixture, run_semo

pytestmark = pytest.mark.timeout(120)

office = office_fixture()


def _refused(done: subprocess.CompletedProcess[str], office: Office) -> None:
    assert done.returncode == 2, done
    assert done.stdout == "" and "\x1b" not in done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("semo console: ") and "terminal" in line
    assert not list((office.runtime / "semo").glob("control-*.json"))  # no engine started
    assert not (office.folder / "semo.db").exists()


def test_console_without_a_terminal_refuses_in_one_line(office: Office) -> None:
    def console(**streams: object) -> subprocess.CompletedProcess[str]:
        # old code started an engine and drew the console into the pipe until the timeout
        return run_semo("console", env=office.env, cwd=office.folder, timeout=30, **streams)

    _refused(console(stdin=subprocess.DEVNULL), office)  # nothing is a terminal
    leader, follower = os.openpty()  # stdin a terminal, stdout a pipe (`semo console | less`)
    try:
        _refused(console(stdin=follower), office)
    finally:
        os.close(leader)
        os.close(follower)


def test_console_help_still_works_without_a_terminal(office: Office, tmp_path: Path) -> None:
    done = run_semo("console", "--help", env=office.env, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert done.returncode == 0 and "usage: semo console" in done.stdout
