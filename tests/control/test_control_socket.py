"""The control socket with a real engine (bash agents in PTYs) and real clients.

- A console's mirror of a session equals the engine's screen: rows, styles (SGR colours),
  cursor, and the scrollback tail that came with the attach.
- Size policy: the PTY takes the size of the console that most recently attached, resized or
  typed; when that console leaves, the remaining one's size comes back.
- A console that never reads does not make the engine buffer: the engine's write buffer for it
  stays small while its session floods, and other consoles keep getting answers.
- The socket is 0600 in a 0700 folder; a second engine for the same office on this machine is
  refused; another uid's connection is closed without a word.
- When the engine stops, the client says so and refuses to send anything: an answer raises
  EngineGone, typing raises TerminalClosedError.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import stat
import subprocess
from pathlib import Path

import pytest

from semo.engine.control.client import EngineGone
from semo.engine.control.server import ControlError
from semo.engine.control.wire import MAX_STYLES, encode_frame
from semo.engine.engine import Engine
from semo.engine.runtime import socket_answers
from semo.engine.terminal.pty_process import TerminalClosedError
from tests.support.control_engine import attached, client_of, engine_screen
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(120)


async def test_a_console_mirrors_rows_styles_cursor_and_scrollback(engine: Engine) -> None:
    one, two = client_of(engine), client_of(engine)
    try:
        typing = await attached(one, "A")
        typing.write("seq 1 200; printf '\\033[1;31mred\\033[0m plain\\n'\r")
        screen = engine_screen(engine, "A")
        await eventually(lambda: "red plain" in "\n".join(typing.screen.text_rows()), 10)

        late = await attached(two, "A")  # attaches after the output: snapshot + history
        history = [line.text for line in list(screen.scrollback)]
        await eventually(lambda: [line.text for line in late.screen.scrollback] == history, 10)
        for mirror in (typing.screen, late.screen):
            await eventually(lambda m=mirror: m.text_rows() == screen.text_rows(), 10)
            assert [mirror.row_line(y) for y in range(screen.lines)] == [
                screen.row_line(y) for y in range(screen.lines)
            ]
            assert (mirror.cursor.x, mirror.cursor.y) == (screen.cursor.x, screen.cursor.y)
        red = next(line for line in late.screen.rows if line.text.startswith("red plain"))
        assert red.runs[0].style.fg == "red" and red.runs[0].style.bold
        assert history[:3] == ["$ seq 1 200; printf '\\033[1;31mred\\033[0m plain\\n'", "1", "2"]
    finally:
        await one.close()
        await two.close()


async def test_the_pty_takes_the_size_of_the_most_recently_active_console(engine: Engine) -> None:
    one, two = client_of(engine), client_of(engine)
    screen = engine_screen(engine, "B")
    try:
        first = await attached(one, "B")
        second = await attached(two, "B")
        first.resize(70, 20)
        await eventually(lambda: (screen.columns, screen.lines) == (70, 20), 10)
        second.resize(90, 30)
        await eventually(lambda: (screen.columns, screen.lines) == (90, 30), 10)
        await eventually(lambda: (first.screen.columns, first.screen.lines) == (90, 30), 10)
        first.write(" ")  # typing makes console one the latest again
        await eventually(lambda: (screen.columns, screen.lines) == (70, 20), 10)
        await one.close()  # the latest console leaves: the other's size comes back
        await eventually(lambda: (screen.columns, screen.lines) == (90, 30), 10)
    finally:
        await one.close()
        await two.close()


async def test_a_console_that_never_reads_costs_the_engine_no_backlog(engine: Engine) -> None:
    assert engine.control is not None
    path = engine.control.paths.socket
    session = next(s for s in engine.sessions() if s.role == "A")
    _reader, writer = await asyncio.open_unix_connection(str(path))
    writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    writer.write(encode_frame({"op": "subscribe", "id": 1}))
    writer.write(encode_frame({"op": "attach", "id": 2, "session": session.session_id}))
    await writer.drain()
    other = client_of(engine)
    try:
        flood = await attached(other, "A")
        flood.write("for i in $(seq 1 30000); do echo flood-line-$i; done\r")
        await eventually(
            lambda: "flood-line-30000" in "\n".join(session.terminal.screen.text_rows()), 60
        )
        stuck = next(c for c in engine.control._connections if c is not None and c.number == 1)
        buffered = stuck.writer.transport.get_write_buffer_size()
        # at most the frames of one write (a full screen and what came with it), never the
        # whole flood (30,000 lines, over a megabyte)
        assert buffered + stuck.backlog_bytes < 256 * 1024, buffered
        assert await other.request({"op": "ping"}) == {"consoles": 2}
        await eventually(lambda: "flood-line-30000" in "\n".join(flood.screen.text_rows()), 30)
    finally:
        writer.close()
        await other.close()


async def test_socket_permissions_and_one_engine_per_office(engine: Engine) -> None:
    assert engine.control is not None
    paths = engine.control.paths
    assert stat.S_IMODE(os.stat(paths.socket).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(paths.socket.parent).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(paths.info).st_mode) == 0o600
    config = engine.config
    other_id = config.model_copy(update={"engine": config.engine.model_copy(update={"id": "b2"})})
    second = Engine(other_id, control=True)  # another engine id, same office and store
    with pytest.raises(ControlError, match="another engine already serves office 'ctl'"):
        await second.start()
    assert socket_answers(paths.socket)  # the first one's socket is untouched


SYSTEM_PYTHON = "/usr/bin/python3"  # the venv's may not be readable by another uid


@pytest.mark.skipif(
    os.getuid() != 0 or not os.access(SYSTEM_PYTHON, os.X_OK),
    reason="needs root (to connect as another uid) and a system python3",
)
async def test_another_uid_is_refused(engine: Engine) -> None:
    assert engine.control is not None
    paths = engine.control.paths
    for folder in (paths.socket.parent.parent, paths.socket.parent):
        os.chmod(folder, 0o755)  # only so that uid 65534 can reach the socket at all
    os.chmod(paths.socket, 0o666)
    probe = (
        "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
        "s.settimeout(5); print(len(s.recv(100)))"
    )
    result = await asyncio.to_thread(
        subprocess.run,
        [SYSTEM_PYTHON, "-c", probe, str(paths.socket)],
        capture_output=True,
        text=True,
        user=65534,
        timeout=30,
    )
    assert result.stdout.strip() == "0", result  # closed at once: no hello, nothing
    assert result.returncode == 0


async def test_a_stopped_engine_is_reported_and_nothing_is_sent(engine: Engine) -> None:
    client = client_of(engine)
    gone: list[str] = []
    client.on_gone(gone.append)
    terminal = await attached(client, "A")
    await engine.stop("stopped by the test")
    await eventually(lambda: client.gone is not None, 10)
    assert gone == ["the engine stopped: stopped by the test"]
    with pytest.raises(EngineGone, match=r"is not running .*nothing was delivered"):
        await client.answer("any-question", option=1)
    with pytest.raises(TerminalClosedError):
        terminal.write("echo lost\r")
    await client.close()


async def test_a_console_attaches_again_to_an_engine_started_after_a_stop(
    engine: Engine, tmp_path: Path
) -> None:
    """The stopping engine's "stopping" status made the client hold back attaches, resizes
    and pauses (they would race its close); a new engine's connection must take them again,
    or the console's panes stay blank while keys still reach the agents."""
    client = client_of(engine)
    await attached(client, "A")
    await engine.stop("stopped by the test")
    await eventually(lambda: client.gone is not None, 10)
    work = tmp_path / "work"
    again = Engine(
        engine.config, control=True, agent_env=engine._agent_env, folder_for=lambda _a, _t: work
    )
    await again.start()
    try:
        terminal = await attached(client, "A")  # a new session, a new pane
        terminal.resize(50, 9)
        terminal.write("echo back-$((40+2))\r")
        await eventually(lambda: any("back-42" in row for row in terminal.screen.text_rows()), 10)
        assert (engine_screen(again, "A").columns, engine_screen(again, "A").lines) == (50, 9)
    finally:
        await client.close()
        await again.stop("test over")


