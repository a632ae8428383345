"""A child process in a pseudo-terminal, driven by the asyncio loop without ever blocking it.

`TerminalProcess.spawn` forks the child with `ptyprocess` (the child becomes a session leader
whose controlling terminal is the PTY) and from then on owns the master fd and the child itself:
output is read with `loop.add_reader`, input is written through a non-blocking fd with a pending
buffer, and the child is reaped through a pidfd (or a WNOHANG poll where pidfds are missing).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import contextvars
import errno
import fcntl
import logging
import os
import shutil
import signal
import termios
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import ptyprocess

from semo.engine.runtime import EXITED, start_ticks, stat_fields

__all__ = [
    "ExitStatus",
    "TerminalClosedError",
    "TerminalProcess",
    "TerminalSpawnError",
]

logger = logging.getLogger("semo.terminal")

_POLL_INTERVAL = 0.05
#: seconds between looks for what a terminated child left running (a scan of /proc)
_BELONGINGS_POLL = 0.1
#: SIGKILL rounds at most (each one may orphan processes that the next one finds)
_KILL_ROUNDS = 5
#: the variable of the child's environment whose value is unique to it (the agent's hook
#: token): an adopted orphan that carries it was started by the child's descendants
OWNER_VARIABLE = "SEMO_HOOK_TOKEN"
#: ioctl: the number of a PTY master's slave (Linux; termios does not name it)
_TIOCGPTN = 0x80045430
# Bytes read when draining output left in the PTY after the child was reaped (more than a PTY
# buffers); a descendant that outlives the child and keeps writing must not keep us there.
_MAX_DRAIN_BYTES = 1 << 20
#: What one read of the PTY can return: the line discipline (N_TTY) hands out what its 4 KiB
#: buffer holds, and the kernel refills that buffer from the PTY's queue in a worker.
LDISC_BYTES = 4095
#: Bytes asked for per read (more than one read ever returns: no read is cut short by us).
_READ_REQUEST = 65536
#: Output read ahead is handed on (decoded, to `on_output`) once it reaches this much, or as
#: soon as the line discipline's buffer is empty: a read of an empty buffer waits for the
#: kernel's worker to refill it, so we feed the screen while the worker refills it instead.
PIECE_BYTES = 16384
#: A slice (one turn of the loop) stops after a piece once it has taken this long, whatever
#: `read_size` allows: the first key typed into another terminal waits behind at most this.
MAX_SLICE_SECONDS = 0.004
_FIONREAD_ZERO = bytes(4)


def _pieces_enabled() -> bool:
    """`SEMO_PTY_PIECES=0` (bench A/B only): each turn goes on in one piece, as before pieces."""
    return os.environ.get("SEMO_PTY_PIECES", "") != "0"


#: Loop (wall) time that taking in PTY output (read + screen + listeners) may use per
#: `IntakeBudget.window` while some terminal of the loop was typed into in the last
#: INPUT_PRIORITY_SECONDS: all terminals together, and one terminal alone when another one was
#: typed into (else the loop's share). A terminal over its share is not read until the next
#: window: the kernel's PTY buffer fills and the program blocks on its writes, as under tmux.
#: Keys, echo and the consoles' frames get the rest of the loop. With nobody typing there is no
#: budget: terminals are read in turn at full speed (a lone flood keeps tmux-like throughput;
#: half of it under a fixed cap). `SEMO_PTY_INTAKE_SHARE` (bench A/B only): 0 turns the budget
#: off, a number replaces SESSION_SHARE.
INTAKE_WINDOW = 0.05
INTAKE_SHARE = 0.5
SESSION_SHARE = 0.15
#: a terminal written to this recently (a key) is read even when the others used the loop's
#: share: its echo comes first (its own share still holds)
INPUT_PRIORITY_SECONDS = 1.0


class IntakeBudget:
    """The share of one loop's time that PTY output may take, split between its terminals."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        window: float = INTAKE_WINDOW,
        share: float = INTAKE_SHARE,
        session_share: float = SESSION_SHARE,
    ) -> None:
        self.loop = loop
        self.window = window
        self.share = share
        self.session_share = session_share
        knob = os.environ.get("SEMO_PTY_INTAKE_SHARE", "")  # benches: "0" off, or a share
        self.enabled = knob != "0"
        with contextlib.suppress(ValueError):
            self.session_share = float(knob) if self.enabled else session_share
        self.started = loop.time()
        self.number = 0  # windows so far
        self.spent = 0.0
        self.pauses = 0
        self._paused: list[TerminalProcess] = []
        self.typed: TerminalProcess | None = None  # the terminal written to last, and when
        self.typed_at = float("-inf")
        self.input_priority = INPUT_PRIORITY_SECONDS
        self._resume: asyncio.TimerHandle | None = None

    def _roll(self) -> None:
        now = self.loop.time()
        if now - self.started >= self.window:
            self.started, self.spent = now, 0.0
            self.number += 1

    def may_read(self, process: TerminalProcess) -> bool:
        if not self.enabled:
            return True
        self._roll()
        if process._window != self.number:
            process._window, process._spent = self.number, 0.0
        now = self.loop.time()
        if now - self.typed_at >= self.input_priority:
            return True  # nobody is typing: no echo to protect
        typing_elsewhere = self.typed is not process
        # nobody typing into another terminal: one terminal may take the loop's whole share
        cap = self.session_share if typing_elsewhere else self.share
        if process._spent >= cap * self.window:
            return False
        recently_typed = now - process.written_at < self.input_priority
        return recently_typed or self.spent < self.share * self.window

    def contended(self, process: TerminalProcess) -> bool:
        """Whether a terminal other than `process` was typed into in the last `input_priority`
        seconds: its echo and its frames wait behind each of `process`'s reads."""
        return (
            self.typed is not None
            and self.typed is not process
            and self.loop.time() - self.typed_at < self.input_priority
        )

    def charge(self, process: TerminalProcess, seconds: float) -> None:
        process._spent += seconds
        self.spent += seconds

    def pause(self, process: TerminalProcess) -> None:
        """Stop reading `process` until the next window."""
        self.pauses += 1
        self._paused.append(process)
        if self._resume is None:
            self._resume = self.loop.call_at(self.started + self.window, self._resume_all)

    def _resume_all(self) -> None:
        # a new window now (a timer may fire a clock tick early: no lazy roll would happen)
        self._resume = None
        self.started, self.spent = self.loop.time(), 0.0
        self.number += 1
        paused, self._paused = self._paused, []
        for process in paused:
            process._resume_reading()


