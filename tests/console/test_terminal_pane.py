"""TerminalPane: rendering, dirty-line refresh, keys to the child, resize, paste, scrollback.

Live tests run real children (`cat`, `bash`) in PTYs inside a Textual app (`App.run_test`);
the rest feed a fixed byte stream into a screen (`ScreenFeed`), and the snapshots use
`pane_snapshot_app.py`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.color import Color
from rich.style import Style
from textual import events
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.widgets import Input

from semo.console.keys import key_to_bytes, paste_to_bytes
from semo.console.widgets.terminal_pane import TerminalPane, build_strip
from semo.engine.terminal.scrollback import Line
from semo.engine.terminal.session import TerminalSession
from tests.console.pane_snapshot_app import PaneSnapshotApp, ScreenFeed
from tests.support.waiting import eventually

APP_SIZE = (80, 24)
BASH = ["bash", "--norc", "--noprofile"]
BASH_ENV = {"PATH": "/usr/bin:/bin", "PS1": "$ ", "HOME": "/tmp", "LANG": "C.UTF-8"}
SNAPSHOT_APP = Path(__file__).parent / "pane_snapshot_app.py"


class PaneApp(App[None]):
    """One pane, and an Input after it for focus to move to."""

    def __init__(self, source: object, title: str = "test · live") -> None:
        super().__init__()
        self.source = source
        self.title_text = title
        self.released: list[TerminalPane.Released] = []
        self.prefixed: list[str] = []

    def compose(self) -> ComposeResult:
        yield TerminalPane(self.source, title=self.title_text)  # type: ignore[arg-type]
        yield Input(id="after")

    def on_terminal_pane_released(self, message: TerminalPane.Released) -> None:
        self.released.append(message)

    def on_terminal_pane_prefixed(self, message: TerminalPane.Prefixed) -> None:
        self.prefixed.append(message.key)


def rendered(pane: TerminalPane) -> list[str]:
    """What the pane draws, row by row (render_line output)."""
    return [pane.render_line(y).text.rstrip() for y in range(pane.size.height)]


def shows(pane: TerminalPane, text: str) -> bool:
    return any(text in row for row in rendered(pane))


def cursor_cells(pane: TerminalPane) -> list[tuple[int, int]]:
    """(x, y) of cells drawn in reverse video where the screen's own cells are not reversed."""
    found = []
    for y in range(pane.size.height):
        x = 0
        for segment in pane.render_line(y):
            style = segment.style
            if style is not None and style.reverse:
                found.extend((x + i, y) for i in range(segment.cell_length))
            x += segment.cell_length
    return found


async def started(argv: list[str], **kwargs: object) -> TerminalSession:
    session = TerminalSession(argv, **kwargs)  # type: ignore[arg-type]
    session.start()
    return session


# -- live children ------------------------------------------------------------------------------


async def test_typing_reaches_the_child_and_its_echo_is_drawn():
    session = await started(["cat"])
    try:
        app = PaneApp(session)
        async with app.run_test(size=APP_SIZE) as pilot:
            pane = app.query_one(TerminalPane)
            pane.focus()
            await pilot.press("h", "i", "space", "t", "h", "e", "r", "e")
            await eventually(lambda: shows(pane, "hi there"))
            row = next(y for y, text in enumerate(rendered(pane)) if "hi there" in text)
            assert cursor_cells(pane) == [(8, row)]  # the cursor, right after the echo
            await pilot.press("enter")
            await eventually(lambda: sum("hi there" in r for r in rendered(pane)) == 2)
    finally:
        await session.close()


async def test_tab_and_ctrl_c_go_to_the_child_not_to_the_app():
    session = await started(["cat", "-A"])
    try:
        app = PaneApp(session)
        async with app.run_test(size=APP_SIZE) as pilot:
            pane = app.query_one(TerminalPane)
            pane.focus()
            await pilot.press("a", "tab", "b", "enter")
            await eventually(lambda: shows(pane, "a^Ib$"))
            assert app.focused is pane  # tab did not move focus
            await pilot.press("ctrl+c")
            status = await session.wait()
            assert status.signal == 2  # SIGINT from the tty's ^C
    finally:
        await session.close()


