"""Real `semo` processes for the control tests: an office of two bash agents in a temporary
folder, consoles in private tmux servers (the reference terminal), and the `semo` CLI."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from semo.engine.config import parse_config
from semo.engine.engine import Engine
from semo.engine.runtime import pid_alive
from tests.support import waiting
from tests.support.control_engine import serving_engine
from tests.support.office_toml import sqlite_office_toml
from tests.support.tmux import TmuxServer

TIMEOUT = 45.0
SEMO = Path(sys.executable).with_name("semo")

#: the rest of an [[agents]] table of CONFIG: a plain interactive bash
BASH = """command = ["bash", "--norc", "--noprofile", "-i"]
env = { PS1 = "$ " }"""


def ctl_config(grace: float, a: str, b: str) -> str:
    """Office "ctl" (sqlite), `[engine] shutdown_grace` `grace`, up to 4 sessions, two generic
    agents A and B warm: `a` and `b` the rest of their [[agents]] tables (command, env)."""
    return (
        sqlite_office_toml("ctl")
        + f"""
[engine]
shutdown_grace = {grace}

[pool]
max_sessions = 4
warm_roles = ["A", "B"]

[[agents]]
role = "A"
profile = "generic"
{a}

[[agents]]
role = "B"
profile = "generic"
{b}
"""
    )


CONFIG = ctl_config(1, BASH, BASH)


@contextlib.asynccontextmanager
async def engine_in_process(
    folder: Path, monkeypatch: pytest.MonkeyPatch, **agent_env: str
) -> AsyncIterator[Engine]:
    """An `Engine` of `folder/semo.toml` (CONFIG) with its control socket, started in this
    process and stopped after: XDG_RUNTIME_DIR a short temporary folder (removed after), the
    agents in `folder/work` with PATH, HOME `folder` and `agent_env`."""
    (folder / "semo.toml").write_text(CONFIG)
    config = parse_config(CONFIG, folder / "semo.toml")
    env = {"PATH": os.environ["PATH"], "HOME": str(folder), **agent_env}
    async with serving_engine(config, folder, monkeypatch, env, "semo-ctl-") as engine:
        yield engine


def start_engine(folder: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """`semo engine --config semo.toml` started in `folder`, its output appended to `log`
    (the caller kills or stops it)."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [str(SEMO), "engine", "--config", "semo.toml"],
            cwd=folder,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def run_semo(
    *args: str,
    env: dict[str, str],
    cwd: Path,
    timeout: float = 90,
    check: bool = False,
    **popen: object,
) -> subprocess.CompletedProcess[str]:
    """`semo ARGS` run to its end in `cwd` with `env`, its output captured as text."""
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [str(SEMO), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
        check=check,
        **popen,
    )


def run_console(
    *args: str, env: dict[str, str], cwd: Path, timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    """`semo ARGS` (a console) run to its end on a terminal of its own, as an operator runs it
    (stdin and stdout a pty; `semo console` refuses anything else), its stderr captured as
    text; stdout is "" (what it drew on the terminal is not kept)."""
    leader, follower = os.openpty()
    try:
        done = subprocess.run(
            [str(SEMO), *args],
            stdin=follower,
            stdout=follower,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=cwd,
            timeout=timeout,
        )
    finally:
        os.close(leader)
        os.close(follower)
    return subprocess.CompletedProcess(done.args, done.returncode, "", done.stderr)


def office_folder(folder: Path) -> None:
    """`folder` made an office's: a git repository `repo` on `main` with one empty commit, and
    semo.toml (CONFIG)."""
    repo = folder / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "init"], check=True)
    (folder / "semo.toml").write_text(CONFIG)


