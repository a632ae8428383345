"""`semo console` / `semo demo`: attach to the office's engine, starting it in the background
when none runs, and open the console on it. Leaving the console detaches (engine.control)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from console.app import DETACH_KEY, SemoApp
from engine.config import ConfigError, load_config
from engine.control.client import EngineClient
from engine.control.launcher import (
    LaunchError,
    engine_command,
    engine_running,
    start_background,
)
from engine.control.paths import ControlPathError, OfficePaths, office_paths
from engine.fsutil import private_dir, private_file
from engine.hardening import make_non_dumpable
from engine.logs import TextFormatter


def launch(args: list[str]) -> int:
    make_non_dumpable()  # the console reads the config (store credentials): keep agents out
    command = args[0]
    parser = argparse.ArgumentParser(prog=f"semo {command}")
    parser.add_argument("--config", type=Path, default=Path("semo.toml"))
    options, _rest = parser.parse_known_args(args[1:])
    log_file = logging.FileHandler(_log_path())
    log_file.setFormatter(TextFormatter())  # agent text in a log line: controls made visible
    logging.basicConfig(handlers=[log_file], level=logging.INFO, force=True)
    try:
        if command == "demo":
            from engine.demo.office import DEMO_OFFICE, demo_config

            prefix = demo_config().console.prefix
            paths = office_paths(DEMO_OFFICE, demo_config().store_config())
            engine_argv = engine_command(None)
            stop_hint = "semo stop --demo"
            again = "semo demo"
        else:
            config = load_config(options.config)
            prefix = config.console.prefix
            paths = office_paths(config.office.name, config.store_config())
            engine_argv = engine_command(options.config)
            flag = "" if options.config == Path("semo.toml") else f" --config {options.config}"
            stop_hint = f"semo stop{flag}"
            again = f"semo console{flag}"
        if not engine_running(paths):
            print(
                f"semo {command}: starting the engine of office {paths.office!r} in the background"
            )
            print(f"semo {command}: its log: {paths.log}")
            start_background(engine_argv, paths)
    except ConfigError as error:
        print(f"semo {command}: {error}", file=sys.stderr)
        return 2
    except (LaunchError, ControlPathError, OSError) as error:
        print(f"semo {command}: {error}", file=sys.stderr)
        return 1
    client = EngineClient(paths)
    app = SemoApp(client, restart=lambda: _restart(engine_argv, paths), prefix=prefix)
    app.run()
    if app.exit_reason == "SIGHUP":  # a closed terminal has nowhere to print to
        return 0
    if not engine_running(paths):
        print(
            f"semo {command}: the engine of office {paths.office!r} is not running; {again} "
            "starts it again"
        )
    else:
        pid = f" (pid {client.pid})" if client.pid else ""
        print(
            f"semo {command}: detached from office {paths.office!r} ({app.exit_reason}); its "
            f"engine{pid} and agents keep running.\n"
            f"  attach again: {again}    stop the agents: {stop_hint}    "
            f"detach in the console: {DETACH_KEY}, or {prefix} then d in a pane"
        )
    return 0


def _restart(engine_argv: list[str], paths: OfficePaths) -> None:
    if not engine_running(paths):
        start_background(engine_argv, paths)


def _log_path() -> Path:
    """The console owns the terminal: its own log goes to a file beside the store."""
    from engine.store.sqlite import default_sqlite_path

    path = default_sqlite_path().with_name("console.log")
    private_dir(path.parent)  # 0600 in a 0700 folder: logs can reveal what agents do
    return private_file(path)
