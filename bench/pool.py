"""Sessions and the pool: warm acquire -> prompt delivered, cold start-up, a long soak.

    python bench/pool.py --only warm [--prompts 50] [--agents generic,claude]
    python bench/pool.py --only cold [--rounds 7]
    nohup python bench/pool.py --only soak --soak-minutes 30 > /tmp/soak.log 2>&1 &
    python bench/pool.py --prompts 5 --rounds 2 --sessions 4 --soak-minutes 1 --warmup-minutes 0.25

warm: a SessionPoolManager over a SessionManager with warm sessions (roles FE, BE, QA); each
round times `pool.acquire(role="BE")` + `session.deliver(prompt)` (resolved when the agent
confirmed the prompt), then waits for the turn to end and releases the session. Two agents:
bash as a generic agent (confirmed by its output) and the real Claude Code CLI against the
scripted Messages API (confirmed by its UserPromptSubmit hook). Measured in the same run, in
rotating order: `deliver` on a session already held (no acquire), and the raw floor: the paste
and Enter written to the PTY at once, timed to the same confirmation, without semo's queue.

cold: the CLI's own start-up (`claude` spawned in a plain TerminalSession, until its input box
is drawn) against semo's (`manager.create`, which also writes persona, hooks and trust, then
`wait_ready`: SessionStart hook + input box), alternating, fresh folders every round, one HOME.

soak: --sessions generic sessions (bash printing ~20 lines/s, coloured, with an `Error:` line
every --signal-every lines and a shell prompt shown for 0.2 s every --turn-every lines, so the
screen, scrollback, observer and state tracker work all the time), every session event
published to an EventBus (as the engine does) with one subscriber draining it; the engine
process's RSS (VmRSS) sampled every --sample-seconds. Growth is a least-squares fit over the
samples after the warm-up, and again over the samples after every scrollback is full: at 20
lines/s the 10,000-line scrollbacks take ~8.5 min to fill, and until then RSS grows by design.

Figures only; nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from semo.engine.agents.claude.screen import input_box_visible
from semo.engine.agents.claude.trust import ensure_trusted
from semo.engine.events import EventBus
from semo.engine.protocol.state import AgentState, StateChange
from semo.engine.session_events import bus_event
from semo.engine.sessions.agent_session import AgentSession, SessionEvent
from semo.engine.sessions.manager import SessionManager
from semo.engine.sessions.pool import SessionPoolManager
from semo.engine.sessions.profiles import paste
from semo.engine.store.models import Agent
from semo.engine.terminal.session import TerminalSession
from tests.support.claude_home import claude_env, installed_claude_version
from tests.support.scripted_api import ScriptedMessagesAPI

OFFICE = "bench-office"
BASH = ["bash", "--norc", "--noprofile", "-i"]
ROLES = ("FE", "BE", "QA")
TIMEOUT = 30.0  # per delivery / turn / start-up; a figure, never a budget
COLS, ROWS = 120, 40

# -- helpers --------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def describe(name: str, values: list[float], width: int = 34) -> str:
    if not values:
        return f"{name:<{width}} (no samples)"
    return (
        f"{name:<{width}} p50 {statistics.median(values):7.1f}"
        f"   p95 {percentile(values, 0.95):7.1f}   p99 {percentile(values, 0.99):7.1f}"
        f"   max {max(values):7.1f} ms   n={len(values)}"
    )


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def slope_per_hour(samples: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (seconds, MB) samples, in MB per hour."""
    if len(samples) < 2:
        return None
    mean_t = statistics.fmean(t for t, _ in samples)
    mean_m = statistics.fmean(m for _, m in samples)
    var = sum((t - mean_t) ** 2 for t, _ in samples)
    if var == 0:
        return None
    cov = sum((t - mean_t) * (m - mean_m) for t, m in samples)
    return cov / var * 3600


@contextlib.contextmanager
def temp_dir(prefix: str) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=prefix)).resolve()  # short: AF_UNIX path limit
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def header() -> None:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"date {datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}")
    print(
        f"machine: {os.cpu_count()} CPUs (nproc), load average {load}, "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}"
    )


def bash_env(home: Path) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PS1": "$ ", "HOME": str(home)}


def publish_to(bus: EventBus) -> Callable[[AgentSession, SessionEvent], None]:
    """The engine's session listener: every session event that has one as a bus event."""

    def listener(session: AgentSession, event: SessionEvent) -> None:
        if (published := bus_event(OFFICE, session, event)) is not None:
            bus.publish(published)

    return listener


