"""Fixtures of the terminal tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from semo.engine.terminal.pty_process import TerminalProcess
from tests.support.pty_children import TIMEOUT, Spawn


@pytest.fixture
async def spawn() -> AsyncIterator[Spawn]:
    """TerminalProcess.spawn that terminates whatever the test left running."""
    started: list[TerminalProcess] = []

    def _spawn(argv: list[str], **kwargs: Any) -> TerminalProcess:
        process = TerminalProcess.spawn(argv, **kwargs)
        started.append(process)
        return process

    yield _spawn
    for process in started:
        await asyncio.wait_for(process.terminate(grace=0.5), TIMEOUT)