async def test_an_agent_cannot_attach_to_its_own_engine(engine: Engine) -> None:
    """An agent runs as the operator's uid; the engine refuses connections from the processes
    it started (checked by the peer's parent chain): no hello, the connection is closed."""
    assert engine.control is not None
    session = next(s for s in engine.sessions() if s.role == "A")
    probe = (
        "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
        "s.settimeout(5); print('received', len(s.recv(100)), 'bytes')"
    )
    session.terminal.write(f"python3 -c {probe!r} {engine.control.paths.socket}\r")

    def answer() -> re.Match[str] | None:
        return re.search(r"received (\d+) bytes", "\n".join(session.terminal.screen.text_rows()))

    await eventually(answer, 20)
    assert answer().group(1) == "0"  # type: ignore[union-attr]
    client = client_of(engine)  # the operator's console still gets in
    await client.start()
    await client.close()


async def test_a_paste_bigger_than_a_request_arrives_whole(engine: Engine, tmp_path: Path) -> None:
    """2 MB of pasted text goes out in requests under the 1 MiB limit, in order, nothing lost
    and the console not disconnected."""
    client = client_of(engine)
    try:
        terminal = await attached(client, "A")
        target = tmp_path / "pasted.txt"
        terminal.write(f"cat > {target}\r")
        line = "0123456789abcdefghijklmnopqrstuvwxyz-" * 1 + "é✓\r"
        count = 2_000_000 // len(line.encode())
        terminal.write(line * count)
        terminal.write("\x04")
        expected = len(line.replace("\r", "\n").encode()) * count
        await eventually(lambda: target.exists() and target.stat().st_size == expected, 60)
        assert target.read_text().splitlines()[-1] == line[:-1]
        assert client.gone is None
    finally:
        await client.close()


