"""The real Claude Code CLI, run offline in tmux against the scripted Messages API.

This pins down the ground the e2e suite stands on: the CLI starts straight into its prompt (no
dialog), a typed prompt reaches the stand-in as a main-conversation request carrying the
worktree's CLAUDE.md, and the scripted reply is rendered on screen.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.claude_home import claude_argv, claude_env
from tests.support.claude_screen import prompt_ready
from tests.support.scripted_api import ScriptedMessagesAPI, ScriptedReply, ToolUse
from tests.support.waiting import wait_until

pytestmark = pytest.mark.claude

COLS, ROWS = 100, 30
STARTUP_TIMEOUT = 30.0
REPLY_TIMEOUT = 30.0


class Tmux:
    """A private tmux server (own socket, no user config) holding one pane."""

    def __init__(self, socket: str) -> None:
        self.socket = socket

    def socket_path(self) -> Path:
        tmpdir = os.environ.get("TMUX_TMPDIR") or "/tmp"
        return Path(tmpdir) / f"tmux-{os.getuid()}" / self.socket

    def __call__(self, *args: str, check: bool = True) -> str:
        proc = subprocess.run(
            ["tmux", "-L", self.socket, "-f", os.devnull, *args],
            capture_output=True,
            text=True,
            timeout=15,
            env={k: v for k, v in os.environ.items() if k != "TMUX"},  # works inside tmux too
        )
        if check and proc.returncode != 0:
            raise RuntimeError(f"tmux {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout

    def screen(self) -> str:
        """The visible pane as text, with U+00A0 read as a space (the CLI writes ``❯\xa0``)."""
        return self("capture-pane", "-p", "-t", "0", check=False).replace("\xa0", " ")

    def type(self, text: str) -> None:
        self("send-keys", "-t", "0", "-l", text)

    def press(self, *keys: str) -> None:
        self("send-keys", "-t", "0", *keys)

    def wait_screen(self, predicate: Callable[[str], bool], timeout: float, what: str) -> str:
        return wait_until(self.screen, what, timeout, until=predicate, interval=0.05)


@contextmanager
def claude_in_tmux(workdir: Path, env: dict[str, str]) -> Iterator[Tmux]:
    tmux = Tmux(f"semo-e2e-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    argv = ["env", "-i", *(f"{k}={v}" for k, v in env.items()), *claude_argv()]
    try:
        # One invocation: the options are set before the pane exists, so the CLI starts at
        # exactly COLS x ROWS (no status line, no resize after spawn).
        tmux(
            "start-server", ";",
            "set", "-g", "status", "off", ";",
            "set", "-g", "remain-on-exit", "on", ";",
            "new-session", "-d", "-x", str(COLS), "-y", str(ROWS), "-c", str(workdir), *argv,
        )  # fmt: skip
        yield tmux
    finally:
        tmux("kill-server", check=False)
        tmux.socket_path().unlink(missing_ok=True)  # tmux 3.3a leaves it behind


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def test_prompt_reaches_scripted_api_and_reply_renders(tmp_path: Path, workdir: Path) -> None:
    assert shutil.which("claude"), "the Claude Code CLI must be installed (scripts/test does it)"
    marker = f"semo-claude-md-{uuid.uuid4().hex[:12]}"
    (workdir / "CLAUDE.md").write_text(f"# Project notes\n\nThe project marker is {marker}.\n")
    reply = "Scripted reply: the stand-in answered."

    with ScriptedMessagesAPI(replies=[reply]) as api:
        env = claude_env(workdir, tmp_path / "home", api)
        with claude_in_tmux(workdir, env) as tmux:
            first = tmux.wait_screen(prompt_ready, STARTUP_TIMEOUT, "the prompt")
            assert "Claude Code" in first
            tmux.type("hello")
            tmux.wait_screen(lambda s: "❯ hello" in s, 10, "the typed prompt")
            tmux.press("Enter")
            try:
                screen = tmux.wait_screen(lambda s: reply in s, REPLY_TIMEOUT, "the reply")
            except AssertionError as exc:
                raise AssertionError(f"{exc}\nrequests:\n{api.describe()}") from None

        assert "● " + reply in screen
        mains = api.main_requests
        assert mains, f"no main-conversation request; requests:\n{api.describe()}"
        hello = [r for r in mains if "hello" in r.user_text()]
        assert hello, f"no main request carries the prompt; requests:\n{api.describe()}"
        request = hello[0]
        assert request.last_user_text().rstrip().endswith("hello")
        assert marker in request.body_text(), "CLAUDE.md text did not reach the model"
        assert marker in request.messages_text() + request.system_text()
        assert "authorization" not in request.headers
        assert request.headers.get("user-agent", "").startswith("claude-cli/")
        assert not api.exhausted, f"script ran out; requests:\n{api.describe()}"
        assert api.pending_replies == 0


def test_side_requests_do_not_consume_the_script(tmp_path: Path, workdir: Path) -> None:
    """With non-essential traffic allowed the CLI also asks for a session title (no tools,
    structured output); that must be answered aside while the scripted reply goes to the
    conversation."""
    reply = "Conversation reply, not a title."
    with ScriptedMessagesAPI(replies=[ScriptedReply(reply, chunk_size=4, chunk_delay=0.01)]) as api:
        env = claude_env(workdir, tmp_path / "home", api)
        del env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"]
        with claude_in_tmux(workdir, env) as tmux:
            tmux.wait_screen(prompt_ready, STARTUP_TIMEOUT, "the prompt")
            prompt = "Please explain how terminal multiplexers render panes"
            tmux.type(prompt)
            tmux.wait_screen(lambda s: "❯ " + prompt in s, 10, "the typed prompt")
            tmux.press("Enter")
            tmux.wait_screen(lambda s: reply in s, REPLY_TIMEOUT, "the reply")
            assert api.wait_for(lambda rs: any(r.kind == "side" for r in rs), 10), api.describe()

    side = api.side_requests
    assert all(r.reply_text != reply for r in side), api.describe()
    assert [r.reply_text for r in api.main_requests] == [reply], api.describe()
    assert not api.exhausted, api.describe()


def test_scripted_tool_call_runs_and_its_result_reaches_the_api(
    tmp_path: Path, workdir: Path
) -> None:
    """A scripted ``tool_use`` (auto mode, verdict ``not_flagged``) really runs in the worktree,
    and the next main request carries its ``tool_result``."""
    call = ToolUse(
        "Bash",
        {"command": "echo semo-was-here > marker.txt", "description": "Write a marker file"},
        id="toolu_semo_e2e_1",
    )
    done = "Marker written."
    replies = [ScriptedReply("Writing the marker.", tool_uses=(call,)), done]
    with ScriptedMessagesAPI(replies=replies) as api:
        env = claude_env(workdir, tmp_path / "home", api)
        with claude_in_tmux(workdir, env) as tmux:
            tmux.wait_screen(prompt_ready, STARTUP_TIMEOUT, "the prompt")
            tmux.type("write the marker")
            tmux.wait_screen(lambda s: "❯ write the marker" in s, 10, "the typed prompt")
            tmux.press("Enter")
            try:
                tmux.wait_screen(lambda s: done in s, REPLY_TIMEOUT, "the final reply")
            except AssertionError as exc:
                raise AssertionError(f"{exc}\nrequests:\n{api.describe()}") from None

    assert (workdir / "marker.txt").read_text() == "semo-was-here\n"
    mains = api.main_requests
    assert len(mains) == 2, api.describe()
    results = [
        block
        for message in mains[1].body["messages"]
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert [b["tool_use_id"] for b in results] == [call.id]
    assert not api.exhausted, api.describe()
