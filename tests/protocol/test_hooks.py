"""Claude Code hooks: settings merge, git exclude, the hook socket server and the shim."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from semo.engine.agents.claude import ClaudeAdapter
from semo.engine.agents.claude.settings import SETTINGS_RELPATH, HookSettingsError, install_hooks
from semo.engine.agents.gitexclude import ensure_git_exclude
from semo.engine.logs import ThrottledWarnings
from semo.engine.protocol import hook_shim
from semo.engine.protocol.hooks import (
    HOOK_EVENTS,
    MAX_MESSAGE_BYTES,
    HookEvent,
    HookServer,
    HookServerError,
    default_hook_command,
    hook_command_line,
    is_semo_hook_command,
)
from tests.support.git_repo import git
from tests.support.git_repo import make_repo as new_repo
from tests.support.temp_dirs import short_temp_dir

MODULE_COMMAND = [sys.executable, "-m", "semo.engine.protocol.hook_shim"]


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def our_commands(settings: dict[str, Any], event: str) -> list[str]:
    return [
        hook["command"]
        for group in settings["hooks"].get(event, [])
        for hook in group["hooks"]
        if is_semo_hook_command(hook.get("command"))
    ]


# -- settings.local.json ----------------------------------------------------------------------


def test_install_into_a_fresh_worktree(tmp_path: Path) -> None:
    path = install_hooks(tmp_path, MODULE_COMMAND)
    assert path == tmp_path / ".claude" / "settings.local.json"
    settings = read_json(path)
    assert list(settings) == ["hooks"]
    assert list(settings["hooks"]) == list(HOOK_EVENTS)
    for event in HOOK_EVENTS:
        [group] = settings["hooks"][event]
        assert "matcher" not in group  # every occurrence of the event
        [hook] = group["hooks"]
        assert hook["type"] == "command"
        assert hook["command"] == hook_command_line(MODULE_COMMAND, event)
        assert hook["command"].endswith(f"semo.engine.protocol.hook_shim {event}")
        assert isinstance(hook["timeout"], int)
    assert not [p for p in path.parent.iterdir() if p.name != path.name]  # no temp file left


def test_command_is_shell_quoted(tmp_path: Path) -> None:
    command = ["/opt/my tools/python", "-m", "semo.engine.protocol.hook_shim"]
    settings = read_json(install_hooks(tmp_path, command, events=["Stop"]))
    [line] = our_commands(settings, "Stop")
    assert line == "'/opt/my tools/python' -m semo.engine.protocol.hook_shim Stop"


def test_existing_settings_and_user_hooks_are_kept(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.local.json"
    path.parent.mkdir()
    user_stop = {"hooks": [{"type": "command", "command": "notify-send done"}]}
    user_bash = {"matcher": "Bash", "hooks": [{"type": "command", "command": "audit.sh"}]}
    original = {
        "model": "sonnet",
        "permissions": {"allow": ["Bash(npm test:*)"], "defaultMode": "default"},
        "hooks": {"Stop": [user_stop], "PreToolUse": [user_bash]},
        "env": {"FOO": "bar"},
    }
    path.write_text(json.dumps(original, indent=4))
    install_hooks(tmp_path, MODULE_COMMAND)
    settings = read_json(path)
    assert list(settings) == ["model", "permissions", "hooks", "env"]  # order kept
    for key in ("model", "permissions", "env"):
        assert settings[key] == original[key]
    assert settings["hooks"]["PreToolUse"] == [user_bash]
    assert settings["hooks"]["Stop"][0] == user_stop  # the user's hook first, ours after
    assert our_commands(settings, "Stop") == [hook_command_line(MODULE_COMMAND, "Stop")]
    assert list(settings["hooks"]) == ["Stop", "PreToolUse", *HOOK_EVENTS[:2], *HOOK_EVENTS[3:]]


def test_install_is_idempotent_and_replaces_only_our_entries(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.local.json"
    path.parent.mkdir()
    shared = {
        "hooks": [
            {"type": "command", "command": "say stopped"},
            {"type": "command", "command": "/usr/local/bin/semo hook Stop"},  # an old one of ours
        ]
    }
    path.write_text(json.dumps({"hooks": {"Stop": [shared]}}))

    install_hooks(tmp_path, MODULE_COMMAND)
    first = path.read_text()
    inode = path.stat().st_ino
    install_hooks(tmp_path, MODULE_COMMAND)
    assert path.read_text() == first
    assert path.stat().st_ino == inode  # nothing changed, nothing written

    settings = read_json(path)
    assert settings["hooks"]["Stop"][0] == {
        "hooks": [{"type": "command", "command": "say stopped"}]
    }
    for event in HOOK_EVENTS:
        assert our_commands(settings, event) == [hook_command_line(MODULE_COMMAND, event)]

    # Switching to another form of the shim replaces ours, never duplicates them.
    install_hooks(tmp_path, ["semo", "hook"])
    settings = read_json(path)
    for event in HOOK_EVENTS:
        assert our_commands(settings, event) == [f"semo hook {event}"]
    assert settings["hooks"]["Stop"][0]["hooks"] == [{"type": "command", "command": "say stopped"}]

    # A shorter event list removes our hooks from the events no longer wanted.
    install_hooks(tmp_path, default_hook_command(), events=["Stop"])
    settings = read_json(path)
    assert set(settings["hooks"]) == {"Stop"}
    assert len(our_commands(settings, "Stop")) == 1


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ('{"hooks": {"Stop": [}', "not valid JSON"),
        ('{"hooks": ' + "[" * 100_000, "JSON nested deeper than 64 levels"),
        ("[1, 2]", "expected a JSON object"),
        ('{"hooks": []}', '"hooks" must be a JSON object'),
        ('{"hooks": {"Stop": {"command": "x"}}}', '"hooks.Stop" must be a JSON array'),
    ],
)
def test_malformed_settings_are_an_error_and_left_alone(
    tmp_path: Path, content: str, why: str
) -> None:
    path = tmp_path / ".claude" / "settings.local.json"
    path.parent.mkdir()
    path.write_text(content)
    with pytest.raises(HookSettingsError) as info:
        install_hooks(tmp_path, MODULE_COMMAND)
    assert str(path) in str(info.value)
    assert why in str(info.value)
    assert path.read_text() == content
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_empty_settings_file_is_taken_as_no_settings(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.local.json"
    path.parent.mkdir()
    path.write_text("\n")
    install_hooks(tmp_path, MODULE_COMMAND)
    assert list(read_json(path)["hooks"]) == list(HOOK_EVENTS)


def test_existing_file_mode_is_kept(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.local.json"
    path.parent.mkdir()
    path.write_text("{}")
    path.chmod(0o600)
    install_hooks(tmp_path, MODULE_COMMAND)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.parametrize(
    ("command", "ours"),
    [
        ("semo hook Stop", True),
        ("/home/u/.local/bin/semo hook Notification", True),
        ("'/x y/python' -m semo.engine.protocol.hook_shim Stop", True),
        ("/usr/bin/python3 -I -S /srv/semo/engine/protocol/hook_shim.py Stop", True),
        # written by an install from before the `semo.` package: rewritten on the next start
        ("/usr/bin/python3 -m engine.protocol.hook_shim Stop", True),
        ("/usr/bin/python3 -I -S /srv/engine/protocol/hook_shim.py Stop", True),
        ("semo hooks-report", False),
        ("notify-send semo", False),
        ("echo 'semo hook' >> log", False),
        ("python -m semo.engine.protocol.hooks", False),
        (None, False),
    ],
)
def test_which_commands_are_ours(command: str | None, ours: bool) -> None:
    assert is_semo_hook_command(command) is ours


# -- git exclude --------------------------------------------------------------------------


def make_repo(path: Path) -> Path:
    return new_repo(path, {"README": "x\n"}, author_in_config=True)


needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@needs_git
def test_settings_are_excluded_from_git(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    install_hooks(repo, MODULE_COMMAND)
    exclude = repo / ".git" / "info" / "exclude"
    lines = exclude.read_text().splitlines()
    assert lines.count("/.claude/settings.local.json") == 1
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    install_hooks(repo, MODULE_COMMAND)  # idempotent
    assert exclude.read_text().splitlines() == lines


@needs_git
def test_exclude_goes_to_the_common_dir_for_a_linked_worktree(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    linked = tmp_path / "wt-fe"
    git(repo, "worktree", "add", "-q", "-b", "fe", str(linked))
    exclude = ensure_git_exclude(linked, SETTINGS_RELPATH)
    assert exclude is not None
    assert exclude.resolve() == (repo / ".git" / "info" / "exclude").resolve()
    install_hooks(linked, MODULE_COMMAND)
    assert git(linked, "status", "--porcelain", "--untracked-files=all") == ""


@needs_git
def test_exclude_pattern_is_anchored_at_the_top_level(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    sub = repo / "services" / "api"
    sub.mkdir(parents=True)
    install_hooks(sub, MODULE_COMMAND)
    exclude = (repo / ".git" / "info" / "exclude").read_text()
    assert "/services/api/.claude/settings.local.json" in exclude.splitlines()
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""


def test_no_git_repository_no_exclude(tmp_path: Path) -> None:
    assert ensure_git_exclude(tmp_path, SETTINGS_RELPATH) is None
    install_hooks(tmp_path, MODULE_COMMAND)  # still installs


# -- the hook server ----------------------------------------------------------------------


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A short directory for sockets (pytest's tmp_path can exceed the AF_UNIX path limit)."""
    with short_temp_dir("semo-h-") as path:
        yield path


