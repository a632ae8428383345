"""The real Claude Code CLI reports through semo's hooks.

The CLI runs offline (scripted Messages API) in semo's own PTY, in a git worktree where
:func:`install_hooks` put the hooks; the hook shim forwards each hook's JSON to a
:class:`HookServer` in the test's event loop. Checked: SessionStart, UserPromptSubmit with the
typed prompt, Stop whose ``last_assistant_message`` is exactly the scripted reply, SessionEnd,
and Notification on a permission dialog. The latency from the end of the scripted reply to the
Stop event is printed (run with ``-s`` to see it), never asserted.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

from semo.engine.agents.claude.settings import install_hooks
from semo.engine.protocol.hooks import HookEvent, HookServer, default_hook_command
from semo.engine.terminal.session import TerminalSession
from tests.support.claude_home import claude_argv, claude_env
from tests.support.claude_screen import prompt_ready, wait_screen
from tests.support.scripted_api import ScriptedMessagesAPI, ScriptedReply, ToolUse
from tests.support.temp_dirs import short_temp_dir

pytestmark = pytest.mark.claude

COLS, ROWS = 100, 30
STARTUP_TIMEOUT = 30.0
TURN_TIMEOUT = 30.0
SESSION_KEY = "office-test/BE"
MODULE_COMMAND = [sys.executable, "-m", "semo.engine.protocol.hook_shim"]


class StampedText:
    """A scripted reply text that notes when the stand-in starts sending it (the whole reply
    is then streamed at once, in well under a millisecond)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.sent_at: float | None = None  # time.monotonic()
        self.sent_wall: float | None = None  # time.time()

    def __call__(self, _body: dict[str, Any]) -> str:
        self.sent_at, self.sent_wall = time.monotonic(), time.time()
        return self.text


class Recorder:
    """Every event the server accepts, in order, with an awaitable "next one named X"."""

    def __init__(self) -> None:
        self.events: list[HookEvent] = []
        self._changed = asyncio.Event()
        self._seen = 0

    def __call__(self, event: HookEvent) -> None:
        self.events.append(event)
        self._changed.set()

    def names(self) -> list[str]:
        return [e.event for e in self.events]

    async def next(self, name: str, timeout: float) -> HookEvent:
        """The first event called ``name`` after the last one returned."""
        deadline = time.monotonic() + timeout
        while True:
            for i in range(self._seen, len(self.events)):
                if self.events[i].event == name:
                    self._seen = i + 1
                    return self.events[i]
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {name} hook within {timeout}s; got {self.names()}")
            self._changed.clear()
            with suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), left)


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    path = path.resolve()  # the CLI reports its cwd resolved
    if shutil.which("git"):
        git(path, "init", "-q", "-b", "main")
    (path / "CLAUDE.md").write_text("# Notes\n\nA test worktree.\n")
    return path


@pytest.fixture
def runtime_dir() -> Iterator[Path]:
    with short_temp_dir("semo-e2e-") as path:
        yield path


@asynccontextmanager
async def claude_with_hooks(
    worktree: Path, home: Path, api: ScriptedMessagesAPI, runtime_dir: Path
) -> AsyncIterator[tuple[TerminalSession, HookServer, Recorder]]:
    recorder = Recorder()
    async with HookServer(runtime_dir=runtime_dir, on_event=recorder) as server:
        server.register_session(SESSION_KEY)
        env = claude_env(worktree, home, api) | server.env_for(SESSION_KEY)
        session = TerminalSession(claude_argv(), cols=COLS, rows=ROWS, cwd=worktree, env=env)
        session.start()
        try:
            yield session, server, recorder
        finally:
            await session.close()
        assert not server.rejected, server.rejected


async def submit(session: TerminalSession, prompt: str) -> None:
    await session.send_keys(prompt)
    await wait_screen(session, lambda s: "❯ " + prompt in s, 10, "the typed prompt")
    await session.send_keys("<Enter>")


REPLIES = [
    "First reply: plain text.",
    "Second reply, several lines:\n\n- a list item with `code`\n- unicode ✓ é 漢字\n\n"
    "[ASK_USER]\n"
    '{"type": "choice", "question": "Which DB?", "options": ["postgres", "sqlite"]}\n'
    "[/ASK_USER]",
    "Third reply.\n\n[SEMO:DONE]",
]