_budgets: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, IntakeBudget] = (
    weakref.WeakKeyDictionary()
)


def intake_budget(loop: asyncio.AbstractEventLoop) -> IntakeBudget:
    """The budget every TerminalProcess of `loop` shares."""
    budget = _budgets.get(loop)
    if budget is None:
        budget = _budgets[loop] = IntakeBudget(loop)
    return budget


class TerminalSpawnError(Exception):
    """The child could not be started (command not found, bad cwd, exec failure)."""

    def __init__(self, argv: Sequence[str], reason: str) -> None:
        super().__init__(f"cannot spawn {list(argv)!r}: {reason}")
        self.argv = list(argv)
        self.reason = reason


class TerminalClosedError(RuntimeError):
    """The terminal's child has exited and its PTY is closed."""


@dataclass(frozen=True)
class ExitStatus:
    """How the child ended; exactly one of `code` and `signal` is set."""

    code: int | None
    signal: int | None

    def __post_init__(self) -> None:
        if (self.code is None) == (self.signal is None):
            raise ValueError("exactly one of code and signal must be set")

    @classmethod
    def from_wait_status(cls, status: int) -> ExitStatus:
        if os.WIFSIGNALED(status):
            return cls(code=None, signal=os.WTERMSIG(status))
        return cls(code=os.waitstatus_to_exitcode(status), signal=None)

    def describe(self) -> str:
        if self.signal is None:
            return f"exited with code {self.code}"
        try:
            name = signal.Signals(self.signal).name
        except ValueError:
            return f"killed by signal {self.signal}"
        return f"killed by signal {self.signal} ({name})"


class _PtyProcess(ptyprocess.PtyProcess):
    """A PtyProcess whose finaliser does nothing: TerminalProcess closes the fd and reaps.

    The stock finaliser calls `close()`, which sleeps and may `waitpid`, both on the loop.
    Every instance is also remembered in `_last_pty`, so that when `spawn` raises after the
    fork (exec or chdir failure) the half-made child can still be reaped and its fd closed.
    """

    def __init__(self, pid: int, fd: int) -> None:
        super().__init__(pid, fd)
        _last_pty.set(self)

    def __del__(self) -> None:
        pass


