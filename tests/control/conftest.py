"""Fixtures of the control tests: an in-process engine serving its control socket."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from semo.engine.engine import Engine
from tests.control.office import engine_in_process


@pytest.fixture
async def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Engine]:
    """The office of `tests.control.office.CONFIG` (two bash agents, prompt `$ `), started in
    this process with its control socket; stopped after the test."""
    async with engine_in_process(tmp_path, monkeypatch, PS1="$ ") as engine:
        yield engine