async def drain(bus: EventBus, counts: Counter[str]) -> None:
    async with bus.subscribe(maxsize=1000) as subscription:
        async for event in subscription:
            counts[event.kind] += 1


# -- 1. warm acquire -> prompt delivered ----------------------------------------------------------


class EnterClock:
    """When each watched session's terminal was last sent Enter (wraps the instance's write)."""

    def __init__(self) -> None:
        self.at = 0.0
        self.watching: set[str] = set()

    def watch(self, session: AgentSession) -> None:
        if session.session_id in self.watching:
            return
        self.watching.add(session.session_id)
        terminal = session.terminal
        write = terminal.write

        def timed_write(text: str) -> None:
            write(text)
            if text == "\r":
                self.at = time.perf_counter()

        terminal.write = timed_write  # type: ignore[method-assign]


class Confirmations:
    """Per session: set when the agent confirms a prompt typed by `raw` (no semo queue):
    the UserPromptSubmit hook (claude), or the Enter's echo (generic)."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.watching: set[str] = set()

    def watch(self, session: AgentSession) -> None:
        if session.session_id in self.watching:
            return
        self.watching.add(session.session_id)
        if session.profile.uses_hooks:
            session.add_listener(self._on_event)
        else:
            session.terminal.add_listener(lambda text: self.event.set() if "\n" in text else None)

    def _on_event(self, _session: AgentSession, event: SessionEvent) -> None:
        if (
            isinstance(event, StateChange)
            and event.state == AgentState.EXECUTING
            and event.source == "hook"
        ):
            self.event.set()


async def turn_end(session: AgentSession) -> None:
    """Until the turn started by the last prompt is over and the agent is at its prompt."""
    if session.profile.uses_hooks:
        await session.wait_ready(TIMEOUT)
    else:
        await session.terminal.wait_quiet(0.1, TIMEOUT)
        await session.wait_ready(TIMEOUT)


async def warm_rounds(
    pool: SessionPoolManager, prompts: int, gap: float
) -> tuple[dict[str, list[float]], int]:
    times: dict[str, list[float]] = {
        "pool": [],
        "acquire": [],
        "held": [],
        "held to Enter": [],
        "held Enter to confirmed": [],
        "raw": [],
    }
    confirmations = Confirmations()
    enter = EnterClock()
    raw_missed = 0

    async def via_pool(i: int) -> None:
        start = time.perf_counter()
        pooled = await pool.acquire(role="BE")
        acquired = time.perf_counter()
        await pooled.session.deliver(f"echo pool-{i}", timeout=TIMEOUT)
        times["pool"].append((time.perf_counter() - start) * 1000)
        times["acquire"].append((acquired - start) * 1000)
        await turn_end(pooled.session)
        pool.release(pooled.session_id)

    async def held(i: int) -> None:
        pooled = await pool.acquire(role="BE")
        enter.watch(pooled.session)
        start = time.perf_counter()
        await pooled.session.deliver(f"echo held-{i}", timeout=TIMEOUT)
        done = time.perf_counter()
        times["held"].append((done - start) * 1000)
        times["held to Enter"].append((enter.at - start) * 1000)
        times["held Enter to confirmed"].append((done - enter.at) * 1000)
        await turn_end(pooled.session)
        pool.release(pooled.session_id)

    async def raw(i: int) -> None:
        nonlocal raw_missed
        pooled = await pool.acquire(role="BE")
        session = pooled.session
        confirmations.watch(session)
        terminal = session.terminal
        confirmations.event.clear()
        start = time.perf_counter()
        terminal.write(paste(f"echo raw-{i}", bracketed=terminal.screen.modes.bracketed_paste))
        terminal.write("\r")
        try:
            await asyncio.wait_for(confirmations.event.wait(), 5.0)
            times["raw"].append((time.perf_counter() - start) * 1000)
        except TimeoutError:  # the Enter was lost: press it again, count the miss
            raw_missed += 1
            terminal.write("\r")
            await asyncio.wait_for(confirmations.event.wait(), TIMEOUT)
        await turn_end(session)
        pool.release(pooled.session_id)

    kinds = [via_pool, held, raw]
    for i in range(prompts):
        for k in range(len(kinds)):
            await kinds[(i + k) % len(kinds)](i)
            await asyncio.sleep(gap)
    return times, raw_missed


async def warm_for(kind: str, args: argparse.Namespace) -> None:
    bus = EventBus()
    counts: Counter[str] = Counter()
    drainer = asyncio.ensure_future(drain(bus, counts))
    with temp_dir("semo-bp-") as tmp, contextlib.ExitStack() as stack:
        folder = tmp / "work"
        folder.mkdir()
        if kind == "claude":
            api = stack.enter_context(ScriptedMessagesAPI(replies=["ok"] * (3 * args.prompts + 20)))
            env = claude_env(folder, tmp / "home", api)
            command = ["claude"]
        else:
            env = bash_env(tmp)
            command = BASH
        agents = {
            role: Agent(office_id=OFFICE, name=f"bench {role}", role=role, command=command)
            for role in ROLES
        }
        manager = SessionManager(agent_env=env, runtime_dir=tmp / "run")
        manager.add_listener(publish_to(bus))
        pool = SessionPoolManager(
            manager,
            agents,
            warm_roles=ROLES,
            ready_timeout=60.0,
            folder_for=lambda agent, _task: folder / agent.role,
        )
        for role in ROLES:
            (folder / role).mkdir()
        try:
            started = time.perf_counter()
            await pool.start()
            warm_s = time.perf_counter() - started
            status = pool.status()
            if status.down:
                raise RuntimeError(f"warm sessions not running: {status.down}")
            times, missed = await warm_rounds(pool, args.prompts, args.gap)
            cold = pool.status().cold
        finally:
            await pool.close()
            await manager.close()
            drainer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await drainer
    label = "bash (generic)" if kind == "generic" else f"claude {installed_claude_version()}"
    print(
        f"{label}: {len(ROLES)} warm sessions ready in {warm_s:.2f} s; "
        f"{args.prompts} prompts per row, rotating order, {args.gap * 1000:.0f} ms apart"
    )
    print(describe("  pool: acquire -> delivered", times["pool"]))
    print(describe("    of which acquire()", times["acquire"]))
    print(describe("  held session: deliver()", times["held"]))
    print(describe("    of which paste, settle -> Enter", times["held to Enter"]))
    print(describe("    of which Enter -> confirmed", times["held Enter to confirmed"]))
    raw_note = f"  ({missed} Enter lost, pressed again; not counted)" if missed else ""
    print(describe("  raw: paste+Enter -> confirmed", times["raw"]) + raw_note)
    overhead = statistics.median(times["pool"]) - statistics.median(times["held"])
    print(
        f"  pool overhead (p50 pool - p50 held) {overhead:+.1f} ms; cold sessions started: {cold}; "
        f"bus events drained: {sum(counts.values())}"
    )


async def run_warm(args: argparse.Namespace) -> None:
    print("\n== warm pool: acquire -> prompt delivered (budget <= 100 ms) ==")
    for kind in args.agents.split(","):
        await warm_for(kind.strip(), args)


# -- 2. cold start -------------------------------------------------------------------------------


async def cli_own_startup(env: dict[str, str], folder: Path) -> float:
    """Seconds from spawning `claude` in a TerminalSession to its input box on screen."""
    drawn = asyncio.Event()
    start = time.perf_counter()
    terminal = TerminalSession(["claude"], cols=COLS, rows=ROWS, cwd=folder, env=env)

    def on_output(_text: str) -> None:
        if not drawn.is_set() and input_box_visible(terminal.screen):
            drawn.set()

    terminal.add_listener(on_output)
    terminal.start()
    try:
        await asyncio.wait_for(drawn.wait(), TIMEOUT)
        return time.perf_counter() - start
    finally:
        await terminal.close(grace=2.0)


async def semo_startup(
    manager: SessionManager, agent: Agent, folder: Path, parts: dict[str, list[float]]
) -> float:
    """Seconds from `manager.create` (persona, hooks, trust, spawn) to `wait_ready`; `parts`
    gets when create returned (the CLI spawned) and when the input box was drawn."""
    start = time.perf_counter()
    session = await manager.create(agent, working_dir=folder, cols=COLS, rows=ROWS)
    created = time.perf_counter()
    box: list[float] = []

    def on_output(_text: str) -> None:  # added before the loop ran: no output is missed
        if not box and input_box_visible(session.terminal.screen):
            box.append(time.perf_counter())

    session.terminal.add_listener(on_output)
    try:
        await session.wait_ready(TIMEOUT)
        ready = time.perf_counter()
    finally:
        await manager.terminate(session.session_id, reason="bench round over")
    parts["created"].append(created - start)
    parts["box"].append((box[0] if box else ready) - start)
    return ready - start


async def run_cold(args: argparse.Namespace) -> None:
    print("\n== cold session -> ready, real Claude Code (budget <= 1.2 x the CLI's own) ==")
    agent = Agent(office_id=OFFICE, name="bench BE", role="BE", command=["claude"])
    cli: list[float] = []
    semo: list[float] = []
    parts: dict[str, list[float]] = {"created": [], "box": []}
    with temp_dir("semo-bc-") as tmp, ScriptedMessagesAPI(replies=["ok"]) as api:
        home = tmp / "home"
        env = claude_env(tmp, home, api)  # one HOME for both; every folder is new
        async with SessionManager(agent_env=env, runtime_dir=tmp / "run") as manager:
            counter = 0

            def fresh() -> Path:
                nonlocal counter
                counter += 1
                path = tmp / f"w{counter}"
                path.mkdir()
                return path

            async def cli_round() -> float:
                folder = fresh()
                ensure_trusted(folder, home=home)  # done beforehand: not the CLI's start-up
                return await cli_own_startup(env, folder)

            async def semo_round(into: dict[str, list[float]] = parts) -> float:
                return await semo_startup(manager, agent, fresh(), into)

            for _ in range(args.cold_warmup):  # untimed: page cache, node's compile cache
                await cli_round()
                await semo_round({"created": [], "box": []})
            for i in range(args.rounds):
                pair = [(cli, cli_round), (semo, semo_round)]
                for into, measure in pair if i % 2 == 0 else reversed(pair):
                    into.append(await measure())
                    await asyncio.sleep(args.gap)
    cli_ms = [x * 1000 for x in cli]
    semo_ms = [x * 1000 for x in semo]
    print(
        f"claude {installed_claude_version()}, {COLS}x{ROWS}, {args.rounds} rounds alternating "
        f"(after {args.cold_warmup} untimed), fresh folder each start"
    )
    rows = [
        ("CLI own: spawn -> input box drawn", cli_ms),
        ("semo: create (persona, hooks, trust) -> ready", semo_ms),
        ("  of which create() returned (CLI spawned)", [x * 1000 for x in parts["created"]]),
        ("  of which input box drawn", [x * 1000 for x in parts["box"]]),
    ]
    width = 46
    print(f"{'':<{width}} median     min     max  ms")
    for name, values in rows:
        print(
            f"{name:<{width}} {statistics.median(values):6.0f}"
            f"  {min(values):6.0f}  {max(values):6.0f}"
        )
    ratios = [s / c for s, c in zip(semo, cli, strict=True)]
    print(
        f"ratio of medians {statistics.median(semo) / statistics.median(cli):.2f}x; "
        f"per round {' '.join(f'{r:.2f}' for r in ratios)}"
    )


# -- 3. soak -------------------------------------------------------------------------------------

SOAK_LOOP = r"""
exec 3<> <(:)
TEXT="lorem ipsum dolor sit amet, consectetur adipiscing"
i=0
while true; do
  i=$((i+1))
  printf '\e[32mline\e[0m %07d %5d %s\n' "$i" "$RANDOM" "$TEXT"
  if (( i % SIGNAL_EVERY == 0 )); then printf 'Error: step %d failed (bench)\n' "$i"; fi
  if (( i % TURN_EVERY == 0 )); then printf '$ '; read -t 0.2 -u 3; printf '\n'; fi
  read -t 0.05 -u 3