@pytest.mark.parametrize("form", ["module", "file"])
async def test_hooks_report_session_prompts_and_exact_replies(
    tmp_path: Path, worktree: Path, runtime_dir: Path, form: str
) -> None:
    assert shutil.which("claude"), "the Claude Code CLI must be installed (scripts/test does it)"
    command = MODULE_COMMAND if form == "module" else default_hook_command()
    # The user's own Stop hook stays and runs next to ours; it notes when the CLI ran Stop hooks.
    stamps = tmp_path / "stop-times.txt"
    user_hook = {"type": "command", "command": f"date +%s.%N >> {shlex.quote(str(stamps))}"}
    settings = worktree / ".claude" / "settings.local.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [user_hook]}]}}))
    install_hooks(worktree, command)
    texts = [StampedText(r) for r in REPLIES]
    latencies: list[float] = []
    transits: list[float] = []

    with ScriptedMessagesAPI(replies=[ScriptedReply(t) for t in texts]) as api:
        async with claude_with_hooks(worktree, tmp_path / "home", api, runtime_dir) as (
            session,
            server,
            rec,
        ):
            start = await rec.next("SessionStart", STARTUP_TIMEOUT)
            assert start.session_key == SESSION_KEY
            assert start.payload["hook_event_name"] == "SessionStart"
            assert start.payload["source"] == "startup"
            assert start.payload["cwd"] == str(worktree)
            claude_session = start.payload.get("session_id")
            assert claude_session
            await wait_screen(session, prompt_ready, STARTUP_TIMEOUT, "the prompt")

            for n, text in enumerate(texts, 1):
                prompt = f"prompt number {n} for the hooks test"
                await submit(session, prompt)
                submitted = await rec.next("UserPromptSubmit", TURN_TIMEOUT)
                assert submitted.prompt == prompt
                assert submitted.payload.get("session_id") == claude_session
                try:
                    stop = await rec.next("Stop", TURN_TIMEOUT)
                except AssertionError as exc:
                    raise AssertionError(f"{exc}\n{api.describe()}") from None
                assert stop.last_assistant_message == text.text  # exact, no wrapping, no ANSI
                assert stop.payload["stop_hook_active"] is False
                assert stop.payload.get("session_id") == claude_session
                assert text.sent_at is not None
                latencies.append(stop.received_at - text.sent_at)
                assert stop.sent_at is not None
                transits.append(stop.received_wall.timestamp() - stop.sent_at)
                await wait_screen(session, prompt_ready, 10, "the prompt after the turn")

            await session.send_keys("<C-d>")
            await asyncio.sleep(0.3)
            await session.send_keys("<C-d>")
            end = await rec.next("SessionEnd", 15)
            assert end.payload["reason"] == "prompt_input_exit"
            await asyncio.wait_for(session.wait(), 15)

        assert rec.names()[0] == "SessionStart"
        assert rec.names().count("Stop") == len(REPLIES)
        assert server.accepted == len(rec.events)

    if shutil.which("git"):
        assert "settings.local.json" not in git(worktree, "status", "--porcelain", "-uall")
    # When the CLI ran its Stop hooks, seen by the user's `date` hook (same turn order).
    ran = [float(x) for x in stamps.read_text().split()]
    assert len(ran) == len(texts)
    cli = [r - t.sent_wall for r, t in zip(ran, texts, strict=True) if t.sent_wall]

    def ms(xs: list[float]) -> str:
        each = ", ".join(f"{x * 1000:.0f}" for x in xs)
        return f"median {statistics.median(xs) * 1000:.0f} ms ({each})"

    print(
        f"\n[hooks e2e, {form}] reply sent -> Stop event at the engine: {ms(latencies)}"
        f"\n    of which reply sent -> the CLI runs Stop hooks (user `date` hook): {ms(cli)}"
        f"\n    and shim sent -> engine received: {ms(transits)}"
    )


async def test_notification_on_a_permission_dialog_and_stop_after_a_tool(
    tmp_path: Path, worktree: Path, runtime_dir: Path
) -> None:
    """With permission mode ``default`` (kept from the user's settings by the merge), a Bash
    call asks first: the Notification hook fires (``permission_prompt``, about 6 s after the
    dialog appears in 2.1.328). After approval the tool runs, and Stop carries only the
    turn's *last* assistant message."""
    settings = worktree / ".claude" / "settings.local.json"
    settings.parent.mkdir()
    settings.write_text('{"permissions": {"defaultMode": "default"}}\n')
    install_hooks(worktree, default_hook_command())

    call = ToolUse("Bash", {"command": "touch made.txt", "description": "Make a file"})
    final = "Done: made.txt is there."
    replies = [ScriptedReply("Making the file.", tool_uses=(call,)), final]
    with ScriptedMessagesAPI(replies=replies) as api:
        async with claude_with_hooks(worktree, tmp_path / "home", api, runtime_dir) as (
            session,
            _server,
            rec,
        ):
            await rec.next("SessionStart", STARTUP_TIMEOUT)
            await wait_screen(session, prompt_ready, STARTUP_TIMEOUT, "the prompt")
            await submit(session, "make the file")
            await rec.next("UserPromptSubmit", TURN_TIMEOUT)
            await wait_screen(
                session, lambda s: "Do you want to proceed?" in s, TURN_TIMEOUT, "the dialog"
            )
            shown = time.monotonic()
            note = await rec.next("Notification", 30)
            assert note.payload["notification_type"] == "permission_prompt"
            assert isinstance(note.payload["message"], str) and note.payload["message"]
            assert "Stop" not in rec.names()  # the turn is not over: it waits for a human
            print(
                f"\n[hooks e2e] dialog on screen -> Notification: {note.received_at - shown:.2f} s"
            )

            await session.send_keys("<Enter>")  # "1. Yes" is selected
            stop = await rec.next("Stop", TURN_TIMEOUT)
            assert stop.last_assistant_message == final
            assert (worktree / "made.txt").exists()
