"""`semo engine`: the headless engine, run until SIGTERM or SIGINT.

Exit codes: 0 after a clean stop, 1 when the engine cannot start (the reason is logged),
2 for a configuration error (printed, nothing started).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from pathlib import Path

from semo.engine.config import ConfigError, SemoConfig, config_secrets, load_config
from semo.engine.control.server import stop_reason
from semo.engine.engine import Engine
from semo.engine.hardening import make_non_dumpable
from semo.engine.heap import freeze_startup_heap, thaw_heap
from semo.engine.logs import LogFormat, configure_logging
from semo.engine.store.base import StoreError

log = logging.getLogger("semo.engine")

#: How often the running engine logs a one-line status.
STATUS_INTERVAL = 60.0


async def serve(engine: Engine, stop: asyncio.Event, http: str | None = None) -> None:
    await engine.start()
    api = None
    if http:  # the REST API beside the engine, on its own connection to the store
        from semo.engine.api.server import start_api
        from semo.engine.api.settings import parse_listen, resolve_settings

        config = engine.config
        settings = resolve_settings(
            config.api,
            config.office.name,
            command_timeout=config.engine.command_timeout,
            ship=config.ship,
            git=config.git,
        )
        api = await start_api(config.store_config(), settings, *parse_listen(http))
    log.info("started; %d start-up objects kept out of garbage collection", freeze_startup_heap())
    try:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), STATUS_INTERVAL)
            if not stop.is_set() and engine.pool is not None:
                status = engine.pool.status()
                # text logs get one short line; JSON logs carry the whole status as `pool`
                log.info(
                    "status: %s", status.summary(), extra={"pool": status.model_dump(mode="json")}
                )
    finally:
        thaw_heap()
        if api is not None:
            await api.stop()


async def run_engine(config: SemoConfig, http: str | None = None) -> int:
    engine = Engine(config, control=True)  # consoles attach (engine.control)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    reason = "stopped by signal"
    try:
        await serve(engine, stop, http)
    except (StoreError, OSError, ValueError) as error:
        log.error("engine cannot run: %s", error)
        reason = f"failed: {error}"
        return 1
    finally:
        await engine.stop(stop_reason(engine, reason))
    return 0


def main(config_path: Path, log_format: LogFormat | None = None, http: str | None = None) -> int:
    make_non_dumpable()  # before any secret is read: agents run as our uid
    try:
        config = load_config(config_path)
        http = http or config.api.listen or None
        if http:  # a bad address or no token: nothing starts
            from semo.engine.api.settings import parse_listen, resolve_settings

            parse_listen(http)
            resolve_settings(config.api, config.office.name)
    except (ConfigError, ValueError) as error:
        print(f"semo engine: {error}", file=sys.stderr)
        return 2
    fmt = log_format or config.engine.log_format
    configure_logging(fmt, secrets=config_secrets(config))
    for warning in config.warnings:
        log.warning("%s", warning)
    return asyncio.run(run_engine(config, http))
