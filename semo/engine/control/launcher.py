"""Find the engine that serves an office on this machine, start one in the background, stop it.

    paths = office_paths(config.office.name, config.store_config())
    if not engine_running(paths):
        start_background(engine_command(config_path), paths)   # setsid, log file, pid file
    ...
    stop_engine(paths, grace=config.engine.shutdown_grace)     # `semo stop`

A background engine is an ordinary `semo engine` (or the demo engine) in its own session
(`setsid`: no controlling terminal, so closing the console's terminal or SSH connection sends
it no SIGHUP), stdin from /dev/null, stdout and stderr appended to the office's log file in the
state folder. The engine writes its pid into the info file beside its socket.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from semo.engine.control.paths import ControlPathError, OfficePaths, private_dir
from semo.engine.info_file import read_info
from semo.engine.pycommand import python_module
from semo.engine.runtime import pid_alive, socket_answers, start_ticks

#: seconds to wait for a background engine's socket
START_TIMEOUT = 60.0
#: extra seconds `semo stop` waits beyond shutdown_grace before it kills the engine
#: (`$SEMO_STOP_MARGIN` replaces it: see stop_margin)
STOP_MARGIN = 20.0
#: seconds `semo stop` waits for the engine to take its request on the control socket
ASK_TIMEOUT = 10.0
#: seconds of slack when comparing a process's start with the time its info file was written
START_SLACK = 1.0


class LaunchError(Exception):
    """The background engine did not come up (the message has its log's last lines)."""


def engine_running(paths: OfficePaths) -> bool:
    return socket_answers(paths.socket)


def engine_command(config: Path | None) -> list[str]:
    """`semo engine --config PATH`, or the demo engine for None."""
    if config is None:
        return python_module("semo.engine.demo.background")
    return python_module("semo.engine.cli", "engine", "--config", str(config.absolute()))


def engine_pid(paths: OfficePaths) -> int | None:
    """The pid the serving engine recorded, if any."""
    info = read_info(paths.info)
    pid = info.get("pid") if info is not None else None
    return pid if isinstance(pid, int) and pid > 0 else None


def start_background(command: list[str], paths: OfficePaths, timeout: float = START_TIMEOUT) -> int:
    """Start `command` as a background engine and wait until its socket answers; its pid.
    LaunchError (with the log's tail) when it exits or does not answer in time; LaunchError
    in one line, before anything starts, when the socket's folder is not ours (the engine
    would refuse it)."""
    try:
        private_dir(paths.socket.parent)
    except ControlPathError as error:
        raise LaunchError(
            f"the folder of the engine's control socket cannot be used: {error}"
        ) from None
    private_dir(paths.log.parent)
    log = open(paths.log, "ab")  # noqa: SIM115 - handed to the child
    os.chmod(paths.log, 0o600)
    log.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {command}\n".encode())
    log.flush()
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
    try:
        child = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            env=env,
        )
    finally:
        log.close()
    deadline = time.monotonic() + timeout
    while not socket_answers(paths.socket, timeout=0.5):
        if child.poll() is not None:
            raise LaunchError(
                f"the engine exited with status {child.returncode}; its log "
                f"({paths.log}) ends:\n{log_tail(paths.log)}"
            )
        if time.monotonic() > deadline:
            raise LaunchError(
                f"the engine did not open {paths.socket} within {timeout:.0f} s; its log "
                f"({paths.log}) ends:\n{log_tail(paths.log)}"
            )
        time.sleep(0.05)
    # reaped when it exits, so it never lingers as our zombie while this console runs
    threading.Thread(target=child.wait, name="engine reaper", daemon=True).start()
    return child.pid


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def stop_margin() -> float:
    """STOP_MARGIN, or `$SEMO_STOP_MARGIN` seconds when set (tests: an engine that does not
    stop is killed within seconds)."""
    with contextlib.suppress(ValueError):
        margin = float(os.environ.get("SEMO_STOP_MARGIN", ""))
        if 0 <= margin <= 3600:
            return margin
    return STOP_MARGIN


