"""Shared pieces of the console tests that drive `SemoApp` over a real engine: the short
runtime folder, the wait for a condition while agents print, and fixed command-panel times."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from semo.console.widgets.commands_panel import CommandsPanel
from tests.support.temp_dirs import short_temp_dir
from tests.support.waiting import eventually

Waiter = Callable[[Callable[[], object], str], Awaitable[None]]

#: a console test at the three sizes every console feature is tried at (issue 25)
at_three_sizes = pytest.mark.parametrize(
    "size", [(80, 24), (120, 40), (200, 60)], ids=lambda s: f"{s[0]}x{s[1]}"
)


def runtime_dir_fixture(prefix: str) -> object:
    """A `runtime_dir` fixture: a short temporary folder named `prefix…` (a Unix socket path
    must stay short), removed after the test. Assign it to `runtime_dir` in the module."""

    @pytest.fixture
    def runtime_dir() -> Iterator[Path]:
        with short_temp_dir(prefix) as path:
            yield path

    return runtime_dir


def waiter(timeout: float) -> Waiter:
    """`wait_for(condition, what)`: polls `condition()` every 0.05 s until it is true;
    AssertionError naming `what` after `timeout` seconds."""

    async def wait_for(condition: Callable[[], object], what: str) -> None:
        # not pilot.pause: the app is never idle while agents print
        await eventually(condition, timeout, what=what, interval=0.05)

    return wait_for


@pytest.fixture(autouse=True)
def fixed_times(monkeypatch: pytest.MonkeyPatch) -> None:
    """Imported into a snapshot test module: the commands panel's times keep their seconds
    placeholder, the same picture every run."""
    monkeypatch.setattr(CommandsPanel, "TIME_FORMAT", "hh:mm:ss")