async def test_arrow_keys_follow_the_childs_cursor_key_mode():
    normal = await started(["cat", "-v"])
    application = await started(["bash", "-c", r"printf '\033[?1h'; exec cat -v"])
    try:
        for session, expected in ((normal, "^[[A^[[1;5A^[[D"), (application, "^[OA^[[1;5A^[OD")):
            app = PaneApp(session)
            async with app.run_test(size=APP_SIZE) as pilot:
                pane = app.query_one(TerminalPane)
                pane.focus()
                if session is application:
                    await eventually(lambda s=session: s.screen.modes.application_cursor_keys)
                await pilot.press("up", "ctrl+up", "left", "enter")
                await eventually(lambda p=pane, e=expected: shows(p, e))
    finally:
        await normal.close()
        await application.close()


async def test_the_prefix_chord_is_the_only_key_the_agent_does_not_get():
    """ctrl+] then a key is a console command (posted, nothing sent); ctrl+] twice sends ^];
    Escape after the prefix forgets it; F-keys go to the agent (ctrl+q and ctrl+p too:
    test_console_keys, on the console app whose bindings they were)."""
    session = await started(["bash", "-c", "stty -ixon; exec cat -v"])
    try:
        app = PaneApp(session)
        async with app.run_test(size=APP_SIZE) as pilot:
            pane = app.query_one(TerminalPane)
            pane.focus()
            await pilot.pause()
            assert pane.prefix == "ctrl+right_square_bracket"
            assert "keys go to the agent; ctrl+] ? keys" in str(pane.border_subtitle)
            await pilot.press("x", TerminalPane.PREFIX_KEY)
            assert pane.armed and "d detach" in str(pane.border_subtitle)
            await pilot.press("z")
            await pilot.pause()
            assert app.prefixed == ["z"] and not pane.armed
            await pilot.press(TerminalPane.PREFIX_KEY, "escape")  # forgotten, nothing sent
            await pilot.press(TerminalPane.PREFIX_KEY, TerminalPane.PREFIX_KEY)
            await pilot.press("f3", "enter")
            await eventually(lambda: any(r.startswith("x^]^[OR") for r in rendered(pane)))
            assert app.prefixed == ["z"]
            assert app.focused is pane
    finally:
        await session.close()


async def test_a_configured_prefix_and_scroll_mode():
    session = await started(BASH, env=BASH_ENV)
    try:
        app = PaneApp(session)
        async with app.run_test(size=APP_SIZE) as pilot:
            pane = app.query_one(TerminalPane)
            pane.prefix = "ctrl+b"
            pane.focus()
            await pilot.press(*"seq 1 200", "enter")
            await eventually(lambda: shows(pane, "200"))
            await pilot.press("ctrl+b", "o")
            await pilot.pause()
            assert app.prefixed == ["o"]
            pane.scroll_mode()
            assert pane.scrolling and pane.view_offset > 0
            offset = pane.view_offset
            await pilot.press("up", "x")  # x is not sent while scrolling
            assert pane.view_offset == offset + 1
            await pilot.press("q")
            assert not pane.scrolling and pane.view_offset == 0
            assert not shows(pane, "$ x")
    finally:
        await session.close()


async def test_resizing_the_app_resizes_the_pty():
    session = await started(BASH, env=BASH_ENV)
    try:
        app = PaneApp(session)
        async with app.run_test(size=APP_SIZE) as pilot:
            pane = app.query_one(TerminalPane)
            pane.focus()
            await eventually(lambda: shows(pane, "$"))
            width, height = pane.size
            assert (session.screen.columns, session.screen.lines) == (width, height)
            await pilot.press(*"stty size", "enter")
            await eventually(lambda: shows(pane, f"{height} {width}"))
            await pilot.resize_terminal(100, 30)
            await eventually(lambda: pane.size.width == 98)
            width, height = pane.size
            assert (session.process.cols, session.process.rows) == (width, height)
            await pilot.press(*"clear; stty size", "enter")
            await eventually(lambda: shows(pane, f"{height} {width}"))
    finally:
        await session.close()


