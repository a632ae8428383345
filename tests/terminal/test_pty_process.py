"""TerminalProcess against real child processes in real PTYs."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import stat
import sys
from pathlib import Path

import pytest

from semo.engine.terminal.pty_process import (
    ExitStatus,
    TerminalClosedError,
    TerminalProcess,
    TerminalSpawnError,
)
from tests.support.pty_children import TIMEOUT, Output, Spawn, finish, python
from tests.support.waiting import eventually


def process_state(pid: int) -> str | None:
    """The one-letter state of `pid` from /proc, or None if it no longer exists."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    return stat_line.rpartition(")")[2].split()[0]


def zombie_children() -> list[int]:
    """This process's exited, unreaped children (the tests compare before and after: in a
    whole-suite run an earlier test's child may be left unreaped)."""
    zombies = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if fields[0] == "Z" and int(fields[1]) == os.getpid():
            zombies.append(int(entry.name))
    return zombies


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def is_dead(pid: int) -> bool:
    """Gone, or a zombie waiting for init to reap it."""
    return process_state(pid) in (None, "Z")


async def wait_until_dead(pid: int) -> None:
    await eventually(lambda: is_dead(pid), TIMEOUT, what=f"pid {pid} to end", interval=0.02)


# -- output ------------------------------------------------------------------------------------


async def test_output_arrives(spawn: Spawn) -> None:
    out = Output()
    process = spawn(["printf", "hello\\nworld\\n"], on_output=out)
    assert await finish(process) == ExitStatus(code=0, signal=None)
    assert out.text == "hello\r\nworld\r\n"
    assert all(out.chunks)


async def test_child_sees_initial_size(spawn: Spawn) -> None:
    out = Output()
    process = spawn(["stty", "size"], cols=100, rows=30, on_output=out)
    await finish(process)
    assert out.text == "30 100\r\n"


async def test_multibyte_character_split_across_reads_arrives_whole(spawn: Spawn) -> None:
    code = (
        "import os, time\n"
        "for byte in '한'.encode():\n"
        "    os.write(1, bytes([byte]))\n"
        "    time.sleep(0.05)\n"
    )
    out = Output()
    process = spawn(python(code), on_output=out)
    await finish(process)
    assert out.text == "한"
    assert "\ufffd" not in out.text


async def test_invalid_utf8_is_replaced_not_fatal(spawn: Spawn) -> None:
    out = Output()
    process = spawn(python("import os; os.write(1, b'a\\xffb')"), on_output=out)
    await finish(process)
    assert out.text == "a\ufffdb"


async def test_reads_are_capped_at_read_size(spawn: Spawn) -> None:
    out = Output()
    process = spawn(python("print('x' * 2000, end='')"), on_output=out, read_size=16)
    await finish(process)
    assert out.text == "x" * 2000
    assert max(len(chunk) for chunk in out.chunks) <= 16


async def test_on_output_exception_is_logged_and_reading_continues(
    spawn: Spawn, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[str] = []

    def explode_once(text: str) -> None:
        seen.append(text)
        if len(seen) == 1:
            raise RuntimeError("boom")

    code = "import time; print('one', flush=True); time.sleep(0.2); print('two', flush=True)"
    with caplog.at_level(logging.ERROR, logger="semo.terminal"):
        process = spawn(python(code), on_output=explode_once)
        assert await finish(process) == ExitStatus(code=0, signal=None)
    assert "".join(seen) == "one\r\ntwo\r\n"
    assert any(record.name == "semo.terminal" and record.exc_info for record in caplog.records)


async def test_env_and_cwd_are_the_childs(spawn: Spawn, tmp_path: Path) -> None:
    out = Output()
    env = {"PATH": os.environ["PATH"], "SEMO_TEST": "visible"}
    process = spawn(["bash", "-c", 'echo "$SEMO_TEST $PWD"'], env=env, cwd=tmp_path, on_output=out)
    await finish(process)
    assert out.text == f"visible {tmp_path}\r\n"


# -- input -------------------------------------------------------------------------------------


async def test_write_is_echoed_by_cat(spawn: Spawn) -> None:
    out = Output()
    process = spawn(["cat"], on_output=out)
    process.write("ping 한\n")
    # Once from the terminal's echo, once from cat.
    await out.wait_for("ping 한\r\nping 한\r\n")
    process.write(b"\x04")
    assert await finish(process) == ExitStatus(code=0, signal=None)


async def test_large_write_does_not_block_the_loop(spawn: Spawn) -> None:
    size = 1024 * 1024
    out = Output()
    script = f"stty raw -echo; echo READY; head -c {size} | wc -c"
    process = spawn(["bash", "-c", script], on_output=out)
    await out.wait_for("READY")

    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0)

    ticking = asyncio.create_task(ticker())
    process.write("a" * size)
    # The kernel cannot take a megabyte at once: write() returned with the rest queued.
    assert process.write_buffer_size > 0
    await out.wait_for(str(size))
    done.set()
    await ticking
    assert ticks > 1
    assert process.write_buffer_size == 0
    assert await finish(process) == ExitStatus(code=0, signal=None)


