"""The PTY intake budget with real programs in real PTYs (engine/terminal/pty_process.py).

A terminal that floods is read at most its share of each window and then not at all until the
next one (the kernel's PTY buffer stops the program meanwhile); a terminal that was just typed
into is read even when the flooders used the loop's whole share, so its echo comes first. The
budget here is made so small that one slice uses it up: each terminal gets exactly one read per
window, which makes the counts exact (no timing involved).
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from semo.engine.terminal.pty_process import intake_budget
from tests.support.pty_children import Output, Spawn, python
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(60)

FLOOD = python("import sys\nwhile True: sys.stdout.write('x' * 200 + '\\n')")


async def test_a_flooder_gets_one_slice_per_window_and_a_typed_session_is_served(
    spawn: Spawn,
) -> None:
    budget = intake_budget(asyncio.get_running_loop())
    budget.session_share = budget.share = 1e-9  # one slice spends a terminal's and the loop's
    budget.input_priority = 1000.0  # the operator's key below counts for the whole test
    windows: Counter[int] = Counter()  # flooder slices per window
    flooder_reads_at_echo: list[int] = []

    def on_flood(_text: str) -> None:
        windows[budget.number] += 1

    quiet = Output()
    typed = spawn(["cat"], on_output=quiet)
    typed.write("first\r")  # the operator types: from now on the budget holds
    await quiet.wait_for("first")
    flooder = spawn(FLOOD, on_output=on_flood)
    await eventually(lambda: flooder.reads >= 5, 10)  # the flood is on, paused and resumed
    assert budget.pauses > 0

    typed.write("hello\r")
    await quiet.wait_for("hello")
    flooder_reads_at_echo.append(flooder.reads)
    await eventually(lambda: flooder.reads >= flooder_reads_at_echo[0] + 3, 10)  # goes on

    assert max(windows.values()) == 1, "a flooder was read more than once in one window"
    assert flooder.running and windows.total() >= 8


async def test_a_terminal_not_typed_into_is_still_read_between_a_flooders_slices(
    spawn: Spawn,
) -> None:
    """Output of a terminal nobody typed into waits for the next window at most, never longer:
    it is read between the flooder's slices."""
    budget = intake_budget(asyncio.get_running_loop())
    budget.session_share = budget.share = 1e-9
    flooder = spawn(FLOOD, on_output=lambda _text: None)
    await eventually(lambda: flooder.reads >= 3, 10)
    other = Output()
    spawn(python("print('from the other one')"), on_output=other)
    await other.wait_for("from the other one")
    assert flooder.running


async def test_a_flooder_is_held_to_its_share_only_while_another_terminal_is_typed_into(
    spawn: Spawn,
) -> None:
    """Nobody typing: no budget at all, a flood is read at full speed (here: many slices in one
    window although the shares are tiny). A key into another terminal: the flooder is held to
    its own, tiny, share at once and is not read again in this window."""
    budget = intake_budget(asyncio.get_running_loop())
    budget.window, budget.share, budget.session_share = 1000.0, 1e-12, 1e-12
    budget.input_priority = 1000.0
    flooder = spawn(FLOOD, on_output=lambda _text: None)
    await eventually(lambda: flooder.reads >= 20, 10)  # many slices in one window
    assert budget.pauses == 0 and budget.number == 0

    quiet = Output()
    typed = spawn(["cat"], on_output=quiet)
    typed.write("hi\r")
    await quiet.wait_for("hi")
    await eventually(lambda: budget.pauses >= 1, 10)
    reads = flooder.reads
    for _ in range(50):
        await asyncio.sleep(0.001)
    assert flooder.reads == reads and flooder.running  # paused until the window ends
