"""Polling helpers for tests that wait on something with no event to await (a row, a flag)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def eventually(condition: Callable[[], object], timeout: float = 10.0) -> None:
    """Until `condition()` is true; AssertionError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


async def eventually_value(
    probe: Callable[[], Awaitable[T | None]], what: str, timeout: float = 20.0
) -> T:
    """The first value `probe()` returns that is not None (e.g. a row appearing in a store)."""
    deadline = time.monotonic() + timeout
    while (value := await probe()) is None:
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.05)
    return value