def stop_engine(
    paths: OfficePaths,
    grace: float,
    *,
    margin: float | None = None,
    ask_timeout: float = ASK_TIMEOUT,
    say: Callable[[str], None] | None = None,
) -> str:
    """`semo stop`: ask the engine to stop (agents get `grace` seconds, then are killed, as on
    SIGTERM); if it is still there `grace + margin` seconds later (`stop_margin()` by default),
    SIGKILL it. An engine that does not take the request within `ask_timeout` seconds (stopped
    with SIGSTOP, hung) gets SIGTERM and SIGCONT instead (its SIGTERM handler stops it as the
    request would have), once its recorded pid is known to still be that engine
    (`still_the_engine`); `grace + margin` then count from the SIGTERM. `say` is told, in
    words, what it waits for before it waits. Returns what happened, in words; LaunchError
    when no engine serves the office."""
    import asyncio

    from semo.engine.control.client import EngineClient, EngineGone, EngineNotRunning

    limit = grace + (stop_margin() if margin is None else margin)
    deadline = time.monotonic() + limit
    asked = ask_timeout
    recorded = engine_pid(paths)  # before asking: the engine removes its file as it stops

    async def ask() -> tuple[int | None, int | None]:
        client = EngineClient(paths)
        try:
            async with asyncio.timeout(asked):
                await client.connect()
                try:
                    return await client.stop_engine_reply()
                except EngineGone:
                    return client.pid, None
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), 1.0)

    how, agents = "", None
    try:
        pid, agents = asyncio.run(ask())
    except EngineNotRunning as error:
        raise LaunchError(str(error)) from None
    except TimeoutError:
        pid = recorded
        if pid is None or not still_the_engine(pid, paths):
            raise LaunchError(
                f"the engine of office {paths.office!r} did not answer on {paths.socket} "
                f"within {asked:.0f} s, and no live engine process is "
                f"recorded in {paths.info}"
            ) from None
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
            os.kill(pid, signal.SIGCONT)  # a stopped engine (SIGSTOP) takes the SIGTERM
        how = f" (it did not answer within {asked:.0f} s: sent it SIGTERM)"
        deadline = time.monotonic() + limit  # from the SIGTERM on
    pid = pid or recorded
    if say is not None:
        say(stopping_words(pid, agents, grace, limit, how))
    started = start_ticks(pid) if pid is not None else None
    while time.monotonic() < deadline:
        if pid is not None and not pid_alive(pid):
            return f"engine {pid} stopped{how}"
        if pid is None and not paths.socket.exists():
            return f"engine stopped{how}"
        time.sleep(0.1)
    if pid is not None and pid_alive(pid) and start_ticks(pid) == started:  # not a new process
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        return f"engine {pid} did not stop within {limit:.0f} s{how}: killed (SIGKILL)"
    return f"engine stopped{how}"


def stopping_words(
    pid: int | None, agents: int | None, grace: float, limit: float, how: str
) -> str:
    """What `semo stop` says while it waits: which engine, how many agents, their grace and
    when the engine is killed if it is still there."""
    engine = "the engine" if pid is None else f"engine {pid}"
    count = "its agents" if agents is None else f"{agents} agent{'' if agents == 1 else 's'}"
    return f"stopping {engine} and {count} (grace {grace:g} s, killed after {limit:g} s){how}..."


def still_the_engine(pid: int, paths: OfficePaths) -> bool:
    """Whether live process `pid` is still the engine that recorded it in the office's info
    file: the file names it and the process started before the file was written (a pid
    reused since by another process started later). True when /proc does not tell the start."""
    if engine_pid(paths) != pid or not pid_alive(pid):
        return False
    ticks = start_ticks(pid)
    try:
        written = paths.info.stat().st_mtime
    except OSError:
        return False
    if ticks is None:
        return True
    age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    return time.time() - age <= written + START_SLACK
