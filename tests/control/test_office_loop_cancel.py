"""Stopping the control server while the office changes: the office loop's cancellation is
never lost (on Python 3.11, `asyncio.wait_for` returned the wait's result when a cancellation
met the change, the loop ran on and `ControlServer.stop`, i.e. the engine's SIGTERM, hung)."""

from __future__ import annotations

import asyncio

import pytest

from semo.engine.engine import Engine

pytestmark = pytest.mark.timeout(120)


async def test_a_cancel_that_meets_an_office_change_ends_the_office_loop(engine: Engine) -> None:
    server = engine.control
    assert server is not None
    # Every interleaving of "the office changed" and "cancel" a few loop turns apart, so that
    # the cancellation lands before, at and after the moment the wait completes.
    for turns in range(8):
        task = asyncio.create_task(server._office_loop())
        for _ in range(3):
            await asyncio.sleep(0)  # the loop is waiting on the change event now
        server._office_changed.set()
        for _ in range(turns):
            await asyncio.sleep(0)
        task.cancel()
        # a hang guard, not a timing check: a lost cancellation leaves the task running forever
        await asyncio.wait({task}, timeout=10)
        assert task.cancelled(), f"cancellation lost {turns} loop turns after the change"
