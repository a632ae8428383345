"""The console on each implementation of the engine interface (engine/interface.py).

    @on_both_engines
    async def test_x(tmp_path, runtime_dir, engine_kind): ...
        engine = console_engine(tmp_path, runtime_dir, control=engine_kind == "client")
        async with console_on(engine_kind, engine) as app:
            async with app.run_test() as pilot: ...

"in_process": the app gets an `InProcessEngine` and starts and stops the engine itself.
"client": the engine is started here with its control socket (under XDG_RUNTIME_DIR, which
`engine_kind` points at the test's short `runtime_dir`), and the app attaches an
`EngineClient` to it, as `semo console` does; the engine stops after the test.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from semo.console.app import SemoApp
from semo.engine.control.client import EngineClient
from semo.engine.engine import Engine
from semo.engine.in_process import InProcessEngine

ENGINE_KINDS = ("in_process", "client")


def engine_kind_fixture() -> object:
    """An `engine_kind` fixture, each test once per kind. Assign it to `engine_kind` in the
    module (it needs the module's `runtime_dir` fixture)."""

    @pytest.fixture(params=ENGINE_KINDS)
    def engine_kind(
        request: pytest.FixtureRequest, runtime_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> str:
        kind: str = request.param
        if kind == "client":  # the control socket's folder: short, removed after the test
            monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime_dir))
        return kind

    return engine_kind


@contextlib.asynccontextmanager
async def console_on(kind: str, engine: Engine, **options: Any) -> AsyncIterator[SemoApp]:
    """A `SemoApp` (with `options`) on `engine` through the interface `kind` names."""
    if kind == "in_process":
        yield SemoApp(InProcessEngine(engine), **options)
        return
    await engine.start()
    try:
        assert engine.control is not None, "console_engine(..., control=True) for a client"
        yield SemoApp(EngineClient(engine.control.paths), **options)
    finally:
        await engine.stop("test over")