class Office:
    """A folder with semo.toml, a git repository, its own state, runtime and HOME."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        # a short runtime folder: Unix socket paths must stay under 108 bytes
        self.runtime = Path(tempfile.mkdtemp(prefix="semo-ctl-"))
        office_folder(folder)
        self.env = {
            "PATH": os.environ["PATH"],
            "HOME": str(folder),
            "LANG": "C.UTF-8",
            "XDG_STATE_HOME": str(folder / "state"),
            "XDG_RUNTIME_DIR": str(self.runtime),
            "SEMO_SQLITE_PATH": str(folder / "semo.db"),
        }

    def semo(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run_semo(*args, env=self.env, cwd=self.folder, check=check)

    def engine(self, log: Path) -> subprocess.Popen[bytes]:
        """This office's `semo engine` process, its output appended to `log`."""
        return start_engine(self.folder, self.env, log)

    def sessions(self, office: str = "ctl") -> list[dict[str, object]]:
        out = self.semo("sessions", "--office", office, "--json").stdout
        return json.loads(out)  # type: ignore[no-any-return]

    def both_ready(self, office: str = "ctl") -> bool:
        """Whether the store lists the office's two agents A and B, both ready (False before
        the engine made the office)."""
        listed = self.semo("sessions", "--office", office, "--json", check=False)
        if listed.returncode != 0:
            return False
        rows = json.loads(listed.stdout)
        return sorted((r["role"], r["status"]) for r in rows) == [("A", "ready"), ("B", "ready")]

    def sessions_all(self, office: str = "ctl") -> list[dict[str, object]]:
        out = self.semo("sessions", "--office", office, "--all", "--json").stdout
        return json.loads(out)  # type: ignore[no-any-return]

    def info(self) -> dict[str, object]:
        """The running engine's control info file (pid, engine id, socket)."""
        [path] = (self.runtime / "semo").glob("control-*.json")
        return json.loads(path.read_text())  # type: ignore[no-any-return]

    def engine_pid(self) -> int:
        return int(self.info()["pid"])  # type: ignore[call-overload]

    def cleanup(self, *stop_args: str) -> None:
        """Stop whatever engine the test left running (never leave agents behind)."""
        pids: list[int] = []
        with contextlib.suppress(Exception):
            pids.append(self.engine_pid())
        self.semo("stop", *stop_args, check=False)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.runtime, ignore_errors=True)


def office_fixture(config: Callable[[Path], str] | None = None) -> object:
    """An `office` fixture: an `Office` in the test's tmp_path (its semo.toml `config(folder)`
    when given, else CONFIG), cleaned up after the test (its engine stopped, its agents killed).
    Assign it to `office` in the test module."""

    @pytest.fixture
    def office(tmp_path: Path) -> Iterator[Office]:
        made = Office(tmp_path)
        if config is not None:
            (tmp_path / "semo.toml").write_text(config(tmp_path))
        yield made
        made.cleanup()

    return office


class Console:
    """`semo console` (or `semo demo`) in its own tmux server, the size of a real terminal."""

    def __init__(self, office: Office, *args: str, cols: int = 120, rows: int = 32) -> None:
        self.tmux = TmuxServer()
        self.tmux.start(
            [str(SEMO), *args],
            cols=cols,
            rows=rows,
            env={**office.env, "TERM": "xterm-256color"},
            cwd=office.folder,
            term="xterm-256color",
        )
        self.pid = int(self.tmux("display-message", "-p", "-t", "fid", "#{pane_pid}").strip())

    def text(self) -> str:
        return "\n".join(self.tmux.state()[0])

    def wait(self, predicate: Callable[[str], bool], what: str, timeout: float = TIMEOUT) -> str:
        return waiting.wait_until(self.text, what, timeout, until=predicate)

    def wait_for(self, needle: str, timeout: float = TIMEOUT) -> str:
        return self.wait(lambda text: needle in text, repr(needle), timeout)

    def click(self, x: int, y: int) -> None:
        """A left click at screen cell (x, y), 0-based (SGR mouse, as a terminal reports it)."""
        self.tmux(
            "send-keys", "-t", "fid", "-l", f"\x1b[<0;{x + 1};{y + 1}M\x1b[<0;{x + 1};{y + 1}m"
        )

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", "fid", "-l", text)

    def key(self, name: str) -> None:
        self.tmux("send-keys", "-t", "fid", name)

    def flag(self, name: str) -> str:
        return self.tmux("display-message", "-p", "-t", "fid", f"#{{{name}}}").strip()

    def dead(self) -> bool:
        return self.tmux.dead()

    def wait_dead(self, timeout: float = TIMEOUT) -> None:
        waiting.wait_until(
            self.dead, "the console to exit", timeout, detail=lambda: f"screen:\n{self.text()}"
        )

    def kill(self) -> None:
        self.tmux.kill()


@contextlib.contextmanager
def consoles() -> Iterator[list[Console]]:
    """Consoles opened in the block are killed at its end (their tmux servers)."""
    opened: list[Console] = []
    try:
        yield opened
    finally:
        for console in opened:
            console.kill()


def alive(pid: int) -> bool:
    """Running (an exited process whose parent has not reaped it yet is not)."""
    return pid_alive(pid)


def ready(screen: str, role: str) -> bool:
    """The console's session list shows `role` ready."""
    return re.search(rf"│{role}\s+(#\d+\s+)?ready", screen) is not None


def wait_until(condition: Callable[[], object], what: str, timeout: float = TIMEOUT) -> None:
    """`tests.support.waiting.wait_until` with the office tests' TIMEOUT."""
    waiting.wait_until(condition, what, timeout)
