"""An `Engine` serving its control socket in the test's own process (the control and console
tests that talk to it through `EngineClient`)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from semo.engine.config import SemoConfig
from semo.engine.engine import Engine
from tests.support.temp_dirs import short_temp_dir


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