async def test_write_after_exit_raises(spawn: Spawn) -> None:
    process = spawn(["true"], on_output=Output())
    await finish(process)
    with pytest.raises(TerminalClosedError, match="exited with code 0"):
        process.write("too late\n")
    with pytest.raises(TerminalClosedError):
        process.resize(100, 30)


# -- resize ------------------------------------------------------------------------------------


async def test_resize_delivers_sigwinch(spawn: Spawn) -> None:
    code = (
        "import os, signal\n"
        "def report(*_):\n"
        "    size = os.get_terminal_size(0)\n"
        "    print(f'SIZE {size.columns}x{size.lines}', flush=True)\n"
        "signal.signal(signal.SIGWINCH, report)\n"
        "print('READY', flush=True)\n"
        "while True:\n"
        "    signal.pause()\n"
    )
    out = Output()
    process = spawn(python(code), on_output=out)
    await out.wait_for("READY")
    process.resize(132, 43)
    await out.wait_for("SIZE 132x43")
    assert (process.cols, process.rows) == (132, 43)


async def test_stty_sees_new_size(spawn: Spawn) -> None:
    out = Output()
    process = spawn(["bash", "-c", "read -r; stty size"], on_output=out)
    process.resize(90, 20)
    process.write("\n")
    await finish(process)
    assert out.text.endswith("20 90\r\n")


# -- exit --------------------------------------------------------------------------------------


async def test_exit_code_is_reported(spawn: Spawn) -> None:
    exits: list[ExitStatus] = []
    process = spawn(["bash", "-c", "exit 7"], on_output=Output(), on_exit=exits.append)
    status = await finish(process)
    assert status == ExitStatus(code=7, signal=None)
    assert status.describe() == "exited with code 7"
    assert exits == [status]
    assert process.exit_status == status
    assert process.closed and not process.running


async def test_death_by_signal_is_reported(spawn: Spawn) -> None:
    process = spawn(["bash", "-c", "kill -KILL $$"], on_output=Output())
    status = await finish(process)
    assert status == ExitStatus(code=None, signal=signal.SIGKILL)
    assert status.describe() == "killed by signal 9 (SIGKILL)"


