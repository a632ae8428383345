"""(Re)record the detection corpus from tests/corpus/scenarios.py.

    python -m tests.corpus.record [--only NAME ...] [--jobs N]

For each scenario it writes ``tests/corpus/<name>.cast`` and ``<name>.expected.json`` (the
scenario's hand-written expectation), and for Claude Code ``<name>.transcript.jsonl``.

Claude scenarios: the real ``claude`` CLI, offline against the scripted Messages API, in a
TerminalSession (recording asciicast v2) in a fresh git worktree where ``install_hooks`` put
semo's hooks; a HookServer receives them and each HookEvent is written into the cast, when it
arrives, as ``hook_marker(event, payload)``. ``transcript_path`` in those payloads is rewritten
to the copy of the transcript beside the cast (its conversation entries only). With several
turns, the k-th Stop (but the last) points at ``<name>.turn<k>.transcript.jsonl``: the
transcript cut before the next prompt, which is what the live engine read at that Stop.
The session ends with Ctrl-D (or is terminated while a dialog is open) and the cast ends
with ``exit_marker(code, signal)``. Right before the agent is shut down the cast gets an
``END_MARKER`` (``m`` event, ignored by replay): the scenario's ``final_state`` is the state
at that moment.

Generic scenarios: the scenario's Python program in a TerminalSession, no hooks.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from semo.engine.agents.claude.settings import install_hooks
from semo.engine.agents.replay import exit_marker, hook_marker
from semo.engine.protocol.hooks import HookEvent, HookServer, default_hook_command
from semo.engine.terminal.session import TerminalSession
from tests.corpus.check import END_MARKER
from tests.corpus.scenarios import BY_NAME, SCENARIOS, Scenario
from tests.support.claude_home import claude_argv, claude_env
from tests.support.claude_screen import prompt_ready, screen_text
from tests.support.scripted_api import ScriptedMessagesAPI
from tests.support.waiting import eventually

CORPUS = Path(__file__).resolve().parent
SESSION_KEY = "corpus/agent"
STARTUP_TIMEOUT = 40.0
TURN_TIMEOUT = 40.0
#: Transcript entries kept in the corpus copy: the conversation. Attachments and API request
#: records (Claude Code's system prompt, tool schemas: ~150 KiB a session) are dropped.
KEPT_ENTRIES = frozenset({"user", "assistant", "system"})


async def wait_screen(
    session: TerminalSession, predicate: Callable[[str], bool], timeout: float, what: str
) -> None:
    await eventually(
        lambda: screen_text(session),
        timeout,
        what=f"{what} on screen",
        until=predicate,
        interval=0.03,
    )


def idle_title(session: TerminalSession) -> bool:
    """Claude Code titles its window `✳ Claude Code` when idle (a spinner glyph when busy)."""
    return str(getattr(session.screen, "title", "")).startswith("✳")


class Hooks:
    """Writes each accepted hook into the cast as it arrives; lets the driver await them."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.session: TerminalSession | None = None
        self.events: list[HookEvent] = []
        self.transcript: str | None = None
        self.stops = 0
        self._changed = asyncio.Event()
        self._seen = 0

    def transcript_name(self, stop_index: int | None) -> str:
        last = sum(t.dialog != "hold" for t in self.scenario.turns)
        if stop_index is None or stop_index >= last:
            return f"{self.scenario.name}.transcript.jsonl"
        return f"{self.scenario.name}.turn{stop_index}.transcript.jsonl"

    def __call__(self, event: HookEvent) -> None:
        payload: dict[str, Any] = dict(event.payload)
        index = None
        if event.event == "Stop":
            self.stops += 1
            index = self.stops
        if isinstance(payload.get("transcript_path"), str):
            self.transcript = payload["transcript_path"]
            payload["transcript_path"] = self.transcript_name(index)
        recorder = self.session.recorder if self.session else None
        if recorder is not None and not recorder.closed:
            recorder.marker(hook_marker(event.event, payload))
        self.events.append(event)
        self._changed.set()

    async def next(self, name: str, timeout: float) -> HookEvent:
        deadline = time.monotonic() + timeout
        while True:
            for i in range(self._seen, len(self.events)):
                if self.events[i].event == name:
                    self._seen = i + 1
                    return self.events[i]
            left = deadline - time.monotonic()
            if left <= 0:
                got = [e.event for e in self.events]
                raise TimeoutError(f"no {name} hook within {timeout}s; got {got}")
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), left)


