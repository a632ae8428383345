"""An `Engine` serving its control socket in the test's own process, and clients of it.

The control and console tests talk to it through `EngineClient`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from semo.engine.config import SemoConfig
from semo.engine.control.client import EngineClient, RemoteTerminal
from semo.engine.engine import Engine
from semo.engine.terminal.screen import TerminalScreen
from tests.support.temp_dirs import short_temp_dir
from tests.support.waiting import eventually


@contextlib.asynccontextmanager
async def serving_engine(
    config: SemoConfig,
    folder: Path,
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    prefix: str,
) -> AsyncIterator[Engine]:
    """An `Engine` of `config` with its control socket, started and stopped after:
    XDG_RUNTIME_DIR a short temporary folder named `prefix…` (removed after: a Unix socket
    path must stay short), the agents in `folder/work` with the environment `env`."""
    with short_temp_dir(prefix) as runtime:
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
        work = folder / "work"
        work.mkdir()
        engine = Engine(config, control=True, agent_env=env, folder_for=lambda _a, _t: work)
        await engine.start()
        try:
            yield engine
        finally:
            await engine.stop("test over")


def client_of(engine: Engine) -> EngineClient:
    """A new (not yet started) console client of `engine`'s control socket."""
    assert engine.control is not None
    return EngineClient(engine.control.paths)


async def attached(client: EngineClient, role: str) -> RemoteTerminal:
    """`client` started, and the terminal of its `role` session attached with a full screen."""
    await client.start()
    session = next(s for s in client.sessions() if s.role == role)
    terminal = session.terminal
    terminal.add_listener(lambda _chunk: None)
    await eventually(lambda: terminal.screen.complete, 10)
    return terminal


def engine_screen(engine: Engine, role: str) -> TerminalScreen:
    """The engine's own screen of its `role` session."""
    return next(s for s in engine.sessions() if s.role == role).terminal.screen
