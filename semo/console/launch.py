"""`semo console` / `semo demo`: attach to the office's engine and open the console on it.

How it works: docs/CONSOLE.md, "Starting the console".
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from semo.console.first_frame import LEAVE_FIRST_FRAME, paint, selected_session, terminal_size
from semo.console.panel_text import DETACH_KEY
from semo.console.targets import Target, cached_target, remember_target, state_dir
from semo.engine.control.client import EngineClient, Preconnect
from semo.engine.fsutil import private_dir, private_file
from semo.engine.hardening import make_non_dumpable

if TYPE_CHECKING:
    from collections.abc import Callable

    from semo.engine.control.paths import OfficePaths


class _Failed(Exception):
    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def launch(args: list[str]) -> int:
    make_non_dumpable()  # the console reads the config (store credentials): keep agents out
    command = args[0]
    parser = argparse.ArgumentParser(prog=f"semo {command}")
    parser.add_argument("--config", type=Path, default=Path("semo.toml"))
    options, _rest = parser.parse_known_args(args[1:])
    _log_to_file()
    config: Path | None = options.config if command == "console" else None
    target = cached_target(config)
    preconnect, held = None, None
    if target is not None:
        preconnect = Preconnect(target.socket, target.office, pick=selected_session)
        held = _paint_first_frame(preconnect)
    try:
        if target is None:  # a config error is reported before Textual loads, as always
            target = _start_engine(command, config)

        from semo.console.app import SemoApp  # Textual: meanwhile the thread connects

        if preconnect is not None and not preconnect.greeted():
            target, preconnect = _start_engine(command, config), None
    except _Failed as error:
        _leave_first_frame(held, app_ran=False)
        print(f"semo {command}: {error}", file=sys.stderr)
        return error.status
    except BaseException:
        _leave_first_frame(held, app_ran=False)
        raise
    if config is None:
        stop_hint, again = "semo stop --demo", "semo demo"
    else:
        flag = "" if config == Path("semo.toml") else f" --config {config}"
        stop_hint, again = f"semo stop{flag}", f"semo console{flag}"
    client = EngineClient(target, preconnect=preconnect)
    app = SemoApp(
        client,
        restart=lambda: _restart(target, config),
        report_death=_death_reporter(target, config),
        prefix=target.prefix,
        hold_input=held is not None,
        sort=target.sort,
    )
    try:
        app.run()
    finally:
        _leave_first_frame(held, app_ran=True)
    if app.exit_reason == "SIGHUP":  # a closed terminal has nowhere to print to
        return 0
    from semo.engine.control.launcher import engine_running

    if not engine_running(_office_paths(target)):
        print(
            f"semo {command}: the engine of office {target.office!r} is not running; {again} "
            "starts it again"
        )
    else:
        pid = f" (pid {client.pid})" if client.pid else ""
        why = "" if app.exit_reason == "detached" else f" ({app.exit_reason})"  # SIGHUP...
        print(
            f"semo {command}: detached from office {target.office!r}{why}; its "
            f"engine{pid} and agents keep running.\n"
            f"  attach again: {again}    stop the agents: {stop_hint}    "
            f"detach in the console: {DETACH_KEY}, or {target.prefix} then d in a pane"
        )
    return 0


def _death_reporter(target: Target, config: Path | None) -> Callable[[str, str], None] | None:
    """What tells the office's remote sinks that its engine died (None: the demo office)."""
    if config is None:
        return None
    log = _office_paths(target).log

    def report(engine_id: str, reason: str) -> None:
        from semo.console.death_report import report_in_background

        report_in_background(config, engine_id, reason, log)

    return report


#: how long the launcher waits for the engine's snapshot to paint the first frame with
FIRST_FRAME_WAIT = 0.25


def _paint_first_frame(preconnect: Preconnect) -> list[Any] | None:
    """The main screen from the engine's snapshot, in ANSI, before Textual loads
    (semo/console/first_frame.py); nothing when stdin or stdout is no terminal, the engine does not
    answer in time, or `SEMO_FIRST_FRAME=0`.

    From then until the app runs, the terminal's input is raw as Textual will set it: a key
    typed at the painted frame is not echoed over it, ctrl+c/ctrl+z/ctrl+q are keys for the
    app (not signals or flow control), and nothing waits for Enter. Returns the terminal's
    own settings (for `_leave_first_frame`), or None when nothing was painted."""
    size = terminal_size()
    if size is None or os.environ.get("SEMO_FIRST_FRAME") == "0":
        return None
    first = preconnect.first_screen(FIRST_FRAME_WAIT)
    if first is None:
        return None
    try:
        frame = paint(first.snapshot, first.screens, size, DETACH_KEY)
    except Exception:  # the engine's snapshot is not ours to trust blindly: Textual draws it
        logging.getLogger("semo.console").exception("the first frame was not painted")
        return None
    saved = _raw_input()
    if saved is None:
        return None
    sys.stdout.write(frame)
    sys.stdout.flush()
    _leave_on_signals(saved)
    return saved