async def test_endless_distinct_styles_keep_the_style_table_bounded(engine: Engine) -> None:
    """A hostile agent prints 20,000 distinct true colours: the engine's style table for the
    console starts over instead of growing, and the console's rows keep the right colours."""
    assert engine.control is not None
    client = client_of(engine)
    try:
        terminal = await attached(client, "B")
        loop = (
            "for i in $(seq 1 20000); do printf '\\033[38;2;%d;%d;%dmX\\033[0m' "
            "$((i % 256)) $((i / 256 % 256)) $((i / 65536)); done; echo; echo styles-done"
        )
        terminal.write(loop + "\r")
        screen = engine_screen(engine, "B")
        await eventually(lambda: "styles-done" in "\n".join(screen.text_rows()), 60)
        await eventually(
            lambda: (
                [terminal.screen.row_line(y) for y in range(screen.lines)]
                == [screen.row_line(y) for y in range(screen.lines)]
            ),
            20,
        )
        [connection] = list(engine.control._connections)
        assert len(connection.styles._ids) <= MAX_STYLES + screen.lines * screen.columns
    finally:
        await client.close()


async def test_a_hidden_pane_gets_no_frames_until_shown(engine: Engine) -> None:
    client = client_of(engine)
    try:
        terminal = await attached(client, "A")
        frames = 0

        def count(_chunk: str) -> None:
            nonlocal frames
            frames += 1

        terminal.add_listener(count)
        terminal.set_visible(False)
        await client.request({"op": "ping"})  # the pause is in effect from here
        frames = 0
        terminal.write("seq 1 50; echo hidden-done\r")
        screen = engine_screen(engine, "A")
        await eventually(lambda: "hidden-done" in "\n".join(screen.text_rows()), 20)
        await asyncio.sleep(0.3)
        assert frames == 0
        assert "hidden-done" not in "\n".join(terminal.screen.text_rows())
        terminal.set_visible(True)
        await eventually(lambda: terminal.screen.text_rows() == screen.text_rows(), 10)
        await eventually(
            lambda: (
                [line.text for line in terminal.screen.scrollback]
                == [line.text for line in screen.scrollback]
            ),
            10,
        )
    finally:
        await client.close()


async def test_a_frame_the_console_cannot_apply_leaves_the_following_ones_applied(
    engine: Engine,
) -> None:
    """A screen frame whose rows are not rows (a bug or a damaged frame) is logged; the frames
    after it still reach the pane (before, the client's read loop ended without a word and
    the pane froze)."""
    client = client_of(engine)
    try:
        terminal = await attached(client, "A")
        session_id = next(s.session_id for s in client.sessions() if s.role == "A")
        assert client._reader is not None  # as if the engine had sent it
        client._reader.feed_data(encode_frame({"t": "screen", "s": session_id, "rows": "junk"}))
        terminal.write("echo after-$((6*7))\r")
        await eventually(lambda: "after-42" in "\n".join(terminal.screen.text_rows()), 10)
    finally:
        await client.close()