def _entry_type(raw: str) -> object:
    try:
        entry = json.loads(raw)
    except json.JSONDecodeError:
        return None
    return entry.get("type") if isinstance(entry, dict) else None


def _is_prompt_entry(raw: str) -> bool:
    try:
        entry = json.loads(raw)
    except json.JSONDecodeError:
        return False
    if not isinstance(entry, dict) or entry.get("isSidechain") or entry.get("type") != "user":
        return False
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return True
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "text" for b in content
    )


def copy_transcripts(hooks: Hooks, scenario: Scenario) -> None:
    for old in CORPUS.glob(f"{scenario.name}.*transcript.jsonl"):
        old.unlink()
    if hooks.transcript is None or not Path(hooks.transcript).exists():
        return
    lines = [
        line
        for line in Path(hooks.transcript).read_text(encoding="utf-8").splitlines(keepends=True)
        if _entry_type(line) in KEPT_ENTRIES
    ]
    (CORPUS / hooks.transcript_name(None)).write_text("".join(lines), encoding="utf-8")
    prompts = [i for i, line in enumerate(lines) if _is_prompt_entry(line)]
    for k in range(1, hooks.stops):
        if k < len(prompts):
            cut = "".join(lines[: prompts[k]])
            (CORPUS / hooks.transcript_name(k)).write_text(cut, encoding="utf-8")


async def record_claude(scenario: Scenario, cast: Path) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="semo-corpus-"))
    try:
        worktree = (tmp / "work").resolve()
        worktree.mkdir()
        git = ["git", "init", "-q", "-b", "main", str(worktree)]
        await asyncio.to_thread(subprocess.run, git, check=True)
        (worktree / "CLAUDE.md").write_text("# Notes\n\nA corpus worktree.\n")
        for rel, content in scenario.files.items():
            (worktree / rel).write_text(content)
        if scenario.permission_default:
            settings = worktree / ".claude" / "settings.local.json"
            settings.parent.mkdir()
            settings.write_text('{"permissions": {"defaultMode": "default"}}\n')
        install_hooks(worktree, default_hook_command())
        replies = [r for turn in scenario.turns for r in turn.replies]
        hooks = Hooks(scenario)
        with ScriptedMessagesAPI(replies=replies) as api:
            async with HookServer(runtime_dir=tmp / "rt", on_event=hooks) as server:
                server.register_session(SESSION_KEY)
                env = claude_env(worktree, tmp / "home", api) | server.env_for(SESSION_KEY)
                session = TerminalSession(
                    claude_argv(),
                    cols=scenario.cols,
                    rows=scenario.rows,
                    cwd=worktree,
                    env=env,
                    record=cast,
                )
                hooks.session = session
                session.start()
                try:
                    await _drive_claude(scenario, session, hooks)
                finally:
                    if session.process is not None and session.process.running:
                        await session.process.terminate(2.0)
                    if session.recorder is not None:
                        session.recorder.close()
                if server.rejected:
                    raise RuntimeError(f"hooks rejected: {dict(server.rejected)}")
            if api.exhausted:
                raise RuntimeError(f"script ran out:\n{api.describe()}")
        copy_transcripts(hooks, scenario)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


