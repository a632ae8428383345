"""Helpers for tests of `TerminalProcess` with real child processes in real PTYs."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable

from semo.engine.terminal.pty_process import ExitStatus, TerminalProcess

#: seconds a PTY test waits for output, an exit or a termination
TIMEOUT = 5.0

#: `TerminalProcess.spawn`, as the `spawn` fixture gives it (tests/terminal/conftest.py)
Spawn = Callable[..., TerminalProcess]


class Output:
    """Collects on_output chunks and lets a test wait for some text to appear."""

    def __init__(self) -> None:
        self.chunks: list[str] = []
        self._changed = asyncio.Event()

    def __call__(self, text: str) -> None:
        self.chunks.append(text)
        self._changed.set()

    @property
    def text(self) -> str:
        return "".join(self.chunks)

    async def wait_for(self, needle: str) -> str:
        async with asyncio.timeout(TIMEOUT):
            while needle not in self.text:
                self._changed.clear()
                await self._changed.wait()
        return self.text


def python(code: str) -> list[str]:
    """The command line that runs `code` in this interpreter."""
    return [sys.executable, "-c", code]


async def finish(process: TerminalProcess) -> ExitStatus:
    """The child's exit status, waited for up to TIMEOUT."""
    return await asyncio.wait_for(process.wait(), TIMEOUT)