async def test_paste_is_bracketed_only_when_the_child_asked():
    bracketed = await started(["bash", "-c", r"printf '\033[?2004h'; exec cat -v"])
    raw = await started(["cat", "-v"])
    try:
        for session in (bracketed, raw):
            app = PaneApp(session)
            async with app.run_test(size=APP_SIZE) as pilot:
                pane = app.query_one(TerminalPane)
                pane.focus()
                if session is bracketed:
                    await eventually(lambda s=session: s.screen.modes.bracketed_paste)
                pane.post_message(events.Paste("abc\ndef"))
                await pilot.press("enter")
                if session is bracketed:
                    await eventually(lambda p=pane: shows(p, "^[[200~abc"))
                    await eventually(lambda p=pane: shows(p, "def^[[201~"))
                else:
                    # the tty echoes the whole paste before cat prints its first line
                    await eventually(lambda p=pane: sum("def" in r for r in rendered(p)) == 2)
                    assert not shows(pane, "200~")
    finally:
        await bracketed.close()
        await raw.close()


# -- fed screens: refresh, rendering, scrollback, bell ------------------------------------------


async def test_only_dirty_rows_and_the_cursor_rows_are_refreshed_once_per_frame(monkeypatch):
    feed = ScreenFeed()
    app = PaneApp(feed)
    async with app.run_test(size=APP_SIZE) as pilot:
        pane = app.query_one(TerminalPane)
        await pilot.pause()
        refreshed: list[Region] = []
        original = pane.refresh

        def spy(*regions: Region, **kwargs: object) -> TerminalPane:
            refreshed.extend(regions)
            return original(*regions, **kwargs)

        monkeypatch.setattr(pane, "refresh", spy)
        frames = pane.frames
        for chunk in ("\x1b[5;1H", "hel", "lo", " world"):  # four chunks, one frame
            feed.feed(chunk)
        await eventually(lambda: pane.frames > frames)
        await pilot.pause(0.05)
        assert pane.frames == frames + 1
        rows = {y for region in refreshed for y in range(region.y, region.bottom)}
        assert rows == {0, 4}  # the row written, and the row the cursor left
        assert all(region.width == pane.size.width for region in refreshed)
        assert rendered(pane)[4] == "hello world"
        assert not feed.screen.dirty


async def test_strips_are_cached_by_row_content():
    feed = ScreenFeed()
    feed.feed("\x1b[?25lsame\r\nsame\r\nother")
    app = PaneApp(feed)
    async with app.run_test(size=APP_SIZE) as pilot:
        pane = app.query_one(TerminalPane)
        await pilot.pause()
        assert pane.render_line(0) is pane.render_line(1)  # equal rows share one strip
        first = pane.render_line(2)
        feed.feed("\x1b[3;1Hchanged")
        await pilot.pause(0.05)
        assert pane.render_line(2) is not first
        assert pane.render_line(2).text.rstrip() == "changed"


async def test_colours_attributes_and_wide_characters_are_drawn():
    feed = ScreenFeed()
    feed.feed(
        "\x1b[31mR\x1b[91mB\x1b[38;5;208mO\x1b[38;2;1;2;3mT\x1b[48;5;4mb\x1b[0m"
        "\x1b[1mW\x1b[0;2md\x1b[0;3mi\x1b[0;4mu\x1b[0;7mr\x1b[0;9ms\x1b[0m"
        "中x😀y"
    )
    app = PaneApp(feed)
    async with app.run_test(size=APP_SIZE) as pilot:
        pane = app.query_one(TerminalPane)
        await pilot.pause()
        strip = pane.render_line(0)
        assert strip.cell_length == pane.size.width
        styles = {seg.text: seg.style for seg in strip if seg.text.strip()}
        assert styles["R"].color == Color.from_ansi(1)
        assert styles["B"].color == Color.from_ansi(9)
        assert styles["O"].color.triplet == (0xFF, 0x87, 0x00)
        assert styles["T"].color.triplet == (1, 2, 3)
        assert styles["b"].bgcolor == Color.from_ansi(4)
        assert styles["W"].bold and styles["d"].dim and styles["i"].italic
        assert styles["u"].underline and styles["r"].reverse and styles["s"].strike
        assert strip.crop(11, 13).text == "中"
        assert strip.crop(13, 14).text == "x"  # the wide character took two cells
        assert strip.crop(14, 16).text == "😀"
        assert strip.crop(16, 17).text == "y"


