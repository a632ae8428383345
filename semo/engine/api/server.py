"""Serving the API with uvicorn on the running asyncio loop.

    server = await start_api(store_config, settings, "127.0.0.1", 8765)  # its own store
    print(server.url)
    ...
    await server.stop()

`semo engine --http HOST:PORT` starts one beside the engine (same loop, its own connection to
the same store: the API is a client of the store like any web app); `semo api` runs one alone
against the store that engines serve. uvicorn does not install signal handlers here: the
process's owner (the daemon) handles SIGTERM/SIGINT and stops the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import sys
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING

import uvicorn

from semo.engine.api.app import create_app
from semo.engine.api.settings import ApiSettings, ApiSettingsError, parse_listen, resolve_settings
from semo.engine.store import StoreConfig, open_store
from semo.engine.store.base import Store, StoreError

if TYPE_CHECKING:
    from semo.engine.logs import LogFormat

log = logging.getLogger("semo.api")

#: seconds open connections get to finish when the server stops
GRACEFUL_SECONDS = 5


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield  # the daemon owns the signals


class ApiServer:
    """The API app served by uvicorn on the current loop, on a socket bound by `start`."""

    def __init__(self, store: Store, settings: ApiSettings, *, owns_store: bool = False) -> None:
        self.store = store
        self.settings = settings
        self.owns_store = owns_store
        self.app = create_app(store, settings)
        self.host = ""
        self.port = 0
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def start(self, host: str, port: int) -> ApiServer:
        """Bind HOST:PORT (0: a free port) and serve; OSError when the address is taken."""
        sock = _bind(host, port)
        self.host, self.port = sock.getsockname()[:2]
        config = uvicorn.Config(
            self.app,
            log_config=None,
            access_log=False,
            lifespan="off",
            server_header=False,
            timeout_graceful_shutdown=GRACEFUL_SECONDS,
        )
        self._server = _Server(config)
        self._task = asyncio.get_running_loop().create_task(
            self._server.serve(sockets=[sock]), name="semo-api"
        )
        while not self._server.started:
            if self._task.done():
                sock.close()
                self._task.result()  # raises what stopped it
                raise OSError(f"the API server on {host}:{port} stopped while starting")
            await asyncio.sleep(0.01)
        log.info(
            "API listening on %s for offices: %s", self.url, ", ".join(sorted(self.settings.tokens))
        )
        return self

    async def stop(self) -> None:
        """Stop accepting, let requests finish (GRACEFUL_SECONDS), close the store if ours."""
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            try:
                await asyncio.wait_for(asyncio.shield(self._task), GRACEFUL_SECONDS + 2)
            except TimeoutError:
                self._server.force_exit = True
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self._task
            except Exception:
                log.exception("the API server failed")
            self._server = self._task = None
            log.info("API stopped")
        await self.app.state.api.waiter.close()
        if self.owns_store:
            await self.store.close()


def _bind(host: str, port: int) -> socket.socket:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


async def start_api(
    store_config: StoreConfig, settings: ApiSettings, host: str, port: int
) -> ApiServer:
    """An ApiServer on its own connection to the store of `store_config`, started."""
    store = open_store(store_config)
    await store.open()
    server = ApiServer(store, settings, owns_store=True)
    try:
        return await server.start(host, port)
    except BaseException:
        await server.stop()
        raise


# -- `semo api` ---------------------------------------------------------------------------------


def main(config_path: Path, listen: str | None, log_format: LogFormat | None = None) -> int:
    """`semo api`: serve the API of the store in the config file until SIGTERM/SIGINT.
    Exit 0 after a clean stop, 1 when it cannot serve, 2 for a configuration error."""
    from semo.engine.config import ConfigError, config_secrets, load_config
    from semo.engine.hardening import make_non_dumpable
    from semo.engine.logs import configure_logging

    make_non_dumpable()  # same-uid agents must not read our tokens through /proc
    try:
        config = load_config(config_path)
        settings = resolve_settings(
            config.api,
            config.office.name,
            command_timeout=config.engine.command_timeout,
            ship=config.ship,
        )
        address = listen or config.api.listen
        if not address:
            raise ApiSettingsError("give --listen HOST:PORT or [api] listen in the config file")
        host, port = parse_listen(address)
    except (ConfigError, ApiSettingsError, ValueError) as error:
        print(f"semo api: {error}", file=sys.stderr)
        return 2
    fmt = log_format or config.engine.log_format
    configure_logging(fmt, secrets=config_secrets(config))
    for warning in config.warnings:
        log.warning("%s", warning)
    return asyncio.run(_serve(config.store_config(), settings, host, port))


async def _serve(store_config: StoreConfig, settings: ApiSettings, host: str, port: int) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        server = await start_api(store_config, settings, host, port)
    except (StoreError, OSError) as error:
        log.error("the API cannot run: %s", error)
        return 1
    try:
        await stop.wait()
    finally:
        await server.stop()
    return 0