def _leave_on_signals(saved: list[Any]) -> None:
    """SIGTERM or SIGHUP before the app has its own handlers (it sets them when it mounts):
    the terminal as it was, then exit, as a detach (the engine and the agents go on)."""

    def leave(signum: int, _frame: object) -> None:
        _leave_first_frame(saved, app_ran=False)
        if signum == signal.SIGTERM:
            print(f"semo: detached ({signal.Signals(signum).name}); the agents keep running")
        os._exit(0)

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, leave)


def _raw_input() -> list[Any] | None:
    import termios

    try:
        saved = termios.tcgetattr(0)
        raw = termios.tcgetattr(0)
        raw[0] &= ~(termios.IXON | termios.IXOFF | termios.ICRNL | termios.INLCR | termios.IGNCR)
        raw[3] &= ~(termios.ECHO | termios.ICANON | termios.IEXTEN | termios.ISIG)
        raw[6][termios.VMIN], raw[6][termios.VTIME] = 1, 0
        termios.tcsetattr(0, termios.TCSANOW, raw)
    except (termios.error, OSError):
        return None
    return saved


def _leave_first_frame(saved: list[Any] | None, *, app_ran: bool) -> None:
    """The terminal's own settings back (Textual restores those it found: the raw ones); and,
    when the console stops before its app ran, the screen and cursor as they were."""
    if saved is None:
        return
    import termios

    if not app_ran:
        sys.stdout.write(LEAVE_FIRST_FRAME)
        sys.stdout.flush()
    with contextlib.suppress(termios.error, OSError):
        termios.tcsetattr(0, termios.TCSANOW, saved)


def _full_target(command: str, config: Path | None) -> tuple[Target, list[str]]:
    """The office's socket from the config loaded in full (remembered for the next start),
    and the command that starts its engine. `config` None: the demo office."""
    from semo.engine.config import ConfigError, load_config
    from semo.engine.control.launcher import engine_command
    from semo.engine.control.paths import ControlPathError, office_paths

    try:
        if config is None:
            from semo.engine.demo.office import DEMO_OFFICE, demo_config

            demo = demo_config()
            console = demo.console
            paths = office_paths(DEMO_OFFICE, demo.store_config())
        else:
            loaded = load_config(config)
            console = loaded.console
            paths = office_paths(loaded.office.name, loaded.store_config())
    except ConfigError as error:
        raise _Failed(str(error), 2) from None
    except (ControlPathError, OSError) as error:
        raise _Failed(str(error), 1) from None
    target = Target(paths.office, paths.socket, paths.info, paths.log, console.prefix, console.sort)
    remember_target(config, target)
    return target, engine_command(config)


def _start_engine(command: str, config: Path | None) -> Target:
    """The slow path: load the config, and start the engine in the background when none
    answers."""
    from semo.engine.control.launcher import LaunchError, engine_running, start_background
    from semo.engine.control.paths import ControlPathError

    target, engine_argv = _full_target(command, config)
    paths = _office_paths(target)
    try:
        if not engine_running(paths):
            print(
                f"semo {command}: starting the engine of office {paths.office!r} in the background"
            )
            print(f"semo {command}: its log: {paths.log}")
            start_background(engine_argv, paths)
    except (LaunchError, ControlPathError, OSError) as error:
        raise _Failed(str(error), 1) from None
    return target


def _restart(target: Target, config: Path | None) -> None:
    from semo.engine.control.launcher import engine_command, engine_running, start_background

    paths = _office_paths(target)
    if not engine_running(paths):
        start_background(engine_command(config), paths)


def _office_paths(target: Target) -> OfficePaths:
    from semo.engine.control.paths import OfficePaths

    return OfficePaths(office=target.office, socket=target.socket, info=target.info, log=target.log)


def console_log_path() -> Path:
    """The console's own log file beside the store, 0600 in a 0700 folder (logs can reveal
    what agents do); created when missing."""
    path = state_dir() / "console.log"
    private_dir(path.parent)
    return private_file(path)


def _log_to_file() -> None:
    """The console owns the terminal: its own log goes to a file (console_log_path)."""
    from semo.engine.logs import TextFormatter

    log_file = logging.FileHandler(console_log_path())
    log_file.setFormatter(TextFormatter())  # agent text in a log line: controls made visible
    logging.basicConfig(handlers=[log_file], level=logging.INFO, force=True)