async def test_exit_is_reported_without_pidfd(
    spawn: Spawn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(os, "pidfd_open", raising=False)
    out = Output()
    process = spawn(["bash", "-c", "echo bye; exit 3"], on_output=out)
    assert await finish(process) == ExitStatus(code=3, signal=None)
    assert out.text == "bye\r\n"


async def test_terminate_kills_the_whole_process_group(spawn: Spawn) -> None:
    out = Output()
    process = spawn(["bash", "-c", 'sleep 1000 & echo "GRANDCHILD $!"; sleep 1000'], on_output=out)
    match = re.search(r"GRANDCHILD (\d+)", await out.wait_for("\n"))
    assert match is not None
    grandchild = int(match.group(1))
    assert not is_dead(grandchild)

    status = await asyncio.wait_for(process.terminate(), TIMEOUT)
    assert status.signal in (signal.SIGHUP, signal.SIGTERM)
    await wait_until_dead(grandchild)


async def test_terminate_escalates_to_sigkill(spawn: Spawn) -> None:
    code = (
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
        "print('READY', flush=True)\n"
        "time.sleep(1000)\n"
    )
    out = Output()
    process = spawn(python(code), on_output=out)
    await out.wait_for("READY")
    status = await asyncio.wait_for(process.terminate(grace=0.2), TIMEOUT)
    assert status == ExitStatus(code=None, signal=signal.SIGKILL)


async def test_terminate_is_idempotent(spawn: Spawn) -> None:
    process = spawn(["sleep", "1000"], on_output=Output())
    first, second = await asyncio.wait_for(
        asyncio.gather(process.terminate(), process.terminate()), TIMEOUT
    )
    assert first == second == process.exit_status
    assert await process.terminate() == first


async def test_terminate_after_natural_exit_returns_the_status(spawn: Spawn) -> None:
    process = spawn(["bash", "-c", "exit 4"], on_output=Output())
    await finish(process)
    assert await process.terminate() == ExitStatus(code=4, signal=None)


# -- spawn failures and resources --------------------------------------------------------------


async def test_command_not_found(spawn: Spawn) -> None:
    with pytest.raises(TerminalSpawnError, match="no-such-command-semo") as caught:
        spawn(["no-such-command-semo", "--flag"], on_output=Output())
    assert caught.value.argv == ["no-such-command-semo", "--flag"]
    assert "not found" in caught.value.reason


async def test_bad_cwd(spawn: Spawn, tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    with pytest.raises(TerminalSpawnError, match="No such file or directory") as caught:
        spawn(["true"], cwd=missing, on_output=Output())
    assert caught.value.argv == ["true"]


async def test_exec_failure_leaves_no_zombie_or_fd(spawn: Spawn, tmp_path: Path) -> None:
    not_a_program = tmp_path / "garbage"
    not_a_program.write_bytes(b"\x00\x01\x02 not an executable format")
    not_a_program.chmod(not_a_program.stat().st_mode | stat.S_IXUSR)
    fds_before, zombies_before = open_fds(), set(zombie_children())
    with pytest.raises(TerminalSpawnError, match="Exec format error"):
        spawn([str(not_a_program)], on_output=Output())
    assert open_fds() == fds_before
    assert set(zombie_children()) <= zombies_before


async def test_empty_argv(spawn: Spawn) -> None:
    with pytest.raises(TerminalSpawnError, match="empty argv"):
        spawn([], on_output=Output())


def test_spawn_needs_a_running_loop() -> None:
    with pytest.raises(RuntimeError):
        TerminalProcess.spawn(["true"], on_output=print)


async def test_many_spawns_leak_no_fds_or_zombies() -> None:
    fds_before, zombies_before = open_fds(), set(zombie_children())
    processes = [
        TerminalProcess.spawn(["printf", "%s", str(n)], on_output=Output()) for n in range(50)
    ]
    statuses = await asyncio.wait_for(asyncio.gather(*(p.wait() for p in processes)), TIMEOUT)
    assert set(statuses) == {ExitStatus(code=0, signal=None)}
    assert open_fds() == fds_before
    assert set(zombie_children()) <= zombies_before


def test_exit_status_needs_exactly_one_field() -> None:
    with pytest.raises(ValueError):
        ExitStatus(code=None, signal=None)
    with pytest.raises(ValueError):
        ExitStatus(code=0, signal=9)
    assert ExitStatus(code=None, signal=15).describe() == "killed by signal 15 (SIGTERM)"


async def test_child_gets_default_sigint_even_if_the_engine_ignores_it(spawn: Spawn) -> None:
    """`semo engine &` runs with SIGINT ignored; Ctrl+C must still interrupt an agent."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        out = Output()
        script = "import signal; print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)"
        process = spawn([sys.executable, "-c", script], on_output=out)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert await finish(process) == ExitStatus(code=0, signal=None)
    assert out.text == "False\r\n"