@pytest.fixture
async def server(short_dir: Path) -> Any:
    srv = HookServer(runtime_dir=short_dir / "rt", warn_interval=0)  # every rejection logged
    await srv.start()
    try:
        yield srv
    finally:
        await srv.close()


async def request(path: Path, data: bytes, *, half_close: bool = False) -> dict[str, Any]:
    """Send raw bytes, return the server's JSON answer (the connection is then closed)."""
    reader, writer = await asyncio.open_unix_connection(str(path))
    try:
        writer.write(data)
        if half_close:
            writer.write_eof()
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), 5)
        assert await asyncio.wait_for(reader.read(), 5) == b""  # then the server hangs up
        return json.loads(line)
    finally:
        writer.close()


def line(message: Any) -> bytes:
    return json.dumps(message).encode() + b"\n"


STOP_PAYLOAD = {
    "session_id": "9673d968-fd2b-43a4-9241-6effcb67657d",
    "hook_event_name": "Stop",
    "stop_hook_active": False,
    "last_assistant_message": "Line one.\n\n[SEMO:DONE]",
}


async def test_server_accepts_a_valid_event(server: HookServer) -> None:
    token = server.register_session("office1/BE")
    env = server.env_for("office1/BE")
    assert env == {"SEMO_HOOK_SOCKET": str(server.path), "SEMO_HOOK_TOKEN": token}
    assert stat.S_IMODE(os.stat(server.path.parent).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(server.path).st_mode) == 0o600

    before = time.monotonic()
    answer = await request(
        server.path, line({"token": token, "event": "Stop", "payload": STOP_PAYLOAD})
    )
    assert answer == {"ok": True}
    assert server.events is not None
    event = server.events.get_nowait()
    assert isinstance(event, HookEvent)
    assert (event.session_key, event.event, event.payload) == ("office1/BE", "Stop", STOP_PAYLOAD)
    assert event.last_assistant_message == "Line one.\n\n[SEMO:DONE]"
    assert ClaudeAdapter().conversation_id(event.payload) == STOP_PAYLOAD["session_id"]
    assert before <= event.received_at <= time.monotonic()
    assert event.received_wall.tzinfo is not None
    assert server.accepted == 1
    assert not server.rejected

    # The end of the stream ends a request as well as a newline does.
    answer = await request(
        server.path,
        json.dumps({"token": token, "event": "SessionEnd", "payload": {}}).encode(),
        half_close=True,
    )
    assert answer == {"ok": True}
    assert server.events.get_nowait().event == "SessionEnd"