_last_pty: contextvars.ContextVar[_PtyProcess | None] = contextvars.ContextVar(
    "semo_last_pty", default=None
)


def _close_pty(pty: ptyprocess.PtyProcess) -> None:
    # The fd belongs to ptyprocess's FileIO; closing it there keeps that object from closing
    # the same (possibly reused) fd number again later.
    pty.fileobj.close()
    pty.closed = True


def _resolve_command(argv: Sequence[str], env: Mapping[str, str] | None) -> str:
    if not argv:
        raise TerminalSpawnError(argv, "empty argv")
    search_path = (env if env is not None else os.environ).get("PATH", os.defpath)
    resolved = shutil.which(argv[0], path=search_path)
    if resolved is None:
        raise TerminalSpawnError(argv, f"command not found or not executable: {argv[0]!r}")
    return resolved


def _spawn_pty(
    argv: Sequence[str],
    cwd: str | os.PathLike[str] | None,
    env: Mapping[str, str] | None,
    cols: int,
    rows: int,
) -> _PtyProcess:
    command = [_resolve_command(argv, env), *argv[1:]]

    # chdir runs in preexec_fn because ptyprocess reports preexec_fn failures to the parent,
    # whereas its own `cwd=` chdir raises inside the forked child. Signals the engine was
    # started ignoring (`semo engine &` ignores SIGINT) get their defaults back, or Ctrl+C
    # would not interrupt the child.
    def preexec() -> None:
        for signum in (signal.SIGINT, signal.SIGQUIT, signal.SIGPIPE):
            signal.signal(signum, signal.SIG_DFL)
        if cwd is not None:
            os.chdir(cwd)

    parent_pid = os.getpid()
    token = _last_pty.set(None)
    try:
        return _PtyProcess.spawn(
            command,
            env=None if env is None else dict(env),
            preexec_fn=preexec,
            dimensions=(rows, cols),
        )
    except Exception as exc:
        if os.getpid() != parent_pid:
            # ptyprocess raised in the forked child before exec: never run on as a copy of us.
            os._exit(127)
        _reap_failed_spawn(_last_pty.get())
        raise TerminalSpawnError(argv, f"{type(exc).__name__}: {exc}") from exc
    finally:
        _last_pty.reset(token)


def _reap_failed_spawn(pty: _PtyProcess | None) -> None:
    if pty is None:
        return
    _close_pty(pty)
    # The child reported its failure and is about to `_exit`: this wait is short.
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pty.pid, 0)


