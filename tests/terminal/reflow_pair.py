"""The same output in a tmux 3.3a pane and in a semo screen, resized alike, compared.

tmux's pane runs a small relay that copies a FIFO to the pane's terminal (raw mode: bytes go
through unchanged), so the test decides exactly which bytes both terminals see and when. After
each step a title (OSC 2) goes through the relay and the test waits until tmux shows it: every
byte before it has been processed. semo gets the same bytes (without the titles) in process.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from dataclasses import dataclass

from semo.engine.terminal.screen import TerminalScreen
from semo.engine.terminal.stream import TerminalStream
from tests.support.tmux import TmuxServer

_RELAY = """
import os, sys, tty
tty.setraw(0)
fd = os.open(sys.argv[1], os.O_RDWR)
while True:
    data = memoryview(os.read(fd, 65536))
    while data:
        data = data[os.write(1, data):]
"""
_TARGET = "rf"


@dataclass
class PaneState:
    """History then screen rows (trailing blanks trimmed), the cursor, the history's size."""

    rows: list[str]
    cursor: tuple[int, int]
    history: int

    def text(self) -> str:
        body = "\n".join(f"{n:4} |{row}" for n, row in enumerate(self.rows))
        return f"{body}\ncursor {self.cursor} history {self.history}"


class TmuxPane:
    def __init__(self, cols: int, rows: int, history: int) -> None:
        self.server = TmuxServer()
        self.folder = tempfile.TemporaryDirectory(prefix="semo-reflow-")
        self.fifo = os.path.join(self.folder.name, "relay")
        os.mkfifo(self.fifo)
        self.syncs = 0
        relay = f"{sys.executable} -c '{_RELAY}' {self.fifo}"
        # window-size manual only once the pane exists (set before, tmux 3.3a's new-session -x
        # crashes the server); history-limit before it (a pane takes it when created)
        self.server(
            "new-session", "-d", "-s", "idle", "sleep 1000", ";",
            "set", "-g", "status", "off", ";",
            "set", "-g", "history-limit", str(history), ";",
            "new-session", "-d", "-s", _TARGET, "-x", str(cols), "-y", str(rows), relay, ";",
            "set", "-g", "window-size", "manual",
        )  # fmt: skip
        self._writer = os.open(self.fifo, os.O_WRONLY)
        self.sync()

    def close(self) -> None:
        os.close(self._writer)
        self.server.kill()
        self.folder.cleanup()

    def feed(self, data: str) -> None:
        raw = data.encode()
        while raw:
            raw = raw[os.write(self._writer, raw) :]
        self.sync()

    def sync(self, timeout: float = 20.0) -> None:
        """Wait until tmux has processed everything written so far."""
        self.syncs += 1
        title = f"semo-sync-{self.syncs}"
        os.write(self._writer, f"\x1b]2;{title}\x07".encode())
        deadline = time.monotonic() + timeout
        while self.server("display", "-p", "-t", _TARGET, "#{pane_title}").strip() != title:
            if time.monotonic() > deadline:
                raise TimeoutError(f"tmux did not show {title}")
            time.sleep(0.01)

    def resize(self, cols: int, rows: int) -> None:
        self.server("resize-window", "-t", _TARGET, "-x", str(cols), "-y", str(rows))
        self.sync()

    def state(self) -> PaneState:
        marker = "@@semo-reflow@@"
        out = self.server(
            "capture-pane", "-p", "-S", "-", "-t", _TARGET, ";",
            "display", "-p", "-t", _TARGET,
            f"{marker}#{{cursor_x}},#{{cursor_y}},#{{history_size}}",
        )  # fmt: skip
        body, _, tail = out.rpartition(marker)
        x, y, history = (int(v) for v in tail.strip().split(","))
        return PaneState(body.split("\n")[:-1], (x, y), history)

    def styled_rows(self) -> list[str]:
        """History and screen as `capture-pane -e` prints them (SGR before each change)."""
        out = self.server("capture-pane", "-p", "-e", "-S", "-", "-t", _TARGET)
        return out.split("\n")[:-1]


class SemoPane:
    def __init__(self, cols: int, rows: int, history: int) -> None:
        self.screen = TerminalScreen(cols, rows, scrollback=history)
        self.stream = TerminalStream(self.screen)

    def feed(self, data: str) -> None:
        self.stream.feed(data)

    def resize(self, cols: int, rows: int) -> None:
        self.screen.resize(rows, cols)

    def state(self) -> PaneState:
        screen = self.screen
        history = [line.text.rstrip(" ") for line in screen.scrollback]
        return PaneState(
            history + screen.text_rows(), (screen.cursor.x, screen.cursor.y), len(history)
        )


class ReflowPair:
    """tmux and semo side by side: feed, resize, compare."""

    def __init__(self, cols: int, rows: int, history: int = 2000) -> None:
        self.tmux = TmuxPane(cols, rows, history)
        self.semo = SemoPane(cols, rows, history)
        self.steps: list[str] = [f"start {cols}x{rows}"]

    def close(self) -> None:
        self.tmux.close()

    def feed(self, data: str) -> None:
        self.steps.append(f"feed {data[:60]!r}{'...' if len(data) > 60 else ''}")
        self.tmux.feed(data)
        self.semo.feed(data)

    def resize(self, cols: int, rows: int) -> None:
        self.steps.append(f"resize {cols}x{rows}")
        self.tmux.resize(cols, rows)
        self.semo.resize(cols, rows)

    def difference(
        self, *, tail: int | None = None, history: bool = True, cursor_x: bool = True
    ) -> str | None:
        """None when both show the same history, screen and cursor; else a report.

        `tail`: compare only the newest history lines, at most `tail` and no more than both
        have (tmux lets a reflow take the history past its limit until the next lines scroll
        in, semo keeps the bound). `history=False`: the screen only. `cursor_x=False`: not the
        cursor's column (tmux leaves it past a narrower alternate screen's margin, semo puts
        it on the margin)."""
        theirs, ours = self.tmux.state(), self.semo.state()
        keep = None if tail is None else min(tail, theirs.history, ours.history)
        if keep is not None and keep == ours.history < theirs.history:
            # semo's oldest line may have lost its start to the bound: not compared
            scrollback = self.semo.screen.scrollback
            first = next((n for n, line in enumerate(scrollback) if not line.wrapped), keep)
            keep = max(0, keep - first - 1)
        if not history:
            keep = 0
        if keep is not None:
            for state in (theirs, ours):
                cut = state.history - keep
                del state.rows[:cut]
                state.history -= cut
        if not cursor_x:
            theirs.cursor = (0, theirs.cursor[1])
            ours.cursor = (0, ours.cursor[1])
        if theirs == ours:
            return None
        return (
            "steps: " + "; ".join(self.steps) + "\n--- tmux\n" + theirs.text()
            + "\n--- semo\n" + ours.text()
        )  # fmt: skip
