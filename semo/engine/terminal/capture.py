"""`semo capture`: run a program in a PTY, type keys, wait for the screen to settle, report it.

Plain dataclasses, not pydantic models: `semo capture` is a command people run in loops and
scripts, and pydantic alone took about half of its start-up (bench/latency.py --cli).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import InitVar, asdict, dataclass
from typing import Any

from semo.engine.terminal.screen import TerminalScreen
from semo.engine.terminal.session import DEFAULT_TERM, TerminalSession


@dataclass(frozen=True)
class StyleSpan:
    start: int
    end: int
    fg: str
    bg: str
    bold: bool = False
    dim: bool = False
    italics: bool = False
    underscore: bool = False
    strikethrough: bool = False
    reverse: bool = False
    blink: bool = False
    #: accepted and dropped, so a cell's fields can be passed whole (`**cell._asdict()`)
    data: InitVar[str] = ""

    def __post_init__(self, data: str) -> None:
        pass


@dataclass(frozen=True)
class CursorState:
    x: int
    y: int
    visible: bool


@dataclass(frozen=True)
class ExitInfo:
    code: int | None
    signal: int | None


@dataclass(frozen=True)
class CaptureResult:
    cols: int
    rows: int
    lines: list[str]
    cursor: CursorState
    title: str
    alternate_screen: bool
    modes: list[int]
    styles: list[list[StyleSpan]]
    settled: bool
    exit: ExitInfo | None

    def model_dump(self, mode: str = "json") -> dict[str, Any]:
        """The result as plain JSON-ready data (nested dicts and lists), in field order."""
        return asdict(self)


def _styles(screen: TerminalScreen) -> list[list[StyleSpan]]:
    result = []
    for y in range(screen.lines):
        line = screen.row_line(y)
        spans = [
            StyleSpan(start=run.start, end=run.end, **run.style._asdict()) for run in line.runs
        ]
        result.append(spans)
    return result


def snapshot(session: TerminalSession, settled: bool) -> CaptureResult:
    screen = session.screen
    status = session.exit_status
    return CaptureResult(
        cols=screen.columns,
        rows=screen.lines,
        lines=screen.text_rows(),
        cursor=CursorState(x=screen.cursor.x, y=screen.cursor.y, visible=not screen.cursor.hidden),
        title=screen.title,
        alternate_screen=screen.alternate,
        modes=sorted(screen.modes.private),
        styles=_styles(screen),
        settled=settled,
        exit=ExitInfo(code=status.code, signal=status.signal) if status else None,
    )


FIRST_OUTPUT_SECONDS = 2.0
"""How long `capture` waits for the program's first output before it starts counting quiet."""


async def capture(
    argv: Sequence[str],
    *,
    cols: int = 80,
    rows: int = 24,
    keys: Sequence[str] = (),
    settle_ms: int = 300,
    timeout: float = 10.0,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    term: str = DEFAULT_TERM,
    record: str | os.PathLike[str] | None = None,
) -> CaptureResult:
    """Start `argv`, wait for quiet, type each key spec (waiting for quiet after each)."""
    session = TerminalSession(
        argv, cols=cols, rows=rows, cwd=cwd, env=env, term=term, record=record
    )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    settle = settle_ms / 1000
    session.start()
    try:
        # a program still starting is not quiet: vim on a busy machine may take longer than
        # `settle` to write its first byte (a program that never writes costs this wait once)
        await session.wait_output(min(FIRST_OUTPUT_SECONDS, max(deadline - loop.time(), 0)))
        settled = await session.wait_quiet(settle, max(deadline - loop.time(), 0))
        for spec in keys:
            if session.exit_status is not None:
                break
            await session.send_keys(spec)
            settled = await session.wait_quiet(settle, max(deadline - loop.time(), 0))
        return snapshot(session, settled)
    finally:
        await session.close(grace=1.0)