def test_build_strip_keeps_columns_where_widths_disagree():
    line = Line("❤\ufe0f|\U0001f1e6\U0001f1e8|e\u0301|")
    strip = build_strip(line, 20, -1, Style())
    # tmux 3.3a: heart + VS16 is one cell, each regional indicator is one cell
    bars = [x for x in range(20) if strip.crop(x, x + 1).text.endswith("|")]
    assert bars == [1, 4, 6]
    assert strip.cell_length == 20


async def test_cursor_is_drawn_only_with_focus_and_when_visible():
    feed = ScreenFeed()
    feed.feed("abc")
    app = PaneApp(feed)
    async with app.run_test(size=APP_SIZE) as pilot:
        pane = app.query_one(TerminalPane)
        pane.focus()
        await pilot.pause()
        assert cursor_cells(pane) == [(3, 0)]
        feed.feed("\x1b[?25l")  # DECTCEM off
        await pilot.pause(0.05)
        assert cursor_cells(pane) == []
        feed.feed("\x1b[?25h\x1b[2;5H")
        await pilot.pause(0.05)
        assert cursor_cells(pane) == [(4, 1)]
        app.query_one("#after", Input).focus()
        await pilot.pause()
        assert cursor_cells(pane) == []


async def test_scrollback_view_pages_back_and_any_key_returns_live():
    feed = ScreenFeed()
    feed.feed("".join(f"line {n:03d}\r\n" for n in range(1, 101)) + "$ ")
    app = PaneApp(feed, title="BE · idle")
    async with app.run_test(size=APP_SIZE) as pilot:
        pane = app.query_one(TerminalPane)
        pane.focus()
        await pilot.pause()
        height = pane.size.height
        assert rendered(pane)[-1] == "$"
        await pilot.press("shift+pageup")
        page = height - 1
        assert pane.view_offset == page
        assert pane.border_title == f"BE · idle · scrollback -{page}"
        top = 100 - (height - 1) - page + 1
        assert rendered(pane)[0] == f"line {top:03d}"
        assert cursor_cells(pane) == []
        feed.feed("more\r\n$ ")  # new output while scrolled back: the view stays put
        await pilot.pause(0.05)
        assert rendered(pane)[0] == f"line {top:03d}"
        assert pane.view_offset == page + 1
        await pilot.press("shift+pagedown", "shift+pagedown")
        assert pane.view_offset == 0
        await pilot.press("shift+pageup", "q")
        assert pane.view_offset == 0 and pane.border_title == "BE · idle"
        assert feed.written == ["q"]  # only the key that returned to the live view was sent
        feed.feed("\x1b[?1049h")  # the alternate screen has no scrollback
        await pilot.pause(0.05)
        await pilot.press("shift+pageup")
        assert pane.view_offset == 0


async def test_bell_rings_the_app_and_title_is_set(monkeypatch):
    feed = ScreenFeed()
    app = PaneApp(feed, title="QA · idle")
    async with app.run_test(size=APP_SIZE) as pilot:
        pane = app.query_one(TerminalPane)
        rings: list[int] = []
        monkeypatch.setattr(app, "bell", lambda: rings.append(1))
        assert pane.border_title == "QA · idle"
        feed.feed("\a")
        await pilot.pause(0.05)
        assert rings == [1]
        feed.feed("x\a\a")
        await pilot.pause(0.05)
        assert rings == [1]  # a bell storm rings at most every BELL_INTERVAL
        await pilot.pause(pane.BELL_INTERVAL)
        feed.feed("\a")
        await pilot.pause(0.05)
        assert rings == [1, 1]
        pane.set_title("QA · busy [x]")
        assert pane.border_title == r"QA · busy \[x]"  # shown literally, not read as markup


