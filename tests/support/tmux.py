"""tmux as the reference terminal: `tmux_capture` does what `semo capture` does, in tmux.

    lines = tmux_capture(["bash", "--norc"], cols=80, rows=24, keys=["ls<Enter>"], env=env)

Same semantics as `engine.terminal.capture.capture`: start the program at exactly cols x rows
with exactly `env` (TERM set to `term`) in `cwd`, wait until the screen has been stable for
`settle_ms` (or the program exited), then type each key spec and wait for stability again; the
result is the screen's rows, trailing spaces trimmed, exactly `rows` of them. A private server
(own socket, no config) is used per call and always killed.

Key specs use semo's notation (engine.terminal.keys); named keys are sent as tmux key names, so
tmux encodes them for the pane's current modes as a user's terminal would.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from semo.engine.terminal import keys as semo_keys
from semo.engine.terminal.capture import FIRST_OUTPUT_SECONDS
from semo.engine.terminal.session import DEFAULT_TERM, child_environment

__all__ = [
    "TmuxError",
    "TmuxKey",
    "TmuxServer",
    "tmux_capture",
    "tmux_capture_styled",
    "tmux_key_actions",
]

POLL_SECONDS = 0.05
_SESSION = "fid"

# semo key name (after alias resolution, without modifiers) -> tmux key name
_TMUX_NAMES = {
    "Enter": "Enter",
    "Esc": "Escape",
    "Tab": "Tab",
    "BS": "BSpace",
    "Space": "Space",
    "Up": "Up",
    "Down": "Down",
    "Left": "Left",
    "Right": "Right",
    "Home": "Home",
    "End": "End",
    "PgUp": "PPage",
    "PgDn": "NPage",
    "Ins": "IC",
    "Del": "DC",
    **{f"F{n}": f"F{n}" for n in range(1, 13)},
}


class TmuxError(RuntimeError):
    """A tmux command failed."""


@dataclass(frozen=True)
class TmuxKey:
    """One tmux key name for `send-keys` (without -l), e.g. `C-c`, `BTab`, `M-Up`."""

    name: str


TmuxAction = str | TmuxKey | semo_keys.Sleep


def tmux_key_actions(spec: str) -> list[TmuxAction]:
    """A semo key spec as literal text, tmux key names and sleeps, in order.

    Uses semo's own tokenizer and validation (an unknown name raises KeySpecError exactly as in
    `semo capture`); only the final encoding differs: names go to tmux instead of to bytes.
    """
    return semo_keys.map_key_spec(spec, _tmux_action)


def _tmux_action(name: str) -> TmuxAction:
    semo_action = semo_keys._named(name, False)  # validates the name; Sleep or text
    if isinstance(semo_action, semo_keys.Sleep):
        return semo_action
    name = semo_keys._ALIASES.get(name, name)
    modifiers, base = semo_keys._split_modifiers(name)
    if base in ("lt", "gt") and not modifiers:
        return semo_action  # a literal '<' or '>'
    if base == "Tab" and modifiers == {"S"}:
        return TmuxKey("BTab")
    if base in _TMUX_NAMES:
        base = _TMUX_NAMES[base]
    elif len(base) != 1:
        raise semo_keys.KeySpecError(f"no tmux name for <{name}>")
    prefix = "".join(f"{m}-" for m in "CMS" if m in modifiers)
    return TmuxKey(prefix + base)


def _literal_argument(text: str) -> str:
    """tmux reads an argument ending in ';' as a command separator unless it ends in '\\;'."""
    return text[:-1] + "\\;" if text.endswith(";") else text


class TmuxServer:
    """A private tmux server (`-L semo-fid-<uuid>`, no config) with one session."""

    def __init__(self) -> None:
        self.socket = f"semo-fid-{uuid.uuid4().hex}"
        tmpdir = os.environ.get("TMUX_TMPDIR") or "/tmp"
        self.socket_path = os.path.join(tmpdir, f"tmux-{os.getuid()}", self.socket)
        # The server's own locale decides how it measures characters: make it UTF-8.
        self._env = {**os.environ, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
        for name in ("TMUX", "TMUX_PANE"):
            self._env.pop(name, None)

    def __call__(self, *args: str, check: bool = True) -> str:
        proc = subprocess.run(
            ["tmux", "-u", "-L", self.socket, "-f", os.devnull, *args],
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            env=self._env,
            timeout=15,
        )
        if check and proc.returncode != 0:
            raise TmuxError(f"tmux {' '.join(args)!r} failed: {proc.stderr.strip()}")
        return proc.stdout

    def start(
        self,
        argv: Sequence[str],
        *,
        cols: int,
        rows: int,
        env: Mapping[str, str],
        cwd: str | os.PathLike[str] | None,
        term: str,
    ) -> None:
        # `env -i` gives the program exactly `env` (no TMUX, TMUX_PANE or server variables).
        command = ["env", "-i", *(f"{k}={v}" for k, v in env.items()), *argv]
        # One invocation: the options exist before the pane, so the program starts at exactly
        # cols x rows and no status line ever takes a row.
        out = self(
            "start-server", ";",
            "set", "-g", "status", "off", ";",
            "set", "-g", "default-terminal", term, ";",
            "set", "-g", "remain-on-exit", "on", ";",
            "set", "-g", "remain-on-exit-format", "", ";",  # no "Pane is dead" line
            "set", "-g", "escape-time", "0", ";",
            "set", "-g", "history-limit", "0", ";",
            "new-session", "-d", "-s", _SESSION, "-x", str(cols), "-y", str(rows),
            "-c", os.fspath(cwd or os.getcwd()), *command, ";",
            "display-message", "-p", "-t", _SESSION, "#{socket_path}",
        )  # fmt: skip
        self.socket_path = out.strip() or self.socket_path

    def kill(self) -> None:
        """Stop the server (and its programs) and remove its socket, which tmux leaves behind."""
        self("kill-server", check=False)
        with contextlib.suppress(OSError):
            os.unlink(self.socket_path)

    def state(self, *, escapes: bool = False) -> tuple[list[str], str, bool]:
        """(pane rows, cursor 'x,y', pane dead?) read in one tmux invocation."""
        capture = ["capture-pane", "-p", "-t", _SESSION]
        if escapes:
            capture.append("-e")
        marker = f"@@semo-fid-{uuid.uuid4().hex}@@"
        out = self(
            *capture, ";",
            "display-message", "-p", "-t", _SESSION,
            f"{marker}#{{cursor_x}},#{{cursor_y}},#{{pane_dead}}",
        )  # fmt: skip
        screen, _, tail = out.rpartition(marker)
        x, y, dead = tail.strip().split(",")
        return screen.split("\n")[:-1], f"{x},{y}", dead == "1"

    def wait_stable(self, settle: float, deadline: float) -> bool:
        """Wait until rows and cursor are unchanged for `settle` s or the pane is dead.

        False if `deadline` (time.monotonic()) passed first."""
        last = None
        since = time.monotonic()
        while True:
            lines, cursor, dead = self.state()
            now = time.monotonic()
            if dead:
                return True
            if (lines, cursor) != last:
                last, since = (lines, cursor), now
            elif now - since >= settle:
                return True
            if now >= deadline:
                return False
            time.sleep(POLL_SECONDS)

    def wait_drawn(self, deadline: float) -> None:
        """Until the pane shows anything, its cursor moved or it is dead (as `semo capture`
        waits for the program's first output): a program still starting is not quiet."""
        while time.monotonic() < deadline:
            lines, cursor, dead = self.state()
            if dead or cursor != "0,0" or any(line.strip() for line in lines):
                return
            time.sleep(POLL_SECONDS)

    def dead(self) -> bool:
        return self.state()[2]

    def send(self, spec: str) -> None:
        """Type one semo key spec."""
        batch: list[str] = []
        for action in tmux_key_actions(spec):
            if isinstance(action, semo_keys.Sleep):
                self._send_batch(batch)
                batch = []
                time.sleep(action.milliseconds / 1000)
            elif isinstance(action, TmuxKey):
                batch += [";", "send-keys", "-t", _SESSION, action.name]
            else:
                batch += [";", "send-keys", "-t", _SESSION, "-l", "--", _literal_argument(action)]
        self._send_batch(batch)

    def _send_batch(self, batch: list[str]) -> None:
        if batch:
            self(*batch[1:])


def tmux_capture(
    argv: Sequence[str],
    *,
    cols: int = 80,
    rows: int = 24,
    keys: Sequence[str] = (),
    settle_ms: int = 300,
    timeout: float = 10.0,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    term: str = DEFAULT_TERM,
) -> list[str]:
    """The screen rows tmux shows for `argv` after the keys (`capture-pane -p`)."""
    lines, _ = _run(argv, cols, rows, keys, settle_ms, timeout, env, cwd, term, escapes=False)
    return lines


def tmux_capture_styled(
    argv: Sequence[str],
    *,
    cols: int = 80,
    rows: int = 24,
    keys: Sequence[str] = (),
    settle_ms: int = 300,
    timeout: float = 10.0,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    term: str = DEFAULT_TERM,
) -> tuple[list[str], list[str]]:
    """As `tmux_capture`, plus the same screen with its SGR attributes (`capture-pane -p -e`)."""
    lines, escaped = _run(argv, cols, rows, keys, settle_ms, timeout, env, cwd, term, escapes=True)
    assert escaped is not None
    return lines, escaped


def _run(
    argv: Sequence[str],
    cols: int,
    rows: int,
    keys: Sequence[str],
    settle_ms: int,
    timeout: float,
    env: Mapping[str, str] | None,
    cwd: str | os.PathLike[str] | None,
    term: str,
    *,
    escapes: bool,
) -> tuple[list[str], list[str] | None]:
    child_env = child_environment(env, term=term, cols=cols, rows=rows)  # as semo does
    server = TmuxServer()
    deadline = time.monotonic() + timeout
    settle = settle_ms / 1000
    escaped = None
    try:
        server.start(argv, cols=cols, rows=rows, env=child_env, cwd=cwd, term=term)
        server.wait_drawn(min(deadline, time.monotonic() + FIRST_OUTPUT_SECONDS))
        server.wait_stable(settle, deadline)
        for spec in keys:
            if server.dead():
                break
            server.send(spec)
            server.wait_stable(settle, deadline)
        lines, _, _ = server.state()
        if escapes:
            escaped, _, _ = server.state(escapes=True)
    finally:
        server.kill()
    return _rows(lines, rows), None if escaped is None else _rows(escaped, rows)


def _rows(lines: list[str], rows: int) -> list[str]:
    lines = [line.rstrip(" ") for line in lines[:rows]]
    return lines + [""] * (rows - len(lines))


class TmuxClient:
    """A tmux client attached to `server`'s session in a PTY of its own (cols x rows): what
    tmux sends to a real terminal, every byte recorded in `output` (a reader thread)."""

    def __init__(self, server: TmuxServer, *, cols: int, rows: int) -> None:
        import fcntl
        import pty
        import struct
        import termios
        import threading

        self.output = bytearray()
        self._lock = threading.Lock()
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self._master = master
        self.process = subprocess.Popen(
            ["tmux", "-u", "-L", server.socket, "-f", os.devnull, "attach", "-t", _SESSION],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env={**server._env, "TERM": "xterm-256color"},
            start_new_session=True,
        )
        os.close(slave)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._master, 65536)
            except OSError:
                return
            if not chunk:
                return
            with self._lock:
                self.output += chunk

    def received(self) -> bytes:
        with self._lock:
            return bytes(self.output)

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.wait(timeout=10)
        with contextlib.suppress(OSError):
            os.close(self._master)
