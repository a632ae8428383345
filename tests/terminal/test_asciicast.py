"""asciicast v2 recording and reading, checked against asciinema 2.4 itself."""

from __future__ import annotations

import asyncio
import io
import json
import os
import sys
from pathlib import Path

import pytest

from semo.engine.terminal.asciicast import (
    FLUSH_INTERVAL,
    AsciicastError,
    AsciicastEvent,
    AsciicastHeader,
    AsciicastWriter,
    read_asciicast,
    replay_output,
)
from semo.engine.terminal.pty_process import TerminalProcess

TIMEOUT = 10.0


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def asciinema(*args: str, unset: tuple[str, ...] = ()) -> bytes:
    """Run asciinema 2.4 without a controlling terminal (so it leaves ours alone)."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    for name in unset:
        env.pop(name, None)
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "asciinema",
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    stdout, stderr = await asyncio.wait_for(child.communicate(), TIMEOUT)
    assert child.returncode == 0, stderr.decode()
    return stdout


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "session.cast"
    clock = FakeClock()
    env = {"TERM": "xterm-256color", "SHELL": "/bin/bash"}
    with AsciicastWriter(path, 80, 24, title="demo", env=env, clock=clock) as writer:
        writer.output("hello 한\r\n")
        clock.now += 0.25
        writer.input("ls\r")
        clock.now += 1.0
        writer.resize(100, 30)
        writer.marker("turn 1")
        writer.output("\x1b[31mred\x1b[0m")

    header, events = read_asciicast(path)
    assert header.version == 2
    assert (header.width, header.height, header.title) == (80, 24, "demo")
    assert header.env == env
    assert isinstance(header.timestamp, int)
    assert events == [
        AsciicastEvent(0.0, "o", "hello 한\r\n"),
        AsciicastEvent(0.25, "i", "ls\r"),
        AsciicastEvent(1.25, "r", "100x30"),
        AsciicastEvent(1.25, "m", "turn 1"),
        AsciicastEvent(1.25, "o", "\x1b[31mred\x1b[0m"),
    ]
    assert replay_output(events) == "hello 한\r\n\x1b[31mred\x1b[0m"


def test_lines_are_compact_and_not_ascii_escaped(tmp_path: Path) -> None:
    path = tmp_path / "session.cast"
    clock = FakeClock()
    with AsciicastWriter(path, 80, 24, env={}, clock=clock) as writer:
        clock.now += 0.5
        writer.output("한\x1b")
    header_line, event_line = path.read_text(encoding="utf-8").splitlines()
    assert json.loads(header_line).keys() == {"version", "width", "height", "timestamp"}
    assert ", " not in header_line
    assert event_line == '[0.5,"o","한\\u001b"]'


def test_header_env_keeps_only_term_and_shell(tmp_path: Path) -> None:
    path = tmp_path / "session.cast"
    env = {"TERM": "xterm", "SHELL": "/bin/zsh", "ANTHROPIC_API_KEY": "sk-secret", "HOME": "/x"}
    AsciicastWriter(path, 80, 24, env=env).close()
    assert "sk-secret" not in path.read_text()
    header, _ = read_asciicast(path)
    assert header.env == {"TERM": "xterm", "SHELL": "/bin/zsh"}


def test_resize_events(tmp_path: Path) -> None:
    path = tmp_path / "session.cast"
    with AsciicastWriter(path, 80, 24, clock=FakeClock()) as writer:
        writer.resize(120, 40)
        writer.resize(60, 15)
    _, events = read_asciicast(path)
    assert [(event.kind, event.data) for event in events] == [("r", "120x40"), ("r", "60x15")]


def test_events_are_buffered_until_half_a_second_has_passed(tmp_path: Path) -> None:
    path = tmp_path / "session.cast"
    clock = FakeClock()
    writer = AsciicastWriter(path, 80, 24, clock=clock)
    header_size = path.stat().st_size
    for _ in range(100):
        writer.output("x" * 100)
        clock.now += FLUSH_INTERVAL / 200
    assert path.stat().st_size == header_size
    clock.now += FLUSH_INTERVAL
    writer.output("tick")
    assert path.stat().st_size > header_size
    writer.output("tail")
    writer.close()
    _, events = read_asciicast(path)
    assert len(events) == 102
    assert events[-1].data == "tail"


def test_writer_rejects_events_after_close(tmp_path: Path) -> None:
    writer = AsciicastWriter(tmp_path / "session.cast", 80, 24)
    writer.close()
    writer.close()
    assert writer.closed
    with pytest.raises(ValueError, match="closed"):
        writer.output("late")


def test_reads_from_a_file_object() -> None:
    text = '{"version":2,"width":10,"height":5}\n[0.1,"o","a"]\n\n[0.2,"o","b"]\n'
    header, events = read_asciicast(io.StringIO(text))
    assert header == AsciicastHeader(version=2, width=10, height=5)
    assert replay_output(events) == "ab"


@pytest.mark.parametrize(
    ("text", "lineno", "message"),
    [
        ("", 1, "missing the header"),
        ('{"version":1,"width":80,"height":24}\n', 1, "invalid header"),
        ('{"version":2,"width":80}\n', 1, "height"),
        ('{"version":2,"width":80,"height":24}\n[0.1,"o","ok"]\n[0.2,"o",\n', 3, "invalid event"),
        ('{"version":2,"width":80,"height":24}\n[0.1,"x","what"]\n', 2, "invalid event"),
        ('{"version":2,"width":80,"height":24}\n[0.1,"o"]\n', 2, "invalid event"),
        ('{"version":2,"width":80,"height":24}\n{"time":0.1}\n', 2, "invalid event"),
    ],
)
def test_malformed_files_name_the_line(
    tmp_path: Path, text: str, lineno: int, message: str
) -> None:
    path = tmp_path / "bad.cast"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=f"line {lineno}: .*{message}") as caught:
        read_asciicast(path)
    assert isinstance(caught.value, AsciicastError)
    assert caught.value.lineno == lineno
    assert str(path) in str(caught.value)


async def test_asciinema_cat_reproduces_recorded_output(tmp_path: Path) -> None:
    path = tmp_path / "session.cast"
    script = (
        r"printf 'plain\n\033[1;32mgreen bold\033[0m\n'; "
        r"printf '한글 ✓ 🙂\n\tTAB\rCR\n'; "
        r"printf '\033[2J\033[H\033[?2004h\033[?1049l'; "
        r"printf 'no newline at the end'"
    )
    output: list[str] = []
    with AsciicastWriter(path, 80, 24, env={"TERM": "xterm-256color"}) as writer:

        def record(text: str) -> None:
            output.append(text)
            writer.output(text)

        process = TerminalProcess.spawn(["bash", "-c", script], on_output=record)
        await asyncio.wait_for(process.wait(), TIMEOUT)
        writer.resize(100, 30)
        writer.marker("done")

    assert "🙂" in "".join(output)
    assert await asciinema("cat", str(path)) == "".join(output).encode("utf-8")
    _, events = read_asciicast(path)
    assert replay_output(events) == "".join(output)


async def test_reads_what_asciinema_records(tmp_path: Path) -> None:
    path = tmp_path / "asciinema.cast"
    await asciinema("rec", "--quiet", "--command", "printf 'from asciinema 한\\n'", str(path))
    header, events = read_asciicast(path)
    assert header.version == 2
    assert replay_output(events) == "from asciinema 한\r\n"


async def test_reads_asciinema_header_with_unset_shell(tmp_path: Path) -> None:
    """A bare CI runner has no SHELL; asciinema then writes `"SHELL": null` into the header."""
    path = tmp_path / "no-shell.cast"
    await asciinema("rec", "--quiet", "--command", "printf x", str(path), unset=("SHELL",))
    header, events = read_asciicast(path)
    assert header.env is not None and header.env["SHELL"] is None
    assert replay_output(events) == "x"