# -- key translation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "character", "app_cursor", "expected"),
    [
        ("a", "a", False, "a"),
        ("A", "A", False, "A"),
        ("exclamation_mark", "!", False, "!"),
        ("space", " ", False, " "),
        ("enter", None, False, "\r"),
        ("enter", "\r", False, "\r"),
        ("tab", None, False, "\t"),
        ("shift+tab", None, False, "\x1b[Z"),
        ("backspace", None, False, "\x7f"),
        ("backspace", "\x08", False, "\x08"),  # ctrl+h as the terminal sent it
        ("escape", None, False, "\x1b"),
        ("up", None, False, "\x1b[A"),
        ("up", None, True, "\x1bOA"),
        ("left", None, True, "\x1bOD"),
        ("home", None, False, "\x1b[H"),
        ("end", None, True, "\x1bOF"),
        ("pageup", None, False, "\x1b[5~"),
        ("pagedown", None, False, "\x1b[6~"),
        ("insert", None, False, "\x1b[2~"),
        ("delete", None, False, "\x1b[3~"),
        ("f1", None, False, "\x1bOP"),
        ("f5", None, False, "\x1b[15~"),
        ("f12", None, False, "\x1b[24~"),
        ("f13", None, False, "\x1b[1;2P"),  # shift+F1 as xterm reports it
        ("ctrl+a", None, False, "\x01"),
        ("ctrl+c", "\x03", False, "\x03"),
        ("ctrl+z", None, False, "\x1a"),
        ("ctrl+backslash", None, False, "\x1c"),
        ("ctrl+@", "\x00", False, "\x00"),
        ("alt+x", "x", False, "\x1bx"),
        ("alt+shift+x", "X", False, "\x1bX"),
        ("alt+enter", None, False, "\x1b\r"),
        ("ctrl+up", None, False, "\x1b[1;5A"),
        ("ctrl+up", None, True, "\x1b[1;5A"),
        ("shift+right", None, False, "\x1b[1;2C"),
        ("alt+left", None, False, "\x1b[1;3D"),
        ("ctrl+shift+down", None, False, "\x1b[1;6B"),
        ("ctrl+delete", None, False, "\x1b[3;5~"),
        ("ctrl+f5", None, False, "\x1b[15;5~"),
        ("super+a", None, False, None),
    ],
)
def test_key_to_bytes(key, character, app_cursor, expected):
    assert key_to_bytes(key, character, application_cursor=app_cursor) == expected


def test_paste_to_bytes():
    assert paste_to_bytes("a\nb\r\nc", bracketed=False) == "a\rb\rc"
    assert paste_to_bytes("x\x1b[201~y", bracketed=True) == "\x1b[200~xy\x1b[201~"
    # nested: removing the inner marker once would rebuild an outer one
    nested = "x\x1b[20\x1b[20\x1b[201~1~1~y"
    assert paste_to_bytes(nested, bracketed=True) == "\x1b[200~xy\x1b[201~"


# -- snapshots (80x24, fixed byte streams) ------------------------------------------------------


def test_snapshot_primary_screen(snap_compare):
    """Colours (16, 256, truecolour), attributes, wide characters, DEC graphics, cursor."""
    assert snap_compare(PaneSnapshotApp("primary"), terminal_size=APP_SIZE)


def test_snapshot_alternate_screen(snap_compare):
    """A full-screen TUI in the alternate screen, cursor hidden."""
    assert snap_compare(PaneSnapshotApp("alternate"), terminal_size=APP_SIZE)


def test_snapshot_back_from_the_alternate_screen(snap_compare):
    """Leaving the alternate screen restores the primary one, cursor included."""
    assert snap_compare(PaneSnapshotApp("restored"), terminal_size=APP_SIZE)


def test_snapshot_scrollback_view(snap_compare):
    """shift+PageUp pages back through the scrollback; the border title says how far."""
    assert snap_compare(
        PaneSnapshotApp("scrollback"), terminal_size=APP_SIZE, press=["shift+pageup"]
    )