class TerminalProcess:
    """A child process attached to a PTY, read and written through the running asyncio loop."""

    def __init__(
        self,
        pty: _PtyProcess,
        loop: asyncio.AbstractEventLoop,
        *,
        cols: int,
        rows: int,
        on_output: Callable[[str], None],
        on_exit: Callable[[ExitStatus], None] | None,
        read_size: int,
        on_slice: Callable[[float, int], None] | None = None,
    ) -> None:
        self._pty = pty
        self._loop = loop
        self._fd: int = pty.fd
        self.pid: int = pty.pid
        self.cols = cols
        self.rows = rows
        self.exit_status: ExitStatus | None = None
        self._on_output = on_output
        self._on_exit = on_exit
        self._on_slice = on_slice
        self._read_size = read_size
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = bytearray()
        self._eof = False
        self._done: asyncio.Future[ExitStatus] = loop.create_future()
        self._pidfd: int | None = None
        self._poll_handle: asyncio.TimerHandle | None = None
        self._terminator: asyncio.Task[ExitStatus] | None = None
        self._intake = intake_budget(loop)
        self._window = -1  # the intake window `_spent` counts in
        self._spent = 0.0
        self._reading = False
        self._pieces = _pieces_enabled()
        self.written_at = float("-inf")  # loop time input was last written
        self.reads = 0  # slices of output taken in
        #: `OWNER_VARIABLE=value` of the child's environment: orphans of its descendants that
        #: the engine adopted (a child subreaper) carry it, and are ended with the child
        self.owner_mark: bytes | None = None
        #: when the child started (ticks since boot): its pid reused later is told apart
        self._started = start_ticks(self.pid, running=True)
        #: the PTY's slave (/dev/pts/N): an adopted orphan that still holds it open came from
        #: the child (`(setsid cmd &)` in its shell keeps the terminal as stdin/stdout)
        self.tty = _slave_name(self._fd)

    @classmethod
    def spawn(
        cls,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        cols: int = 80,
        rows: int = 24,
        on_output: Callable[[str], None],
        on_exit: Callable[[ExitStatus], None] | None = None,
        read_size: int = 16384,
        on_slice: Callable[[float, int], None] | None = None,
    ) -> TerminalProcess:
        """Start `argv` in a new PTY of `cols` x `rows`; must be called inside a running loop.

        `env`, when given, is the child's whole environment (and its PATH finds the command).
        `on_slice(seconds, bytes)` is called after each turn of reading with what it took.
        Raises `TerminalSpawnError` when the child cannot be started.
        """
        loop = asyncio.get_running_loop()
        _check_size(cols, rows)
        if read_size < 1:
            raise ValueError(f"read_size must be positive, got {read_size}")
        pty = _spawn_pty(argv, cwd, env, cols, rows)
        process = cls(
            pty,
            loop,
            cols=cols,
            rows=rows,
            on_output=on_output,
            on_exit=on_exit,
            read_size=read_size,
            on_slice=on_slice,
        )
        owner = (env or {}).get(OWNER_VARIABLE)
        if owner:
            process.owner_mark = f"{OWNER_VARIABLE}={owner}".encode()
        process._start()
        return process

    # -- public API ---------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once the child has been reaped and the PTY closed."""
        return self.exit_status is not None

    @property
    def running(self) -> bool:
        return not self.closed

    @property
    def write_buffer_size(self) -> int:
        """Bytes accepted by `write` that the child has not been handed yet."""
        return len(self._pending)

    @property
    def read_size(self) -> int:
        """Most bytes read from the PTY per turn of the event loop."""
        return self._read_size

    @read_size.setter
    def read_size(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"read_size must be positive, got {size}")
        self._read_size = size

    def others_typing(self) -> bool:
        """Whether another terminal of this loop was typed into in the last second (see
        `IntakeBudget.contended`): then this one's reads should stay short."""
        return self._intake.contended(self)

    def canonical_input(self) -> bool:
        """True while the PTY's line discipline is canonical (cooked): input is read a line at
        a time and echoed. False in raw mode, or when the PTY is gone."""
        try:
            return bool(termios.tcgetattr(self._fd)[3] & termios.ICANON)
        except (OSError, termios.error):
            return False

    def write(self, data: str | bytes) -> None:
        """Queue `data` (str is UTF-8 encoded) for the child; never blocks the loop."""
        self._ensure_open()
        payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        if not payload:
            return
        self.written_at = self._intake.typed_at = self._loop.time()
        self._intake.typed = self
        if self._pending:
            self._pending += payload
            return
        written = self._write_now(payload)
        if written < len(payload):
            self._pending += payload[written:]
            self._loop.add_writer(self._fd, self._flush_pending)

    def resize(self, cols: int, rows: int) -> None:
        """Set the PTY size; the kernel sends SIGWINCH to the child's foreground process group."""
        self._ensure_open()
        _check_size(cols, rows)
        self._pty.setwinsize(rows, cols)
        self.cols, self.rows = cols, rows

    async def wait(self) -> ExitStatus:
        """Wait until the child has exited and its output has been delivered."""
        return await asyncio.shield(self._done)

    async def terminate(self, grace: float = 2.0) -> ExitStatus:
        """Send SIGHUP and SIGTERM to the child's process group and to every other process
        that belongs to the child (`_belongings`: its terminal session, its descendants, the
        orphans of its descendants the engine adopted), SIGKILL to all of them that are left
        after `grace` seconds.

        Idempotent: later calls wait for the first one. What outlives the child is killed too
        (ended when the child has exited already and only what it left runs).
        """
        if self._terminator is None:
            if self.exit_status is not None and not self._leftovers():
                return self.exit_status
            self._terminator = self._loop.create_task(self._terminate(grace))
        return await asyncio.shield(self._terminator)

    # -- setup -------------------------------------------------------------------------------

    def _start(self) -> None:
        os.set_inheritable(self._fd, False)
        flags = fcntl.fcntl(self._fd, fcntl.F_GETFL)
        fcntl.fcntl(self._fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)
        self._loop.add_reader(self._fd, self._on_readable)
        self._reading = True
        self._watch_exit()

    def _watch_exit(self) -> None:
        pidfd_open = getattr(os, "pidfd_open", None)
        if pidfd_open is not None:
            try:
                self._pidfd = pidfd_open(self.pid)
            except OSError as exc:
                logger.debug("pidfd_open unavailable (%s); polling waitpid instead", exc)
        if self._pidfd is not None:
            self._loop.add_reader(self._pidfd, self._on_child_exit)
        else:
            self._poll_handle = self._loop.call_later(_POLL_INTERVAL, self._poll_child)

    # -- output ------------------------------------------------------------------------------

    def _on_readable(self) -> None:
        """Read what is ready, up to `read_size` bytes, when the intake budget allows;
        otherwise stop reading until its next window."""
        if not self._intake.may_read(self):
            self._loop.remove_reader(self._fd)
            self._reading = False
            self._intake.pause(self)
            return
        started = time.perf_counter()
        self.reads += 1
        taken = self._read_slice(started)
        spent = time.perf_counter() - started
        self._intake.charge(self, spent)
        if self._on_slice is not None and taken:
            try:
                self._on_slice(spent, taken)
            except Exception:
                logger.exception("on_slice callback of pid %d raised", self.pid)

    def _resume_reading(self) -> None:
        if not self._reading and not self._eof and self.exit_status is None:
            self._loop.add_reader(self._fd, self._on_readable)
            self._reading = True

    def _read_slice(self, started: float) -> int:
        """One turn of reading: up to `read_size` bytes (a read returns at most what the line
        discipline's 4 KiB buffer holds), handed on in pieces. A piece goes out when the
        buffer is found empty (or at PIECE_BYTES): reading an empty buffer would wait for the
        kernel's worker to refill it, so the screen takes the piece while the worker refills
        the buffer, often on the other CPU. When the kernel keeps up (the buffer is full again
        right after a read) pieces grow, and the screen takes fewer, larger ones. The turn
        ends at `read_size`, when nothing is left, or after a piece past MAX_SLICE_SECONDS.
        While another terminal is typed into, `read_size` keeps the turn short already
        (TerminalSession fits it to its SLICE_SECONDS): it goes on in one piece.
        Returns the bytes read."""
        fd, limit = self._fd, self._read_size
        pieces = self._pieces and not self._intake.contended(self)
        chunks: list[bytes] = []
        held = total = 0
        eof = False
        clock = time.perf_counter
        while True:
            chunk = self._read_once(min(_READ_REQUEST, limit - total))
            if chunk is None:
                eof = True
                break
            if not chunk:
                break
            chunks.append(chunk)
            held += len(chunk)
            total += len(chunk)
            if limit - total < LDISC_BYTES:  # no room for another full read
                break
            if pieces and (held >= PIECE_BYTES or _ldisc_empty(fd)):
                self._deliver(self._decoder.decode(b"".join(chunks)))
                chunks.clear()
                held = 0
                if clock() - started >= MAX_SLICE_SECONDS:
                    break
        if chunks:
            self._deliver(self._decoder.decode(b"".join(chunks)))
        if eof:
            self._on_eof()
        return total

    def _read_once(self, limit: int | None = None) -> bytes | None:
        """One read of at most `limit` (default `read_size`) bytes; None on EOF/EIO, b"" if none."""
        try:
            data = os.read(self._fd, limit or self._read_size)
        except BlockingIOError:
            return b""
        except OSError as exc:
            if exc.errno != errno.EIO:
                logger.warning("reading the PTY of pid %d failed: %s", self.pid, exc)
            return None
        return data or None

    def _deliver(self, text: str) -> None:
        if not text:
            return
        try:
            self._on_output(text)
        except Exception:
            logger.exception("on_output callback of pid %d raised", self.pid)

    def _on_eof(self) -> None:
        if self._eof:
            return
        self._eof = True
        self._reading = False
        self._loop.remove_reader(self._fd)
        self._deliver(self._decoder.decode(b"", final=True))

    def _drain_output(self) -> None:
        drained = 0
        while drained < _MAX_DRAIN_BYTES:
            if self._eof:
                return
            chunk = self._read_once()
            if not chunk:
                break
            drained += len(chunk)
            self._deliver(self._decoder.decode(chunk))
        self._on_eof()

    # -- input -------------------------------------------------------------------------------

    def _ensure_open(self) -> None:
        if self.exit_status is not None:
            raise TerminalClosedError(
                f"terminal of pid {self.pid} is closed: {self.exit_status.describe()}"
            )

    def _write_now(self, payload: bytes | memoryview) -> int:
        try:
            return os.write(self._fd, payload)
        except BlockingIOError:
            return 0
        except OSError as exc:
            raise TerminalClosedError(f"terminal of pid {self.pid} no longer takes input") from exc

    def _flush_pending(self) -> None:
        try:
            written = self._write_now(memoryview(self._pending))
        except TerminalClosedError as exc:
            logger.warning(
                "dropping %d bytes of input for pid %d: %s", len(self._pending), self.pid, exc
            )
            written = len(self._pending)
        del self._pending[:written]
        if not self._pending:
            self._loop.remove_writer(self._fd)

    # -- exit --------------------------------------------------------------------------------

    def _poll_child(self) -> None:
        self._poll_handle = None
        if not self._try_reap():
            self._poll_handle = self._loop.call_later(_POLL_INTERVAL, self._poll_child)

    def _on_child_exit(self) -> None:
        self._try_reap()

    def _try_reap(self) -> bool:
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            logger.warning("pid %d was reaped by someone else; exit status unknown", self.pid)
            self._finish(ExitStatus(code=-1, signal=None))
            return True
        if pid == 0:
            return False
        self._finish(ExitStatus.from_wait_status(status))
        return True

    def _finish(self, status: ExitStatus) -> None:
        # Output the child wrote just before exiting may still sit in the PTY.
        self._drain_output()
        self._stop_watching_exit()
        if self._pending:
            self._loop.remove_writer(self._fd)
            self._pending.clear()
        _close_pty(self._pty)
        self.exit_status = status
        if self._on_exit is not None:
            try:
                self._on_exit(status)
            except Exception:
                logger.exception("on_exit callback of pid %d raised", self.pid)
        self._done.set_result(status)

    def _stop_watching_exit(self) -> None:
        if self._pidfd is not None:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        if self._poll_handle is not None:
            self._poll_handle.cancel()
            self._poll_handle = None

    async def _terminate(self, grace: float) -> ExitStatus:
        deadline = self._loop.time() + grace
        # every process found belonging to the child is remembered (with its start, so that a
        # reused pid is never signalled): one orphaned meanwhile is found no more by a scan
        known: dict[int, int] = {}
        others = self._remember(known)
        self._signal_group(signal.SIGHUP)
        self._signal_group(signal.SIGTERM)
        _signal_each(others, signal.SIGHUP, signal.SIGTERM, signal.SIGCONT)
        with contextlib.suppress(TimeoutError):  # asyncio.timeout keeps a cancellation
            async with asyncio.timeout(grace):
                await asyncio.shield(self._done)
        await self._wait_for_belongings(deadline, known)
        # SIGKILL to all that is left, again while killing leaves new orphans (a process
        # killed while its children live: they are adopted by the engine, still marked)
        for _round in range(_KILL_ROUNDS):
            others = self._remember(known)
            group = self._group_alive()
            if not others and not group:
                break
            if group:
                self._signal_group(signal.SIGKILL)
            _signal_each(others, signal.SIGKILL)
            await asyncio.sleep(_POLL_INTERVAL)
        return await asyncio.shield(self._done)

    async def _wait_for_belongings(self, deadline: float, known: dict[int, int]) -> None:
        # What outlives the child gives no notice when it exits: poll for it.
        while self._loop.time() < deadline:
            if not self._group_alive() and not self._remember(known):
                return
            await asyncio.sleep(_BELONGINGS_POLL)

    def _remember(self, known: dict[int, int]) -> set[int]:
        """The child's belongings now, added to `known` (pid: start), and those of `known`
        that still run (the same process: same start, not a zombie)."""
        for pid in self._belongings():
            started = start_ticks(pid, running=True)
            if started is not None:
                known.setdefault(pid, started)
        live = {pid for pid, started in known.items() if start_ticks(pid, running=True) == started}
        for pid in set(known) - live:
            del known[pid]
        return live

    def _leftovers(self) -> bool:
        """Whether something of the exited child still runs (its group, its belongings)."""
        return self._group_alive() or bool(self._belongings())

    def _belongings(self) -> set[int]:
        """Live processes other than the child that belong to it: members of its terminal
        session (it is the session leader: their session id is its pid), whatever their
        process group (a job of its shell has its own); the engine's children that carry the
        child's `owner_mark` in their environment or hold its terminal open (orphans of its
        descendants, reparented to the engine as their child subreaper:
        semo/engine/control/reaper.py); and the descendants
        of all of these and of the child (a setsid'd one whose parent still lives)."""
        reused = self.exit_status is not None and start_ticks(self.pid, running=True) not in (
            None,
            self._started,
        )
        # a pid in use again after the child was reaped: nothing is in its session any more
        # (a pid is not reused while a process has it as session id), only marked orphans
        # the slave's number is only certainly ours while our master is open
        tty = self.tty if self.exit_status is None else None
        return _belongings(self.pid, self.owner_mark, session=not reused, tty=tty)

    def _signal_group(self, sig: signal.Signals) -> None:
        # The child is a session leader, so its process group id is its pid.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, sig)

    def _group_alive(self) -> bool:
        try:
            os.killpg(self.pid, 0)
        except ProcessLookupError:
            return False
        return _group_has_live_member(self.pid)

    def __repr__(self) -> str:
        state = self.exit_status.describe() if self.exit_status else "running"
        argv: Any = getattr(self._pty, "argv", "?")
        return f"<TerminalProcess pid={self.pid} {argv!r} {self.cols}x{self.rows} {state}>"


