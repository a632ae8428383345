"""The console through the engine's control socket, on real processes (issue 14's budgets).

    python bench/console_processes.py [--only attach|echo|idle|engine] [--keys 200]

A real `semo engine` runs an office of bash agents in the background; real `semo console`
processes attach to it, each in its own pseudo-terminal that this script reads (every byte the
console writes to its terminal, with the time it arrived) and types into (keys, mouse clicks).

1. attach: an office of 6 sessions, each showing a marker line. Time from starting
   `semo console` until its first complete frame is on its terminal (the selected pane's
   marker, every session in the list, the office in the sub-title): the frame the launcher
   paints from the snapshot (semo/console/first_frame.py). Beside it, from other starts of the same
   console, until Textual's own frame is complete (the same marks after the app turned mouse
   reporting on), and the socket's share: a bare `EngineClient` (connect, subscribe, attach 6
   sessions, all screens complete).
   References in the same run: `python -c pass`, a one-line Textual app's first frame and
   `tmux attach`'s first frame.
2. echo: keystroke -> echo through the socket: a letter typed into the console's terminal
   (the focused pane runs bash), until the console writes that letter back. At 6 sessions
   idle, then at 20 sessions while a neighbouring pane floods (`seq` in a loop).
   Baseline in the same run: the in-process figures of bench/console.py (`--only latency`).
3. idle: a console attached to 6 idle sessions: bytes per second it writes to its terminal,
   and its CPU, over --idle-seconds.
4. engine: the engine's CPU while one pane prints ~20 lines/s, with 0, 1, 2 and 4 consoles
   attached (each attached to all 6 sessions), and the bytes the engine sends per console.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import os
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

if Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from semo.engine.config import parse_config
from semo.engine.control.client import EngineClient
from semo.engine.control.paths import office_paths
from semo.engine.runtime import socket_answers

SEMO = Path(sys.executable).with_name("semo")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def office_config(roles: list[str]) -> str:
    agents = "".join(
        f'\n[[agents]]\nrole = "{role}"\nprofile = "generic"\n'
        f'command = ["bash", "--norc", "--noprofile", "-i"]\nenv = {{ PS1 = "$ " }}\n'
        for role in roles
    )
    return (
        '[office]\nname = "bench"\nrepository = "repo"\nworkspace_root = "ws"\n'
        '[store]\nbackend = "sqlite"\nsqlite_path = "semo.db"\n'
        "[engine]\nshutdown_grace = 1\n"
        f"[pool]\nmax_sessions = {len(roles)}\nwarm_roles = {roles!r}\n".replace("'", '"')
        + agents
    )


class Office:
    """A background `semo engine` for an office of `count` bash agents S01..Snn."""

    def __init__(self, count: int) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="semo-bench-"))
        self.roles = [f"S{n:02d}" for n in range(1, count + 1)]
        repo = self.folder / "repo"
        repo.mkdir()
        git = ["git", "-C", str(repo), "-c", "user.email=b@example.com", "-c", "user.name=b"]
        subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "init"], check=True)
        text = office_config(self.roles)
        (self.folder / "semo.toml").write_text(text)
        self.config = parse_config(text, self.folder / "semo.toml")
        self.env = {
            "PATH": os.environ["PATH"],
            "HOME": str(self.folder),
            "LANG": "C.UTF-8",
            "TERM": "xterm-256color",
            "XDG_STATE_HOME": str(self.folder / "state"),
            "XDG_RUNTIME_DIR": str(self.folder),
        }
        if "SEMO_PTY_INTAKE_SHARE" in os.environ:  # A/B of the PTY intake budget
            self.env["SEMO_PTY_INTAKE_SHARE"] = os.environ["SEMO_PTY_INTAKE_SHARE"]
        os.environ.update({k: self.env[k] for k in ("XDG_RUNTIME_DIR", "XDG_STATE_HOME")})
        self.paths = office_paths("bench", self.config.store_config())
        self.engine: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = open(self.folder / "engine.log", "ab")  # noqa: SIM115
        self.engine = subprocess.Popen(
            [str(SEMO), "engine", "--config", "semo.toml"],
            cwd=self.folder,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while not socket_answers(self.paths.socket):
            if time.monotonic() > deadline or self.engine.poll() is not None:
                raise SystemExit(f"the engine did not start; see {self.folder}/engine.log")
            time.sleep(0.05)

    async def type_into(self, commands: dict[str, str]) -> None:
        """Type a command line into sessions by role (through a socket client)."""
        client = EngineClient(self.paths)
        await client.start()
        deadline = time.monotonic() + 60
        while len([s for s in client.sessions() if s.state.value == "ready"]) < len(self.roles):
            if time.monotonic() > deadline:
                raise SystemExit("the sessions did not become ready")
            await asyncio.sleep(0.1)
        by_role = {s.role: s for s in client.sessions()}
        for role, command in commands.items():
            by_role[role].terminal.write(command + "\r")
        await asyncio.sleep(0.5)
        await client.close()

    def cpu_seconds(self) -> float:
        assert self.engine is not None
        return process_cpu(self.engine.pid)

    def stop(self) -> None:
        if self.engine is not None and self.engine.poll() is None:
            self.engine.send_signal(signal.SIGTERM)
            try:
                self.engine.wait(30)
            except subprocess.TimeoutExpired:
                self.engine.kill()
        shutil.rmtree(self.folder, ignore_errors=True)


def process_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat", "rb") as stat:
        fields = stat.read().rpartition(b")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


class PtyProcess:
    """A command in a pseudo-terminal of cols x rows; every output byte is timed."""

    def __init__(
        self, argv: list[str], cwd: Path, env: dict[str, str], cols: int = 160, rows: int = 48
    ) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.master = master
        self.started = time.perf_counter()
        self.process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
            close_fds=True,
        )
        os.close(slave)
        self.chunks: list[tuple[float, bytes]] = []
        self.total = 0
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            now = time.perf_counter()
            with self._arrived:
                self.chunks.append((now, data))
                self.total += len(data)
                self._arrived.notify_all()

    def wait_for(self, needles: list[bytes], since: int = 0, timeout: float = 30.0) -> float:
        """The time the last of `needles` arrived (each searched in the output from chunk
        index `since` on); TimeoutError after `timeout` s."""
        deadline = time.perf_counter() + timeout
        found: dict[bytes, float] = {}
        seen = since
        text = b""
        with self._arrived:
            while True:
                while seen < len(self.chunks):
                    at, data = self.chunks[seen]
                    text = text[-200:] + data
                    for needle in needles:
                        if needle not in found and needle in text:
                            found[needle] = at
                    seen += 1
                if len(found) == len(needles):
                    return max(found.values())
                left = deadline - time.perf_counter()
                if left <= 0:
                    raise TimeoutError(f"not seen: {set(needles) - set(found)}")
                self._arrived.wait(left)

    def mark(self) -> int:
        with self._lock:
            return len(self.chunks)

    def write(self, data: bytes) -> None:
        os.write(self.master, data)

    def click(self, x: int, y: int) -> None:
        self.write(f"\x1b[<0;{x + 1};{y + 1}M\x1b[<0;{x + 1};{y + 1}m".encode())

    def bytes_between(self, start: float, end: float) -> int:
        with self._lock:
            return sum(len(d) for t, d in self.chunks if start <= t < end)

    def cpu_seconds(self) -> float:
        return process_cpu(self.process.pid)

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
        # the descriptor is closed only once the reader is done with it: its number is reused by
        # the next openpty, and a reader still in os.read would take that terminal's output
        self._reader.join(10)
        if not self._reader.is_alive():
            with contextlib.suppress(OSError):
                os.close(self.master)


class ConsoleProcess(PtyProcess):
    """`semo console` of `office` in a timed pseudo-terminal."""

    def __init__(self, office: Office, cols: int = 160, rows: int = 48) -> None:
        argv = [str(SEMO), "console", "--config", "semo.toml"]
        super().__init__(argv, office.folder, office.env, cols, rows)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def summary(values: list[float]) -> str:
    return (
        f"p50 {statistics.median(values):6.1f} ms  p99 {percentile(values, 0.99):6.1f} ms  "
        f"max {max(values):6.1f} ms  n={len(values)}"
    )


# -- 1. attach ---------------------------------------------------------------------------------

#: a Textual app with one line of text: the first frame any Textual app can draw (reference)
MINIMAL_TEXTUAL = (
    "from textual.app import App\n"
    "from textual.widgets import Static\n"
    "class Minimal(App):\n"
    "    def compose(self):\n"
    "        yield Static('MARK-TEXTUAL')\n"
    "Minimal().run()\n"
)


def first_frame_ms(
    process: PtyProcess, needles: list[bytes], cpu: list[float] | None = None
) -> float:
    """Wall time from the start until the last of `needles` was written; the CPU time the
    process had used by then is appended to `cpu` (less at the mercy of a loaded machine)."""
    try:
        done = process.wait_for(needles, timeout=60)
        if cpu is not None:
            cpu.append(process.cpu_seconds() * 1000)
        return (done - process.started) * 1000
    except TimeoutError as error:
        with process._lock:
            output = b"".join(data for _at, data in process.chunks)
        kept = Path(tempfile.mkstemp(prefix="semo-bench-frame-", suffix=".bin")[1])
        kept.write_bytes(output)
        raise TimeoutError(f"{error}; what it wrote: {kept}") from None
    finally:
        process.close()


def app_frame_ms(process: PtyProcess, needles: list[bytes]) -> float:
    """Wall time from the start until Textual's own frame is complete: `needles` written after
    the app turned mouse reporting on (the painted first frame comes before it)."""
    try:
        started = process.wait_for([TEXTUAL_MODES], timeout=60)
        with process._lock:
            since = next(i for i, (at, _data) in enumerate(process.chunks) if at >= started)
        return (process.wait_for(needles, since=since, timeout=60) - process.started) * 1000
    finally:
        process.close()


#: what Textual writes as it takes the terminal (SGR mouse reporting): its frame follows
TEXTUAL_MODES = b"\x1b[?1006h"


def bench_attach(args: argparse.Namespace) -> None:
    """`semo console` from its start until its first complete frame is on the terminal: the
    selected session's pane (its marker line), every session in the list, and the office in
    the header's sub-title (written once the snapshot is applied). References in the same
    run, one of each per round: `python -c pass` (the interpreter's start), a one-line Textual
    app's first frame (any Textual app's floor) and `tmux attach` to a session showing a
    marker (tmux's attach, first frame)."""
    office = Office(6)
    tmux = ["tmux", "-L", f"semo-bench-{os.getpid()}", "-f", "/dev/null"]
    try:
        office.start()
        asyncio.run(
            office.type_into({r: f"echo MARK-$((100+{i}))" for i, r in enumerate(office.roles)})
        )
        subprocess.run(
            [*tmux, "new-session", "-d", "-x", "160", "-y", "48", "sh -c 'echo MARK-TMUX; cat'"],
            check=True,
            env=office.env,
        )
        # the selected (first) session's pane, the other sessions' names in the list, the office
        complete = [b"MARK-100", *(role.encode() for role in office.roles[1:]), "bench ·".encode()]
        console = [str(SEMO), "console", "--config", "semo.toml"]
        root = Path(__file__).resolve().parents[1]
        first_frame_ms(PtyProcess(console, office.folder, office.env), complete)  # warm-up
        loads = [os.getloadavg()[0]]
        baseline_env = {**office.env, "PYTHONPATH": str(args.baseline_tree)}
        baseline = [sys.executable, "-m", "semo.console.cli", "console", "--config", "semo.toml"]
        if args.baseline_tree:
            first_frame_ms(PtyProcess(baseline, office.folder, baseline_env), complete)
        firsts, apps, clients, bare, textual, tmux_attach, before = [], [], [], [], [], [], []
        cpu: dict[str, list[float]] = {"console": [], "before": [], "textual": []}
        for _ in range(args.repeat):
            process = PtyProcess(console, office.folder, office.env)
            firsts.append(first_frame_ms(process, complete, cpu["console"]))
            apps.append(app_frame_ms(PtyProcess(console, office.folder, office.env), complete))
            if args.baseline_tree:
                process = PtyProcess(baseline, office.folder, baseline_env)
                before.append(first_frame_ms(process, complete, cpu["before"]))
            clients.append(asyncio.run(client_attach(office)) * 1000)
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            bare.append((time.perf_counter() - started) * 1000)
            minimal = PtyProcess([sys.executable, "-c", MINIMAL_TEXTUAL], root, office.env)
            textual.append(first_frame_ms(minimal, [b"MARK-TEXTUAL"], cpu["textual"]))
            attach = PtyProcess([*tmux, "attach", "-t", "0"], office.folder, office.env)
            tmux_attach.append(first_frame_ms(attach, [b"MARK-TMUX"]))
        loads.append(os.getloadavg()[0])
        print(
            f"attach to 6 sessions (1 large pane + the list, 160x48), {args.repeat} runs, "
            f"load average {loads[0]:.1f} -> {loads[1]:.1f}:"
        )
        print(f"  semo console start -> first complete frame   {median_range(firsts)}")
        print(f"    its CPU time by then                       {median_range(cpu['console'])}")
        print(f"  the same frame drawn by Textual (app running) {median_range(apps)}")
        if before:
            print(f"    the same from {args.baseline_tree}: {median_range(before)}")
            print(f"    its CPU time by then                       {median_range(cpu['before'])}")
        print(f"  socket only: EngineClient, 6 screens complete {median_range(clients)}")
        print("  references, same run:")
        print(f"    python -c pass                             {median_range(bare)}")
        print(f"    one-line Textual app, first frame          {median_range(textual)}")
        print(f"      its CPU time by then                     {median_range(cpu['textual'])}")
        print(f"    tmux attach, first frame                   {median_range(tmux_attach)}")
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
        office.stop()


def median_range(values: list[float]) -> str:
    return (
        f"median {statistics.median(values):6.1f} ms  (min {min(values):6.1f}, "
        f"max {max(values):6.1f})"
    )


async def client_attach(office: Office) -> float:
    client = EngineClient(office.paths)
    started = time.perf_counter()
    await client.start()
    terminals = [s.terminal for s in client.sessions()]
    changed = asyncio.Event()
    for terminal in terminals:
        terminal.add_listener(lambda _chunk: changed.set())
    while not all(t.screen.complete for t in terminals):
        changed.clear()
        await changed.wait()
    elapsed = time.perf_counter() - started
    await client.close()
    return elapsed


# -- 2. echo -----------------------------------------------------------------------------------

LETTERS = b"QZXJKVWY"


def keystrokes(
    console: ConsoleProcess, count: int, pause: float = 0.03
) -> tuple[list[float], list[int]]:
    """Type letters into the focused bash pane; ms until the console wrote each one back, and
    the bytes it wrote from the letter until `pause` after its backspace (the two echoes).
    Each letter is erased before the next, so the row never holds two."""
    latencies, sizes = [], []
    for index in range(count):
        letter = LETTERS[index % len(LETTERS) : index % len(LETTERS) + 1]
        since = console.mark()
        started = time.perf_counter()
        console.write(letter)
        arrived = console.wait_for([letter], since=since, timeout=10)
        latencies.append((arrived - started) * 1000)
        console.write(b"\x7f")
        time.sleep(pause)
        sizes.append(console.bytes_between(started, time.perf_counter()))
    return latencies, sizes


def bench_echo(args: argparse.Namespace) -> None:
    for count, flood in ((6, False), (20, False), (20, True)):
        office = Office(count)
        console = None
        try:
            office.start()
            asyncio.run(office.type_into({office.roles[0]: "clear"}))
            console = ConsoleProcess(office)
            console.wait_for([b"S01"], timeout=60)
            time.sleep(1.5)
            console.write(b"\r")  # Enter opens the selected (first) session's pane
            time.sleep(0.5)
            if flood:
                asyncio.run(office.type_into({office.roles[1]: "while :; do seq 1 100000; done"}))
                time.sleep(1.0)
            began = time.perf_counter()
            latencies, _ = keystrokes(console, args.keys)
            ended = time.perf_counter()
            what = (
                f"{count} sessions, a neighbouring pane flooding"
                if flood
                else f"{count} sessions, idle"
            )
            print(f"keystroke -> echo through the socket, {what}:")
            print(f"  {summary(latencies)}")
            shown = console.bytes_between(began, ended) / (ended - began)
            print(f"  the console wrote {shown / 1000:.1f} kB/s to its terminal meanwhile")
        finally:
            if console is not None:
                console.close()
            office.stop()


async def socket_keystrokes(office: Office, count: int) -> list[float]:
    """The same keystrokes typed by a bare EngineClient (no console process): the engine's and
    the socket's share of the echo. The client is attached to every session (all visible)."""
    client = EngineClient(office.paths)
    await client.start()
    by_role = {s.role: s for s in client.sessions()}
    terminal = by_role[office.roles[0]].terminal
    changed = asyncio.Event()
    for session in by_role.values():
        session.terminal.add_listener(lambda _chunk: None)
    terminal.add_listener(lambda _chunk: changed.set())
    latencies = []
    try:
        for index in range(count):
            letter = chr(LETTERS[index % len(LETTERS)])
            started = time.perf_counter()
            terminal.write(letter)
            while (
                not terminal.screen.text_rows()[terminal.screen.cursor.y].rstrip().endswith(letter)
            ):
                changed.clear()
                async with asyncio.timeout(10):
                    await changed.wait()
            latencies.append((time.perf_counter() - started) * 1000)
            terminal.write("\x7f")
            await asyncio.sleep(0.03)
    finally:
        await client.close()
    return latencies


def bench_socket_echo(args: argparse.Namespace) -> None:
    for count, flood in ((20, False), (20, True)):
        office = Office(count)
        try:
            office.start()
            asyncio.run(office.type_into({office.roles[0]: "clear"}))
            if flood:
                asyncio.run(office.type_into({office.roles[1]: "while :; do seq 1 100000; done"}))
                time.sleep(1.0)
            latencies = asyncio.run(socket_keystrokes(office, args.keys))
            what = f"{count} sessions, a neighbour flooding" if flood else f"{count} sessions, idle"
            print(f"keystroke -> echo, bare EngineClient (no console), {what}:")
            print(f"  {summary(latencies)}")
        finally:
            office.stop()


# -- 3. idle -----------------------------------------------------------------------------------


def bench_idle(args: argparse.Namespace) -> None:
    office = Office(6)
    console = None
    try:
        office.start()
        console = ConsoleProcess(office)
        console.wait_for([b"S01", b"S04"], timeout=60)
        time.sleep(3.0)  # settled
        cpu, start = console.cpu_seconds(), time.perf_counter()
        time.sleep(args.idle_seconds)
        end = time.perf_counter()
        cpu = (console.cpu_seconds() - cpu) / (end - start) * 100
        written = console.bytes_between(start, end) / (end - start)
        print(f"idle console, 6 idle sessions, {args.idle_seconds:g} s:")
        print(f"  writes {written:7.0f} B/s to its terminal; CPU {cpu:4.1f} %")
    finally:
        if console is not None:
            console.close()
        office.stop()


# -- 4. engine cost per console ----------------------------------------------------------------

STEADY = (
    "for i in $(seq 1 100000); do printf '\\033[3%dm%06d\\033[0m steady agent output %s\\n' "
    "$((i % 8)) $i xxxxxxxxxxxxxxxxxxxx; sleep 0.05; done"
)


def bench_engine(args: argparse.Namespace) -> None:
    office = Office(6)
    consoles: list[ConsoleProcess] = []
    try:
        office.start()
        asyncio.run(office.type_into({office.roles[0]: STEADY}))
        print(f"engine CPU with one pane printing ~20 lines/s, {args.window_seconds:g} s windows:")
        for wanted in (0, 1, 2, 4):
            while len(consoles) < wanted:
                console = ConsoleProcess(office)
                console.wait_for([b"S04"], timeout=60)
                consoles.append(console)
            time.sleep(2.0)
            cpu, start = office.cpu_seconds(), time.perf_counter()
            stats_before = asyncio.run(engine_stats(office))
            time.sleep(args.window_seconds)
            end = time.perf_counter()
            stats_after = asyncio.run(engine_stats(office))
            cpu = (office.cpu_seconds() - cpu) / (end - start) * 100
            sent = {s["console"]: s["bytes_sent"] for s in stats_after}
            rates = [
                (sent[s["console"]] - s["bytes_sent"]) / (end - start)
                for s in stats_before
                if s["console"] in sent
            ]
            per = f"; {statistics.median(rates) / 1000:.1f} kB/s sent per console" if rates else ""
            print(f"  {wanted} console(s): engine CPU {cpu:5.1f} %{per}")
    finally:
        for console in consoles:
            console.close()
        office.stop()


async def engine_stats(office: Office) -> list[dict[str, int]]:
    client = EngineClient(office.paths)
    await client.connect()
    try:
        stats = await client.request({"op": "stats"})
    finally:
        await client.close()
    return [s for s in stats if s["bytes_sent"] > 0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("attach", "echo", "socket-echo", "idle", "engine"))
    parser.add_argument("--keys", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument(
        "--baseline-tree",
        type=Path,
        help="attach: also time the console of another source tree (its console/ and engine/, "
        "e.g. `git archive REV console engine | tar -x -C DIR`) in the same rounds",
    )
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--window-seconds", type=float, default=10.0)
    args = parser.parse_args()
    benches = {"attach": bench_attach, "echo": bench_echo, "idle": bench_idle}
    benches["engine"] = bench_engine
    benches["socket-echo"] = bench_socket_echo
    for name, bench in benches.items():
        if args.only in (None, name):
            bench(args)


if __name__ == "__main__":
    main()