async def test_callback_gets_events_and_its_failure_does_not_break_the_server(
    short_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[HookEvent] = []

    def on_event(event: HookEvent) -> None:
        seen.append(event)
        if len(seen) == 1:
            raise RuntimeError("consumer bug")

    async with HookServer(runtime_dir=short_dir, on_event=on_event) as srv:
        assert srv.events is None  # no queue unless asked for
        token = srv.register_session("s")
        for event in ("SessionStart", "UserPromptSubmit"):
            msg = {"token": token, "event": event, "payload": {"hook_event_name": event}}
            assert await request(srv.path, line(msg)) == {"ok": True}
    assert [e.event for e in seen] == ["SessionStart", "UserPromptSubmit"]
    assert "consumer bug" in caplog.text


async def reject(
    server: HookServer, data: bytes, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="semo.hooks")
    answer = await request(server.path, data)
    assert answer == {"ok": False, "error": reason}
    assert server.rejected[reason] == 1
    assert server.accepted == 0
    assert server.events is not None and server.events.empty()
    records = [r for r in caplog.records if r.name == "semo.hooks"]
    assert any(reason in r.getMessage() for r in records)


async def test_forged_token_is_rejected(
    server: HookServer, caplog: pytest.LogCaptureFixture
) -> None:
    real = server.register_session("s")
    forged = "forged-" + real[7:]
    msg = {"token": forged, "event": "Stop", "payload": STOP_PAYLOAD}
    await reject(server, line(msg), "bad_token", caplog)
    assert forged not in caplog.text and real not in caplog.text  # tokens never logged
    assert f"pid {os.getpid()}" in caplog.text  # who tried, where the OS tells


async def test_missing_token_is_rejected(
    server: HookServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.register_session("s")
    await reject(server, line({"event": "Stop", "payload": STOP_PAYLOAD}), "missing_token", caplog)


async def test_empty_token_is_rejected(
    server: HookServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.register_session("s")
    msg = {"token": "", "event": "Stop", "payload": {}}
    await reject(server, line(msg), "missing_token", caplog)


@pytest.mark.parametrize(
    "data",
    [
        b'{"token": "abc", "event": "Stop", "payload": {\n',
        b"not json\n",
        b"[1, 2]\n",
        b"\xff\xfe\n",
    ],
)
async def test_malformed_json_is_rejected(
    server: HookServer, caplog: pytest.LogCaptureFixture, data: bytes
) -> None:
    server.register_session("s")
    await reject(server, data, "malformed_json", caplog)


async def test_unknown_event_is_rejected(
    server: HookServer, caplog: pytest.LogCaptureFixture
) -> None:
    token = server.register_session("s")
    msg = {"token": token, "event": "PreToolUse", "payload": {}}
    await reject(server, line(msg), "unknown_event", caplog)


async def test_payload_must_be_an_object_of_the_same_event(
    server: HookServer, caplog: pytest.LogCaptureFixture
) -> None:
    token = server.register_session("s")
    await reject(
        server, line({"token": token, "event": "Stop", "payload": []}), "bad_payload", caplog
    )
    msg = {"token": token, "event": "Stop", "payload": {"hook_event_name": "SessionStart"}}
    assert await request(server.path, line(msg)) == {"ok": False, "error": "event_mismatch"}


async def test_oversize_message_is_rejected(
    server: HookServer, caplog: pytest.LogCaptureFixture
) -> None:
    token = server.register_session("s")
    head = json.dumps({"token": token, "event": "Stop", "payload": {"x": ""}})[:-3]
    fits = MAX_MESSAGE_BYTES - len(head) - 3
    exact = (head + "x" * fits + '"}}').encode()
    assert len(exact) == MAX_MESSAGE_BYTES
    assert await request(server.path, exact + b"\n") == {"ok": True}  # the limit itself is fine
    server.accepted = 0
    assert server.events is not None
    server.events.get_nowait()

    over = (head + "x" * (fits + 1) + '"}}').encode()
    await reject(server, over + b"\n", "oversize", caplog)
    server.rejected.clear()
    caplog.clear()
    # A sender that never sends a newline is cut off at the limit, not read forever.
    await reject(server, b"{" + b" " * (3 * MAX_MESSAGE_BYTES), "oversize", caplog)


async def test_a_peer_of_another_uid_is_refused(short_dir: Path) -> None:
    """SO_PEERCRED: only the allowed uids (default: the engine's own) may send hooks."""
    async with HookServer(runtime_dir=short_dir, allowed_uids=[os.getuid() + 1]) as srv:
        token = srv.register_session("s")
        reader, writer = await asyncio.open_unix_connection(str(srv.path))
        writer.write(line({"token": token, "event": "Stop", "payload": {}}))
        with contextlib.suppress(ConnectionResetError):  # what was sent is never read
            assert await asyncio.wait_for(reader.read(), 5) == b""  # closed without a word
        writer.close()
        assert srv.rejected["foreign_peer"] == 1 and srv.accepted == 0


def test_warnings_are_one_line_per_kind_per_interval_with_a_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger("semo.hooks.test")
    caplog.set_level(logging.WARNING, logger=logger.name)
    warnings = ThrottledWarnings(logger, interval=3600)
    for _ in range(5):
        warnings.warning("timeout", "rejected hook message: timeout")
    warnings.warning("bad_token", "rejected hook message: bad_token")
    assert [r.getMessage() for r in caplog.records] == [
        "rejected hook message: timeout",
        "rejected hook message: bad_token",
    ]
    warnings.interval = 0  # the interval has passed: the next line says what was left out
    warnings.warning("timeout", "rejected hook message: timeout")
    assert (
        caplog.records[-1]
        .getMessage()
        .startswith("rejected hook message: timeout (4 more like it in the last")
    )


async def test_slow_sender_times_out(short_dir: Path) -> None:
    async with HookServer(runtime_dir=short_dir, read_timeout=0.2) as srv:
        srv.register_session("s")
        answer = await request(srv.path, b'{"token": ')
        assert answer == {"ok": False, "error": "timeout"}
        assert srv.rejected["timeout"] == 1


async def test_unregister_and_reregister(server: HookServer) -> None:
    old = server.register_session("s")
    new = server.register_session("s")  # a restarted session gets a new token
    assert new != old
    msg = {"token": old, "event": "Stop", "payload": {}}
    assert await request(server.path, line(msg)) == {"ok": False, "error": "bad_token"}
    msg["token"] = new
    assert await request(server.path, line(msg)) == {"ok": True}
    server.unregister("s")
    assert await request(server.path, line(msg)) == {"ok": False, "error": "bad_token"}
    with pytest.raises(KeyError):
        server.env_for("s")
    with pytest.raises(ValueError):
        server.register_session("s", token='short"one')


async def test_engine_restart_on_the_same_path(short_dir: Path) -> None:
    path = short_dir / "hooks.sock"
    first = HookServer(path)
    await first.start()
    token = first.register_session("s")
    msg = line({"token": token, "event": "Stop", "payload": {}})
    assert await request(path, msg) == {"ok": True}

    # A second engine on the same path while the first is alive is refused.
    with pytest.raises(HookServerError, match="in use"):
        await HookServer(path).start()
    assert await request(path, msg) == {"ok": True}

    await first.close()
    assert not path.exists()
    with pytest.raises(OSError):
        await request(path, msg)

    second = HookServer(path)
    await second.start()
    try:
        # The old token means nothing to the new engine unless it adopts it.
        assert await request(path, msg) == {"ok": False, "error": "bad_token"}
        second.register_session("s", token=token)
        assert await request(path, msg) == {"ok": True}
    finally:
        await second.close()


async def test_stale_socket_of_a_dead_engine_is_replaced(short_dir: Path) -> None:
    path = short_dir / "hooks.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))  # what a killed engine leaves: a socket file nobody listens on
    dead.close()
    assert stat.S_ISSOCK(os.lstat(path).st_mode)
    async with HookServer(path) as srv:
        token = srv.register_session("s")
        assert await request(path, line({"token": token, "event": "Stop", "payload": {}})) == {
            "ok": True
        }


async def test_non_socket_file_at_the_path_is_not_replaced(short_dir: Path) -> None:
    path = short_dir / "hooks.sock"
    path.write_text("precious")
    with pytest.raises(HookServerError, match="not a socket"):
        await HookServer(path).start()
    assert path.read_text() == "precious"


async def test_close_removes_only_its_own_socket(short_dir: Path) -> None:
    path = short_dir / "hooks.sock"
    srv = HookServer(path)
    await srv.start()
    path.unlink()  # someone removed it and another engine took the path
    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    other.bind(str(path))
    try:
        await srv.close()
        assert path.exists()
    finally:
        other.close()


def test_socket_path_length_is_checked(short_dir: Path) -> None:
    with pytest.raises(HookServerError, match="AF_UNIX"):
        HookServer(short_dir / ("d" * 120) / "hooks.sock")


async def test_runtime_dir_is_made_private(short_dir: Path) -> None:
    runtime = short_dir / "rt"
    runtime.mkdir(mode=0o755)
    runtime.chmod(0o755)
    async with HookServer(runtime_dir=runtime):
        assert stat.S_IMODE(runtime.stat().st_mode) == 0o700


# -- the shim -------------------------------------------------------------------------------


def run_shim(
    event: str,
    stdin: bytes,
    env: dict[str, str],
    command: list[str] | None = None,
    timeout: float = 10,
) -> tuple[subprocess.CompletedProcess[bytes], float]:
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    started = time.monotonic()
    proc = subprocess.run(
        [*(command or default_hook_command()), event],
        input=stdin,
        env=base | env,
        capture_output=True,
        timeout=timeout,
    )
    return proc, time.monotonic() - started


@pytest.mark.parametrize("form", ["file", "module"])
async def test_shim_forwards_the_hook_json(server: HookServer, form: str) -> None:
    server.register_session("s")
    stdin = json.dumps(STOP_PAYLOAD).encode()
    command = default_hook_command() if form == "file" else MODULE_COMMAND
    proc, _ = await asyncio.to_thread(run_shim, "Stop", stdin, server.env_for("s"), command)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b""  # Claude Code would show stdout to the model
    assert proc.stderr == b""
    assert server.events is not None
    event = server.events.get_nowait()
    assert (event.event, event.payload) == ("Stop", STOP_PAYLOAD)
    assert event.sent_at is not None and abs(event.sent_at - time.time()) < 30


async def test_shim_forwards_pretty_printed_and_unicode_json(server: HookServer) -> None:
    server.register_session("s")
    payload = {"hook_event_name": "UserPromptSubmit", "prompt": 'héllo "quoted"\nline 2 ✓'}
    stdin = json.dumps(payload, indent=2, ensure_ascii=False).encode()
    proc, _ = await asyncio.to_thread(run_shim, "UserPromptSubmit", stdin, server.env_for("s"))
    assert proc.returncode == 0, proc.stderr
    assert server.events is not None
    assert server.events.get_nowait().payload == payload


async def test_shim_shrinks_an_oversize_payload(server: HookServer) -> None:
    server.register_session("s")
    payload = {"hook_event_name": "Stop", "session_id": "x", "last_assistant_message": "y" * 2**21}
    proc, _ = await asyncio.to_thread(
        run_shim, "Stop", json.dumps(payload).encode(), server.env_for("s")
    )
    assert proc.returncode == 0, proc.stderr
    assert server.events is not None
    event = server.events.get_nowait()
    assert event.payload == {
        "hook_event_name": "Stop",
        "session_id": "x",
        "semo_dropped_fields": ["last_assistant_message"],
    }


async def test_shim_reports_a_refusal_on_stderr_and_exits_0(server: HookServer) -> None:
    server.register_session("s")
    env = server.env_for("s") | {"SEMO_HOOK_TOKEN": "not-the-token"}
    proc, _ = await asyncio.to_thread(run_shim, "Stop", b"{}", env)
    assert proc.returncode == 0
    assert proc.stdout == b""
    assert b"bad_token" in proc.stderr
    assert b"not-the-token" not in proc.stderr
    assert server.rejected["bad_token"] == 1


def test_shim_with_the_engine_down_exits_0_fast(short_dir: Path) -> None:
    missing = {"SEMO_HOOK_SOCKET": str(short_dir / "gone.sock"), "SEMO_HOOK_TOKEN": "t0k"}
    proc, elapsed = run_shim("Stop", json.dumps(STOP_PAYLOAD).encode(), missing)
    assert proc.returncode == 0
    assert proc.stdout == b""
    assert b"engine not reachable" in proc.stderr
    assert elapsed < 1.5, elapsed  # no ack timeout to sit out: the connect fails at once

    stale = short_dir / "stale.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(stale))
    dead.close()
    proc, elapsed = run_shim("Stop", b"{}", {**missing, "SEMO_HOOK_SOCKET": str(stale)})
    assert proc.returncode == 0
    assert b"engine not reachable" in proc.stderr
    assert elapsed < 1.5, elapsed


def test_shim_gives_up_on_a_hung_engine_after_its_timeout(short_dir: Path) -> None:
    path = short_dir / "hung.sock"
    hung = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    hung.bind(str(path))
    hung.listen(4)  # accepts connections (backlog), never answers
    try:
        env = {"SEMO_HOOK_SOCKET": str(path), "SEMO_HOOK_TOKEN": "t0k"}
        proc, elapsed = run_shim("Stop", b"{}", env)
    finally:
        hung.close()
    assert proc.returncode == 0
    assert b"engine not reachable" in proc.stderr
    assert hook_shim.ACK_TIMEOUT <= elapsed < hook_shim.ACK_TIMEOUT + 3


def test_shim_waits_while_the_engines_backlog_is_full(short_dir: Path) -> None:
    """A flood fills the socket's backlog: connect fails with EAGAIN at once (not a wait, for a
    socket with a timeout); the shim tries again until its deadline instead of giving up."""
    import threading

    path = short_dir / "busy.sock"
    busy = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    busy.bind(str(path))
    busy.listen(0)
    fillers = []
    while True:  # fill the backlog
        filler = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        filler.setblocking(False)
        try:
            filler.connect(str(path))
        except BlockingIOError:
            filler.close()
            break
        fillers.append(filler)
    said: list[bytes] = []

    def engine() -> None:
        time.sleep(0.3)  # the shim is meanwhile refused by the full backlog
        for _ in fillers:
            busy.accept()[0].close()
        conn, _ = busy.accept()
        with conn:
            conn.settimeout(5)
            said.append(conn.recv(1 << 16))
            conn.sendall(b'{"ok": true}\n')

    thread = threading.Thread(target=engine)
    thread.start()
    try:
        env = {"SEMO_HOOK_SOCKET": str(path), "SEMO_HOOK_TOKEN": "t0k-is-enough"}
        proc, _ = run_shim("Stop", b'{"a": 1}', env)
    finally:
        thread.join(10)
        busy.close()
        for filler in fillers:
            filler.close()
    assert proc.returncode == 0 and proc.stderr == b""
    assert said and b'"event":"Stop"' in said[0]


def test_shim_without_env_exits_0_at_once() -> None:
    started = time.monotonic()
    proc = subprocess.Popen(
        [*default_hook_command(), "Stop"],
        stdin=subprocess.PIPE,  # left open: the shim must not wait for it
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    try:
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.stdin:
            proc.stdin.close()
    assert proc.returncode == 0
    assert (out, err) == (b"", b"")
    assert time.monotonic() - started < 1.5


def test_shim_main_never_raises_on_bad_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEMO_HOOK_SOCKET", "/nonexistent/x.sock")
    monkeypatch.setenv("SEMO_HOOK_TOKEN", "t0k")
    assert hook_shim.main([]) == 0
    assert hook_shim.main(["Stop; rm -rf /"]) == 0
    monkeypatch.setenv("SEMO_HOOK_TOKEN", 'bad"token')
    assert hook_shim.main(["Stop"]) == 0


def test_shim_imports_nothing_heavy(short_dir: Path) -> None:
    """Only a handful of standard modules beyond the interpreter's own start-up."""
    env = {"SEMO_HOOK_SOCKET": str(short_dir / "gone.sock"), "SEMO_HOOK_TOKEN": "t0k"}
    command = [default_hook_command()[0], "-X", "importtime", *default_hook_command()[1:]]
    proc = subprocess.run([*command, "Stop"], input=b"{}", env=env, capture_output=True)
    assert proc.returncode == 0
    loaded = {
        row.split("|")[-1].strip()
        for row in proc.stderr.decode().splitlines()
        if row.startswith("import time:") and "|" in row
    }
    assert "_socket" in loaded
    for heavy in ("pydantic", "engine", "json", "socket", "asyncio", "selectors", "enum", "re"):
        assert heavy not in loaded, sorted(loaded)


async def test_engines_sharing_a_runtime_dir_each_get_their_own_socket(short_dir: Path) -> None:
    """Default paths are per process; a dead engine's socket beside ours is cleaned up, a live
    one (another engine on the machine) is left alone."""
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(short_dir / "hooks-999999.sock"))
    dead.close()
    async with (
        HookServer(short_dir / "hooks-other.sock") as other,
        HookServer(runtime_dir=short_dir) as ours,
    ):
        assert ours.path == short_dir / f"hooks-{os.getpid()}.sock"
        assert other.serving and ours.serving
        assert not (short_dir / "hooks-999999.sock").exists()
        assert (short_dir / "hooks-other.sock").exists()