def _ldisc_empty(fd: int) -> bool:
    """Whether the PTY's line discipline holds no output right now (FIONREAD: no waiting for
    the kernel's worker, unlike a read or a poll of an empty buffer)."""
    try:
        return fcntl.ioctl(fd, termios.FIONREAD, _FIONREAD_ZERO) == _FIONREAD_ZERO
    except OSError:
        return True


def _check_size(cols: int, rows: int) -> None:
    if cols < 1 or rows < 1:
        raise ValueError(f"terminal size must be positive, got {cols}x{rows}")


def _group_has_live_member(pgid: int) -> bool:
    """Whether a non-zombie process is in group `pgid` (True when /proc cannot tell).

    Killed descendants are reparented to init and stay zombies until it reaps them; they
    still count for `killpg(pgid, 0)` but need no more signals.
    """
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    return any(entry.isdigit() and _is_live_member(entry, pgid) for entry in entries)


def _is_live_member(pid: str, pgid: int) -> bool:
    fields = stat_fields(pid)  # state, ppid, pgrp, ...
    if fields is None or len(fields) < 3:
        return False
    return int(fields[2]) == pgid and fields[0] not in EXITED


def _signal_each(pids: set[int], *signals: signal.Signals) -> None:
    for pid in pids:
        for sig in signals:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)


