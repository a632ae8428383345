"""What every `semo` command over a store shares: --config, the office, the store.

A handler runs with the configured store open (exit codes: 0 done, 2 bad input or config file,
3 the store is unreachable)."""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from semo.engine.plain_text import plain

if TYPE_CHECKING:  # the store, pydantic and the models load when a command runs, not for --help
    from semo.engine.store import StoreConfig
    from semo.engine.store.base import Store

Handler = Callable[["Store", argparse.Namespace], Coroutine[Any, Any, int]]
#: a command that opens no store itself
Main = Callable[[argparse.Namespace], Coroutine[Any, Any, int]]
OFFICE_HELP = "office name or id (default: $SEMO_OFFICE, the config's office, or the only one)"


class ConfigFileError(ValueError):
    """The --config file cannot be used (missing when named, invalid): exit code 2."""


def add_config_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        help="semo.toml whose [store] and [office] to use (default ./semo.toml when present; "
        "the environment overrides each store setting)",
    )


def load_cli_config(args: argparse.Namespace) -> Any:
    """The SemoConfig of `--config` (or of ./semo.toml when it exists), else None."""
    from semo.engine.config import ConfigError, default_config_path, load_config

    path: Path | None = getattr(args, "config", None)
    if path is None:
        path = default_config_path()
        if not path.is_file():
            return None
    try:
        return load_config(path)
    except ConfigError as error:
        raise ConfigFileError(str(error)) from None


def store_config_for(args: argparse.Namespace) -> StoreConfig:
    """The store of `--config` with the environment's overrides, or the environment's alone."""
    from semo.engine.store import StoreConfig

    config = load_cli_config(args)
    return StoreConfig.from_env() if config is None else config.store_config()


def office_for(args: argparse.Namespace) -> str | None:
    """The office asked for: --office, else SEMO_OFFICE, else the config file's office name."""
    wanted = getattr(args, "office", None) or os.environ.get("SEMO_OFFICE")
    if wanted:
        return str(wanted)
    config = load_cli_config(args)
    return None if config is None else str(config.office.name)


def add_listing(
    commands: Any, name: str, help: str, handler: Handler, *, include: str | None = None
) -> argparse.ArgumentParser:
    """A command that lists an office's rows (`views.office_table`): --office, --json,
    --config, and --all when `include` says what it adds."""
    listing = commands.add_parser(name, help=help)
    listing.add_argument("--office", help=OFFICE_HELP)
    if include is not None:
        listing.add_argument("--all", action="store_true", help=include)
    listing.add_argument("--json", action="store_true", help="print JSON")
    add_config_option(listing)
    listing.set_defaults(handler=_run(handler))
    return listing


def _run(handler: Handler) -> Callable[[argparse.Namespace], int]:
    """`handler` run with the store the arguments name, its errors told as `_run_main`."""
    return _run_main(functools.partial(_with_store, handler))


def _run_main(main: Main) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        import asyncio

        from semo.engine.store.base import StoreError, StoreUnavailable
        from semo.engine.store.models import InvalidCommand

        try:
            return asyncio.run(main(args))
        except ConfigFileError as error:
            print(f"semo {args.command}: {plain(str(error))}", file=sys.stderr)
            return 2
        except StoreUnavailable as error:
            print(f"semo {args.command}: store unavailable: {plain(str(error))}", file=sys.stderr)
            return 3
        except (StoreError, InvalidCommand, ValueError) as error:
            print(f"semo {args.command}: {plain(str(error))}", file=sys.stderr)
            return 2

    return run


async def _with_store(handler: Handler, args: argparse.Namespace) -> int:
    from semo.engine.store import open_store

    store = open_store(store_config_for(args))
    async with store:
        return await handler(store, args)
