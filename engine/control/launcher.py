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
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from engine.control.liveness import pid_alive
from engine.control.paths import OfficePaths, private_dir
from engine.control.server import socket_answers

#: seconds to wait for a background engine's socket
START_TIMEOUT = 60.0
#: extra seconds `semo stop` waits beyond shutdown_grace before it kills the engine
STOP_MARGIN = 20.0


class LaunchError(Exception):
    """The background engine did not come up (the message has its log's last lines)."""


def engine_running(paths: OfficePaths) -> bool:
    return socket_answers(paths.socket)


def engine_command(config: Path | None) -> list[str]:
    """`semo engine --config PATH`, or the demo engine for None."""
    if config is None:
        return [sys.executable, "-m", "engine.control.background"]
    return [sys.executable, "-m", "engine.cli", "engine", "--config", str(config.absolute())]


def engine_pid(paths: OfficePaths) -> int | None:
    """The pid the serving engine recorded, if any."""
    try:
        info = json.loads(paths.info.read_text())
    except (OSError, ValueError):
        return None
    pid = info.get("pid") if isinstance(info, dict) else None
    return pid if isinstance(pid, int) and pid > 0 else None


def start_background(command: list[str], paths: OfficePaths, timeout: float = START_TIMEOUT) -> int:
    """Start `command` as a background engine and wait until its socket answers; its pid.
    LaunchError (with the log's tail) when it exits or does not answer in time."""
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


def stop_engine(paths: OfficePaths, grace: float) -> str:
    """`semo stop`: ask the engine to stop (agents get `grace` seconds, then are killed, as on
    SIGTERM); if it is still there `grace + STOP_MARGIN` seconds later, SIGKILL it. Returns
    what happened, in words; LaunchError when no engine serves the office."""
    import asyncio

    from engine.control.client import EngineClient, EngineGone, EngineNotRunning

    async def ask() -> int | None:
        client = EngineClient(paths)
        await client.connect()
        try:
            return await client.stop_engine()
        except EngineGone:
            return client.pid
        finally:
            await client.close()

    try:
        pid = asyncio.run(ask())
    except EngineNotRunning as error:
        raise LaunchError(str(error)) from None
    pid = pid or engine_pid(paths)
    deadline = time.monotonic() + grace + STOP_MARGIN
    while time.monotonic() < deadline:
        if pid is not None and not pid_alive(pid):
            return f"engine {pid} stopped"
        if pid is None and not paths.socket.exists():
            return "engine stopped"
        time.sleep(0.1)
    if pid is not None and pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        return f"engine {pid} did not stop within {grace + STOP_MARGIN:.0f} s: killed"
    return "engine stopped"