async def _drive_claude(scenario: Scenario, session: TerminalSession, hooks: Hooks) -> None:
    await hooks.next("SessionStart", STARTUP_TIMEOUT)
    await wait_screen(session, prompt_ready, STARTUP_TIMEOUT, "the prompt")
    await session.wait_quiet(0.3, 3)
    for turn in scenario.turns:
        await session.send_keys(turn.prompt)
        await wait_screen(session, lambda s, p=turn.prompt: "❯ " + p in s, 10, "the prompt")
        await session.send_keys("<Enter>")
        await hooks.next("UserPromptSubmit", TURN_TIMEOUT)
        if turn.dialog is not None:
            await wait_screen(
                session, lambda s: "Do you want to proceed?" in s, TURN_TIMEOUT, "the dialog"
            )
            await asyncio.sleep(1.0)
            if turn.dialog == "hold":  # the state now is what the scenario expects
                await _end(session, terminate=True)
                return
            await session.send_keys("<Enter>")
        await hooks.next("Stop", TURN_TIMEOUT)
        # The Stop hook runs before the CLI draws the reply: wait for the idle title (the
        # input box is on screen all along) and a quiet screen.
        await wait_screen(session, lambda _s: idle_title(session), 10, "the idle title")
        await wait_screen(session, prompt_ready, 10, "the prompt after the turn")
        await session.wait_quiet(0.5, 3)
    session.recorder.marker(END_MARKER)  # type: ignore[union-attr]
    await session.send_keys("<C-d>")
    await asyncio.sleep(0.3)
    await session.send_keys("<C-d>")
    await hooks.next("SessionEnd", 15)
    await _end(session, terminate=False, marked=True)


async def _end(session: TerminalSession, *, terminate: bool, marked: bool = False) -> None:
    assert session.process is not None and session.recorder is not None
    if not marked:
        session.recorder.marker(END_MARKER)
    if terminate:
        status = await session.process.terminate(2.0)
    else:
        status = await asyncio.wait_for(session.wait(), 15)
    assert status is not None
    session.recorder.marker(exit_marker(status.code, status.signal))
    session.recorder.close()


async def record_generic(scenario: Scenario, cast: Path) -> None:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "PYTHONIOENCODING": "utf-8",
    }
    session = TerminalSession(
        ["python3", "-u", "-c", scenario.program],
        cols=scenario.cols,
        rows=scenario.rows,
        env=env,
        record=cast,
    )
    session.start()
    try:  # the program ends by itself: no END_MARKER, final_state is the state at its exit
        await _end(session, terminate=False, marked=True)
    finally:
        await session.close()


async def record(scenario: Scenario) -> float:
    started = time.monotonic()
    cast = CORPUS / f"{scenario.name}.cast"
    if scenario.agent == "claude":
        await record_claude(scenario, cast)
    else:
        await record_generic(scenario, cast)
    expected = CORPUS / f"{scenario.name}.expected.json"
    expected.write_text(
        json.dumps(scenario.expected_json(), indent=2, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    return time.monotonic() - started


async def main_async(names: list[str], jobs: int, retries: int) -> int:
    gate = asyncio.Semaphore(jobs)
    failed: list[str] = []

    async def one(scenario: Scenario) -> None:
        async with gate:
            for attempt in range(1, retries + 2):
                try:
                    took = await record(scenario)
                except Exception as exc:  # report, retry, and carry on with the others
                    print(f"FAIL {scenario.name} (attempt {attempt}): {exc}", flush=True)
                    continue
                size = (CORPUS / f"{scenario.name}.cast").stat().st_size
                print(f"ok   {scenario.name:32} {took:5.1f} s  {size / 1024:6.1f} KiB", flush=True)
                return
            failed.append(scenario.name)

    await asyncio.gather(*(one(BY_NAME[n]) for n in names))
    if failed:
        print(f"{len(failed)} failed: {' '.join(failed)}")
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="record only these scenarios")
    parser.add_argument("--jobs", type=int, default=3, help="scenarios recorded at once")
    parser.add_argument("--retries", type=int, default=1)
    args = parser.parse_args()
    names = args.only or [s.name for s in SCENARIOS]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(unknown)}")
    if any(BY_NAME[n].agent == "claude" for n in names) and not shutil.which("claude"):
        parser.error("the claude CLI is not on PATH (scripts/test installs it)")
    return asyncio.run(main_async(names, args.jobs, args.retries))


if __name__ == "__main__":
    sys.exit(main())
