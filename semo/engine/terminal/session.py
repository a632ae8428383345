"""A program in a PTY with a live screen: the unit that captures, agents and panes build on."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from semo.engine.terminal.keys import Sleep, parse_keys
from semo.engine.terminal.pty_process import ExitStatus, TerminalProcess
from semo.engine.terminal.screen import TerminalScreen
from semo.engine.terminal.scrollback import DEFAULT_SCROLLBACK_LINES
from semo.engine.terminal.stream import TerminalStream

if TYPE_CHECKING:  # imported when recording starts: it brings pydantic, which capture avoids
    from semo.engine.terminal.asciicast import AsciicastWriter

DEFAULT_TERM = "xterm-256color"
#: Loop time one turn of reading output should cost at most while another terminal of the loop
#: is typed into; see TerminalSession._fit_read_size.
SLICE_SECONDS = 0.002
#: Bytes one turn of reading may take (pty_process.MAX_SLICE_SECONDS also ends a turn). Turns
#: of 64 KiB were no faster than 16 KiB ones (the pieces a turn hands on are what count), and
#: the first key typed into another terminal waits behind a whole turn: 2.2 against 0.3 ms
#: median behind a plain-text flood (bench/latency.py's flood, first key after 1.2 s quiet).
MIN_READ_SIZE, MAX_READ_SIZE = 1024, 16384
OutputListener = Callable[[str], None]
ExitListener = Callable[[ExitStatus], None]


#: The engine's own configuration and credentials (store DSN, Supabase keys): never inherited
#: by an agent. What a child needs from semo (e.g. the hook socket) is added explicitly.
ENGINE_ONLY_PREFIXES = ("SEMO_", "SUPABASE_")


def child_environment(
    env: Mapping[str, str] | None, *, term: str, cols: int, rows: int
) -> dict[str, str]:
    """The environment a child gets: ours (or `env` as given), TERM set, no stale size variables.

    Inherited from the engine's environment, `SEMO_*` and `SUPABASE_*` are dropped so an agent
    never sees the store's credentials; an explicit `env` is taken as the caller wrote it.
    """
    if env is None:
        result = {k: v for k, v in os.environ.items() if not k.startswith(ENGINE_ONLY_PREFIXES)}
    else:
        result = dict(env)
    result["TERM"] = term
    for stale in ("COLUMNS", "LINES", "TMUX", "TMUX_PANE"):
        result.pop(stale, None)
    return result


class TerminalSession:
    """Spawns `argv` in a PTY and keeps its screen current; optionally records asciicast v2."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        cols: int = 80,
        rows: int = 24,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        term: str = DEFAULT_TERM,
        scrollback: int = DEFAULT_SCROLLBACK_LINES,
        record: str | os.PathLike[str] | None = None,
    ) -> None:
        self.argv = list(argv)
        self.cwd = cwd
        self.env = child_environment(env, term=term, cols=cols, rows=rows)
        self.screen = TerminalScreen(cols, rows, scrollback=scrollback, respond=self._respond)
        self.stream = TerminalStream(self.screen)
        self.process: TerminalProcess | None = None
        self.bytes_out = 0
        self.last_output_at = time.monotonic()
        self.last_input_at = self.last_output_at
        self._listeners: list[OutputListener] = []
        self._exit_listeners: list[ExitListener] = []
        self._resize_listeners: list[Callable[[], None]] = []
        self._turn_listeners: list[Callable[[], None]] = []
        self._changed = asyncio.Event()
        self._record_path = Path(record) if record is not None else None
        self.recorder: AsciicastWriter | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Spawn the child (raises TerminalSpawnError with the reason if it cannot start)."""
        if self._record_path is not None:
            from semo.engine.terminal.asciicast import AsciicastWriter

            self.recorder = AsciicastWriter(
                self._record_path,
                self.screen.columns,
                self.screen.lines,
                title=" ".join(self.argv),
                env=self.env,
            )
        self.process = TerminalProcess.spawn(
            self.argv,
            cwd=self.cwd,
            env=self.env,
            cols=self.screen.columns,
            rows=self.screen.lines,
            on_output=self._on_output,
            on_exit=self._on_exit,
            read_size=MAX_READ_SIZE,
            on_slice=self._on_turn,
        )

    @property
    def exit_status(self) -> ExitStatus | None:
        return self.process.exit_status if self.process else None

    async def wait(self) -> ExitStatus:
        assert self.process is not None, "start() first"
        return await self.process.wait()

    async def close(self, grace: float = 2.0) -> ExitStatus | None:
        """Terminate the child's process group (if running) and finish the recording."""
        status = None
        if self.process is not None:
            status = await self.process.terminate(grace)
        if self.recorder is not None:
            self.recorder.close()
        return status

    def start_recording(self, path: str | os.PathLike[str]) -> None:
        """Record from now on into `path` (asciicast v2; the current screen is not replayed)."""
        from semo.engine.terminal.asciicast import AsciicastWriter

        self.stop_recording()
        self.recorder = AsciicastWriter(
            path, self.screen.columns, self.screen.lines, title=" ".join(self.argv), env=self.env
        )

    def stop_recording(self) -> None:
        if self.recorder is not None:
            self.recorder.close()
            self.recorder = None

    # -- output -------------------------------------------------------------------------------

    def add_listener(self, listener: OutputListener) -> None:
        """Called with each decoded chunk after the screen has been updated. A turn of reading
        may hand its output on in several chunks (see TerminalProcess._read_slice)."""
        self._listeners.append(listener)

    def remove_listener(self, listener: OutputListener) -> None:
        """`listener` is called no more (nothing when it was not added)."""
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def set_visible(self, visible: bool) -> None:
        """Nothing: the screen is kept current whether a console shows it or not (a console's
        client pauses its frames instead, semo/engine/control/client.py)."""

    def want_history(self, lines: int) -> None:
        """Nothing: the whole scrollback is here (a console's client asks its engine for it,
        semo/engine/control/client.py)."""

    def add_turn_listener(self, listener: Callable[[], None]) -> None:
        """Called after each turn of reading output, once its chunks went to the listeners
        (output read while the child exits comes after the last turn: see add_exit_listener)."""
        self._turn_listeners.append(listener)

    def _on_turn(self, spent: float, taken: int) -> None:
        self._fit_read_size(spent, taken)
        for listener in self._turn_listeners:
            listener()

    def _on_output(self, text: str) -> None:
        self.stream.feed(text)
        self.bytes_out += len(text)
        self.last_output_at = time.monotonic()
        if self.recorder is not None:
            self.recorder.output(text)
        for listener in self._listeners:
            listener(text)
        self._changed.set()

    def _fit_read_size(self, spent: float, taken: int) -> None:
        """After each turn of reading (`taken` bytes in `spent` seconds, screen and listeners
        included): while another terminal of the loop is being typed into, keep a turn near
        `SLICE_SECONDS`: output that is costly to render (escape storms, wide text, endless
        wrapping lines) is read in smaller turns, so that terminal's echo and the other
        sessions' prompts wait behind one short turn. Otherwise nobody waits behind the turn:
        take `MAX_READ_SIZE` (a turn still ends after MAX_SLICE_SECONDS)."""
        process = self.process
        if process is None:
            return
        size = process.read_size
        if not process.others_typing():
            if size != MAX_READ_SIZE:
                process.read_size = MAX_READ_SIZE
        elif spent > SLICE_SECONDS and size > MIN_READ_SIZE:
            # straight to the size that fits (a 16 KiB escape storm may take 10 ms)
            fitted = int(min(size, taken) * SLICE_SECONDS / spent)
            process.read_size = max(MIN_READ_SIZE, min(size // 2, fitted))
        elif spent < SLICE_SECONDS / 4 and size < MAX_READ_SIZE:
            process.read_size = min(MAX_READ_SIZE, size * 2)

    def add_exit_listener(self, listener: ExitListener) -> None:
        """Called once with the exit status when the child has exited and its output is read."""
        self._exit_listeners.append(listener)

    def _on_exit(self, status: ExitStatus) -> None:
        self._changed.set()
        for listener in self._exit_listeners:
            listener(status)

    def _respond(self, answer: str) -> None:
        """Answer a terminal query (DA, DSR, CSI 18t...) the program printed.

        Only a program in raw mode can read the answer: in canonical mode it would sit in the
        line buffer, echoed at the prompt and glued to the next prompt typed, i.e. it would become
        user input. Programs that query (Claude Code, vim, readline) switch to raw mode first;
        a query printed in cooked mode (`printf '\\e[18t'`) is left unanswered."""
        process = self.process
        if process is not None and process.running and not process.canonical_input():
            process.write(answer)

    async def wait_output(self, timeout: float) -> bool:
        """Wait until the child has written anything or exited; False after `timeout`."""
        deadline = time.monotonic() + timeout
        while self.bytes_out == 0 and self.exit_status is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            await self._next_change(left)
        return True

    async def wait_quiet(self, settle: float, timeout: float) -> bool:
        """Wait until `settle` seconds pass with no output and no input, or the child exits.

        Returns False on timeout. Input counts so that a wait right after typing covers the echo.
        """
        deadline = time.monotonic() + timeout
        while True:
            now = time.monotonic()
            if self.exit_status is not None:
                return True
            quiet_for = now - max(self.last_output_at, self.last_input_at)
            if quiet_for >= settle:
                return True
            if now >= deadline:
                return False
            await self._next_change(min(settle - quiet_for, deadline - now))

    async def _next_change(self, seconds: float) -> None:
        """Wait up to `seconds` for output, input or the exit."""
        self._changed.clear()
        with contextlib.suppress(TimeoutError):  # asyncio.timeout: keeps a cancellation
            async with asyncio.timeout(seconds):
                await self._changed.wait()

    # -- input --------------------------------------------------------------------------------

    def write(self, text: str) -> None:
        """Send raw text to the child (recorded as asciicast input)."""
        assert self.process is not None, "start() first"
        if self.recorder is not None:
            self.recorder.input(text)
        self.last_input_at = time.monotonic()
        self.process.write(text)

    async def send_keys(self, spec: str) -> None:
        """Type a key spec (semo.engine.terminal.keys), honouring the child's cursor-key mode."""
        actions = parse_keys(spec, application_cursor=self.screen.modes.application_cursor_keys)
        for action in actions:
            if isinstance(action, Sleep):
                await asyncio.sleep(action.milliseconds / 1000)
            else:
                self.write(action)

    def add_resize_listener(self, listener: Callable[[], None]) -> None:
        """Called just before the screen changes size (rows may be cut: read them first)."""
        self._resize_listeners.append(listener)

    def resize(self, cols: int, rows: int) -> None:
        """New size for the screen and the PTY (the child gets SIGWINCH)."""
        for listener in self._resize_listeners:
            listener()
        self.screen.resize(rows, cols)
        if self.process is not None and self.process.running:
            self.process.resize(cols, rows)
        if self.recorder is not None:
            self.recorder.resize(cols, rows)
