"""Build the engine the console runs in-process, from `semo console` / `semo demo` arguments."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from console.app import SemoApp
from engine.config import ConfigError, load_config
from engine.engine import Engine
from engine.hardening import make_non_dumpable


def launch(args: list[str]) -> int:
    make_non_dumpable()  # the engine runs in this process: agents must not read it (SECURITY.md)
    parser = argparse.ArgumentParser(prog=f"semo {args[0]}")
    parser.add_argument("--config", type=Path, default=Path("semo.toml"))
    options, _rest = parser.parse_known_args(args[1:])
    logging.basicConfig(filename=_log_path(), level=logging.INFO, force=True)
    if args[0] == "demo":
        from engine.demo.office import demo_config, demo_folder

        engine = Engine(demo_config(), folder_for=demo_folder)
        demo_task = True
    else:
        try:
            config = load_config(options.config)
        except ConfigError as error:
            print(f"semo console: {error}")
            return 2
        engine = Engine(config)
        demo_task = False
    SemoApp(engine, demo_task=demo_task).run()
    return 0


def _log_path() -> Path:
    """The console owns the terminal: the engine's log goes to a file beside the store."""
    from engine.store.sqlite import default_sqlite_path

    path = default_sqlite_path().with_name("console.log")
    path.parent.mkdir(parents=True, exist_ok=True)
    return path