done
"""


async def run_soak(args: argparse.Namespace) -> None:
    print(f"\n== soak: {args.sessions} sessions, memory over time (budget < 10 MB/hour) ==")
    loop_script = SOAK_LOOP.replace("SIGNAL_EVERY", str(args.signal_every)).replace(
        "TURN_EVERY", str(args.turn_every)
    )
    bus = EventBus()
    counts: Counter[str] = Counter()
    drainer = asyncio.ensure_future(drain(bus, counts))
    samples: list[tuple[float, float]] = []
    with temp_dir("semo-bs-") as tmp:
        folder = tmp / "work"
        folder.mkdir()
        manager = SessionManager(agent_env=bash_env(tmp), runtime_dir=tmp / "run")
        manager.add_listener(publish_to(bus))
        await manager.start()
        sessions = []
        for i in range(args.sessions):
            agent = Agent(
                office_id=OFFICE,
                name=f"soak {i}",
                role=f"S{i}",
                command=["bash", "-c", loop_script],
            )
            sessions.append(await manager.create(agent, working_dir=folder, cols=COLS, rows=ROWS))
        limit = sessions[0].terminal.screen.scrollback.limit
        start = time.monotonic()
        warmup = args.warmup_minutes * 60
        end = start + warmup + args.soak_minutes * 60
        full_at: float | None = None
        print(
            f"{args.sessions} x bash loop (~20 lines/s, `Error:` line every {args.signal_every}, "
            f"prompt every {args.turn_every} lines), {COLS}x{ROWS}, scrollback {limit} lines; "
            f"warm-up {args.warmup_minutes:g} min, then {args.soak_minutes:g} min; "
            f"sample every {args.sample_seconds:g} s",
            flush=True,
        )
        print(f"{'t min':>6} {'RSS MB':>8} {'ingested MB':>12} {'alive':>6}  scrollback min/max")
        try:
            while True:
                now = time.monotonic()
                t = now - start
                ingested = sum(s.terminal.bytes_out for s in sessions) / 1e6
                alive = sum(not s.ended for s in sessions)
                kept = [len(s.terminal.screen.scrollback) for s in sessions]
                if full_at is None and min(kept) >= limit:
                    full_at = t
                rss = rss_mb()
                if t >= warmup:
                    samples.append((t, rss))
                print(
                    f"{t / 60:6.1f} {rss:8.1f} {ingested:12.1f} {alive:6d}"
                    f"  {min(kept)}/{max(kept)}",
                    flush=True,
                )
                if now >= end:
                    break
                await asyncio.sleep(min(args.sample_seconds, max(0.0, end - time.monotonic())))
            ingested_bytes = sum(s.terminal.bytes_out for s in sessions)
            alive = sum(not s.ended and s.terminal.process.running for s in sessions)  # type: ignore[union-attr]
            observer_events = sum(len(s.observer.events) for s in sessions)
            history = sum(len(s.observer.tracker.history) for s in sessions)
            elapsed = time.monotonic() - start
        finally:
            await manager.close()
            drainer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await drainer
    growth = slope_per_hour(samples)
    after_full = [(t, m) for t, m in samples if full_at is not None and t >= full_at]
    growth_full = slope_per_hour(after_full)
    print(f"RSS after warm-up {samples[0][1]:.1f} MB, at the end {samples[-1][1]:.1f} MB")
    print(
        "growth (linear fit after warm-up): "
        + (f"{growth:+.1f} MB/hour over {len(samples)} samples" if growth is not None else "n/a")
    )
    if full_at is not None:
        print(
            f"every scrollback full ({limit} lines) at {full_at / 60:.1f} min; growth after that: "
            + (
                f"{growth_full:+.1f} MB/hour over {len(after_full)} samples"
                if growth_full is not None
                else "n/a (too few samples)"
            )
        )
    else:
        print("scrollbacks not full by the end")
    print(
        f"ingested {ingested_bytes / 1e6:.1f} MB in {elapsed / 60:.1f} min "
        f"({ingested_bytes / elapsed / 1e3:.1f} kB/s in all); sessions alive at the end "
        f"{alive}/{len(sessions)}"
    )
    print(
        f"bus events drained {sum(counts.values())} "
        f"({', '.join(f'{k} {v}' for k, v in counts.most_common())}); "
        f"kept in observer.events {observer_events}, in tracker.history {history}"
    )


# -- main ----------------------------------------------------------------------------------------


async def main_async(args: argparse.Namespace) -> None:
    header()
    parts = {"warm": run_warm, "cold": run_cold, "soak": run_soak}
    for name in args.only.split(",") if args.only else parts:
        await parts[name.strip()](args)
    print(f"\nload average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only", default="", help="warm, cold, soak (comma-separated); all if unset"
    )
    parser.add_argument("--prompts", type=int, default=50, help="warm: prompts per row")
    parser.add_argument("--agents", default="generic,claude", help="warm: generic, claude")
    parser.add_argument("--gap", type=float, default=0.2, help="seconds of quiet between rounds")
    parser.add_argument("--rounds", type=int, default=7, help="cold: timed rounds")
    parser.add_argument("--cold-warmup", type=int, default=1, help="cold: untimed rounds first")
    parser.add_argument("--sessions", type=int, default=20, help="soak: sessions")
    parser.add_argument("--soak-minutes", type=float, default=30.0, help="soak: after warm-up")
    parser.add_argument("--warmup-minutes", type=float, default=1.0, help="soak: not fitted")
    parser.add_argument("--sample-seconds", type=float, default=30.0, help="soak: RSS sampling")
    parser.add_argument("--signal-every", type=int, default=100, help="soak: Error: line every N")
    parser.add_argument("--turn-every", type=int, default=200, help="soak: prompt every N lines")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