def _belongings(
    leader: int, owner_mark: bytes | None, *, session: bool = True, tty: str | None = None
) -> set[int]:
    """See TerminalProcess._belongings: live pids (the leader left out) by one scan of /proc;
    with `session` False only the adopted orphans (marked, or holding `tty`) and their
    descendants."""
    try:
        entries = [int(e) for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return set()
    me = os.getpid()
    parents: dict[int, int] = {}
    found: set[int] = set()
    for pid in entries:
        fields = stat_fields(pid)
        if fields is None:
            continue
        try:
            state, ppid, sid = fields[0], int(fields[1]), int(fields[3])
        except (ValueError, IndexError):
            continue
        if state in EXITED or pid == leader:
            continue
        parents[pid] = ppid
        adopted = ppid == me and (
            bool(owner_mark and _carries(pid, owner_mark)) or bool(tty and _holds(pid, tty))
        )
        if (session and sid == leader) or adopted:
            found.add(pid)
    # and the descendants of the leader and of what was found
    roots = found | {leader} if session else set(found)
    grown = True
    while grown:
        grown = False
        for pid, ppid in parents.items():
            if ppid in roots and pid not in roots and pid != me:
                roots.add(pid)
                found.add(pid)
                grown = True
    return found


def _slave_name(master: int) -> str | None:
    """/dev/pts/N of the PTY whose master is `master` (Linux TIOCGPTN), None if unknown."""
    try:
        number = fcntl.ioctl(master, _TIOCGPTN, bytes(4))
    except OSError:
        return None
    return f"/dev/pts/{int.from_bytes(number, 'little')}"


def _holds(pid: int, tty: str) -> bool:
    """Whether process `pid` has `tty` open."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{fd}") == tty:
                return True
    return False


def _carries(pid: int, owner_mark: bytes) -> bool:
    """Whether process `pid` has `owner_mark` (NAME=value) in its environment."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            return owner_mark in environ.read().split(b"\0")
    except OSError:
        return False
