"""Ending an agent's terminal ends what the agent started outside its process group, on real
processes (TerminalProcess, as AgentSession.terminate uses it).

- A process that left the agent's session at once (`(setsid cmd &)`: its parent exits, it is
  orphaned before anyone could see it as the agent's descendant) and ignores SIGHUP/SIGTERM/
  SIGINT is adopted by the child subreaper (this test process, as the engine is one while it
  serves its control socket) and carries the agent's hook token in its environment (its
  stdio moved off the terminal): it is killed when the grace is over. One started the same
  way with another token (as another agent's would be) is not touched.
- A job of the agent's interactive shell (its own process group, the same terminal session)
  deaf to the signals is killed too, and the terminal waits the grace for it first.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

import pytest

from semo.engine.control.reaper import is_subreaper, set_subreaper
from semo.engine.terminal.pty_process import TerminalProcess

pytestmark = pytest.mark.timeout(60)

#: stdin, stdout and stderr away from the agent's terminal
QUIET = "</dev/null >/dev/null 2>&1"


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


async def pid_in(path: Path) -> int:
    for _ in range(200):
        pid = _read_pid(path)
        if pid is not None:
            return pid
        await asyncio.sleep(0.05)
    raise AssertionError(f"no pid in {path}")


def _read_pid(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text else None


def reap(pid: int) -> None:
    """Kill and reap `pid` if it is (still) our child."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def deaf(pidfile: Path, seconds: int) -> str:
    return f"bash -c \"trap '' HUP TERM INT; echo \\$\\$ > {pidfile}; exec sleep {seconds}\""


async def test_orphans_carrying_the_agents_token_and_its_jobs_are_ended(tmp_path: Path) -> None:
    assert not is_subreaper()
    assert set_subreaper(True), "this system has no child subreapers"
    mine, other, job = tmp_path / "mine", tmp_path / "other", tmp_path / "job"
    script = (
        # both away from the terminal (which would tell they are this agent's): the token does
        f"({'setsid ' + deaf(mine, 633)} {QUIET} &); "
        f"(SEMO_HOOK_TOKEN=someone-else setsid {deaf(other, 644)} {QUIET} &); "
        f"set -m; {deaf(job, 655)} & "
        "exec sleep 1000"
    )
    env = {"PATH": os.environ["PATH"], "SEMO_HOOK_TOKEN": "token-of-this-agent"}
    pids: list[int] = []
    try:
        process = TerminalProcess.spawn(
            ["bash", "-c", script], env=env, cols=80, rows=24, on_output=lambda _text: None
        )
        pids = [await pid_in(path) for path in (mine, other, job)]
        orphan, stranger, deaf_job = pids
        assert os.getsid(orphan) == orphan and os.getsid(stranger) == stranger
        assert os.getsid(deaf_job) == process.pid and os.getpgid(deaf_job) != process.pid
        for _ in range(100):  # their parent subshells exit: adopted by us
            if all(_parent(pid) == os.getpid() for pid in (orphan, stranger)):
                break
            await asyncio.sleep(0.05)
        assert _parent(orphan) == os.getpid() and _parent(stranger) == os.getpid()
        status = await process.terminate(grace=1.0)
        assert status.signal == signal.SIGHUP  # the leader went at once
        assert not alive(orphan)
        assert not alive(deaf_job)
        assert alive(stranger)  # another agent's: left alone
    finally:
        set_subreaper(False)
        for pid in pids:
            reap(pid)


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[1])
