"""Polling: the one way a test waits for something it has no event to await.

Use it for a row appearing in a store, a flag, a screen, a process ending:

    await eventually(lambda: session.state == "ready", 10, what="the agent ready")
    row = await eventually_value(lambda: store.get_result(command_id), "its result")
    text = wait_until(lambda: tmux_screen(), "the prompt", 45, until=lambda s: "$" in s)

`eventually` (async) and `wait_until` (blocking: threads, subprocesses, tmux) call `probe`
every `interval` seconds until `until(value)` holds (by default: the value is true) and return
that value; a probe may be a coroutine function (`eventually` awaits what it returns). After
`timeout` seconds they raise AssertionError naming `what`, with the last value when it says
more than True/False, or `detail()`.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


def _timed_out(
    what: str, timeout: float, value: object, detail: Callable[[], object] | None
) -> AssertionError:
    message = f"timed out after {timeout} s waiting for {what}"
    if detail is not None:
        message += f"; {detail()}"
    elif not isinstance(value, bool | None):
        message += f"; last: {value!r}" if not isinstance(value, str) else f"; last:\n{value}"
    return AssertionError(message)


async def eventually(
    probe: Callable[[], Any],
    timeout: float = 10.0,
    *,
    what: str = "the condition",
    until: Callable[[Any], object] = bool,
    interval: float = 0.01,
    detail: Callable[[], object] | None = None,
) -> Any:
    """The first value of `probe()` (awaited if it is awaitable) for which `until` holds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if inspect.isawaitable(value):
            value = await value
        if until(value):
            return value
        if time.monotonic() > deadline:
            raise _timed_out(what, timeout, value, detail)
        await asyncio.sleep(interval)


async def eventually_value(
    probe: Callable[[], Awaitable[T | None]], what: str, timeout: float = 20.0
) -> T:
    """The first value the coroutine function `probe` returns that is not None (e.g. a row
    appearing in a store)."""
    value: T = await eventually(
        probe, timeout, what=what, until=lambda found: found is not None, interval=0.05
    )
    return value


def wait_until(
    probe: Callable[[], T],
    what: str = "the condition",
    timeout: float = 10.0,
    *,
    until: Callable[[T], object] = bool,
    interval: float = 0.1,
    detail: Callable[[], object] | None = None,
) -> T:
    """`eventually` for code that may block: the first value of `probe()` for which `until`
    holds, polled with time.sleep."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if until(value):
            return value
        if time.monotonic() > deadline:
            raise _timed_out(what, timeout, value, detail)
        time.sleep(interval)
