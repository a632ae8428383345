"""How much a TerminalSession reads at once (engine/terminal/session.py, `_fit_read_size`).

Costly output is read in short slices only while another terminal of the loop is being typed
into (its echo waits behind each read); with nobody typing, reads stay at MAX_READ_SIZE, where
the screen costs least per byte. A slow output listener makes every read "costly" here.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from semo.engine.terminal.pty_process import intake_budget
from semo.engine.terminal.session import MAX_READ_SIZE, SLICE_SECONDS, TerminalSession
from tests.support.pty_children import python
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(60)

FLOOD = python("import sys\nwhile True: sys.stdout.write('x' * 200 + '\\n')")


def costly(_text: str) -> None:
    time.sleep(SLICE_SECONDS * 2)  # every read's handling takes longer than a slice


async def test_costly_output_is_read_whole_until_another_terminal_is_typed_into() -> None:
    budget = intake_budget(asyncio.get_running_loop())
    budget.enabled = False  # the share budget is not what this test is about
    budget.input_priority = 0.5
    flooder = TerminalSession(FLOOD)
    flooder.add_listener(costly)
    typed = TerminalSession(["cat"])
    try:
        flooder.start()
        typed.start()
        assert flooder.process is not None
        await eventually(lambda: flooder.process.reads >= 10, 10)
        assert flooder.process.read_size == MAX_READ_SIZE  # nobody waits behind its reads

        typed.write("hi\r")
        await eventually(lambda: flooder.process.read_size < MAX_READ_SIZE, 10)
        await eventually(lambda: "hi" in typed.screen.text_rows()[0], 10)

        # no key for input_priority seconds: back to whole reads
        await eventually(lambda: flooder.process.read_size == MAX_READ_SIZE, 10)
    finally:
        await flooder.close()
        await typed.close()


async def test_typing_into_the_flooding_terminal_itself_keeps_its_reads_whole() -> None:
    """Its own echo comes after the output before it whatever the read size."""
    budget = intake_budget(asyncio.get_running_loop())
    budget.enabled = False
    budget.input_priority = 1000.0
    flooder = TerminalSession(FLOOD)
    flooder.add_listener(costly)
    try:
        flooder.start()
        assert flooder.process is not None
        flooder.write("x")
        reads = flooder.process.reads
        await eventually(lambda: flooder.process.reads >= reads + 10, 10)
        assert flooder.process.read_size == MAX_READ_SIZE
    finally:
        await flooder.close()
