"""A TerminalPane over a screen fed a fixed byte stream: no process, so snapshots are stable.

`PaneSnapshotApp(stage)` shows, at 80x24, a pane whose 78x22 screen was fed `PRIMARY`
(16/256/truecolour, attributes, wide characters, DEC graphics), then for `stage="alternate"`
a full-screen TUI in the alternate screen, and for `stage="restored"` the switch back.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.app import App, ComposeResult

from semo.console.widgets.terminal_pane import TerminalPane
from semo.engine.terminal.screen import TerminalScreen
from semo.engine.terminal.stream import TerminalStream

COLS, ROWS = 78, 22  # an 80x24 app minus the pane's border
ESC = "\x1b"
CSI = ESC + "["


def _sgr(params: str) -> str:
    return f"{CSI}{params}m"


def _primary() -> str:
    out = [
        f"{_sgr('1')}semo terminal pane{_sgr('0')} {_sgr('2')}(fixed byte stream){_sgr('0')}\r\n"
    ]
    out.append("16 fg: ")
    for code in (*range(30, 38), *range(90, 98)):
        out.append(f"{_sgr(str(code))}#{_sgr('0')}")
    out.append("  16 bg: ")
    for code in (*range(40, 48), *range(100, 108)):
        out.append(f"{_sgr(str(code))} {_sgr('0')}")
    out.append("\r\n256: ")
    for index in range(16, 232, 6):
        out.append(f"{_sgr(f'48;5;{index}')} ")
    out.append(_sgr("0"))
    for index in range(232, 256, 3):
        out.append(f"{_sgr(f'38;5;{index}')}█")
    out.append(f"{_sgr('0')}\r\ntruecolor: ")
    for step in range(40):
        red, blue = 255 - step * 6, step * 6
        out.append(f"{_sgr(f'48;2;{red};64;{blue}')} ")
    out.append(f"{_sgr('0')} {_sgr('38:2::255:128:0')}colon form{_sgr('0')}\r\n")
    out.append(
        f"attrs: {_sgr('1')}bold{_sgr('0')} {_sgr('2')}dim{_sgr('0')} {_sgr('3')}italic{_sgr('0')}"
        f" {_sgr('4')}underline{_sgr('0')} {_sgr('7')}reverse{_sgr('0')}"
        f" {_sgr('9')}strike{_sgr('0')} {_sgr('1;4;31')}bold+ul red{_sgr('0')}"
        f" {_sgr('7;32')}rev green{_sgr('0')}\r\n"
    )
    out.append("wide: 漢字かなカナ한글|😀🚀👍|family 👨\u200d👩\u200d👧|e\u0301 café|❤\ufe0f|\r\n")
    out.append(f"{_sgr('44;97')} 中文 on blue {_sgr('0')} ruler: 0123456789012345678901234567\r\n")
    out.append(f"{ESC}(0lqqqqqqqqqqk{ESC}(B\r\n{ESC}(0x{ESC}(B box-draw {ESC}(0x{ESC}(B\r\n")
    out.append(f"{ESC}(0mqqqqqqqqqqj{ESC}(B\r\n")
    for n in range(1, 9):
        out.append(f"log line {n:02d} {_sgr('90')}· plain output{_sgr('0')}\r\n")
    out.append(f"{_sgr('1;32')}$ {_sgr('0')}echo hi")
    return "".join(out)


def _alternate() -> str:
    out = [f"{CSI}?1049h{CSI}?25l{CSI}H{_sgr('1;97;44')} alt screen TUI"]
    out.append(f"{CSI}K{CSI}1;60H F1 help {_sgr('0')}")
    for row in range(3, 8):
        out.append(f"{CSI}{row};3H{_sgr('36')}item {row - 2}{_sgr('0')}")
    out.append(f"{CSI}4;3H{_sgr('7')}item 2 (selected){_sgr('0')}")
    out.append(f"{CSI}10;20H{_sgr('38;5;208')}256-colour orange{_sgr('0')} 😀 ok")
    out.append(f"{CSI}22;1H{_sgr('30;47')} status: ready{CSI}K{_sgr('0')}")
    return "".join(out)


PRIMARY = _primary()
ALTERNATE = _alternate()
RESTORE = f"{CSI}?1049l{CSI}?25h"
SCROLLED = "".join(f"history line {n:03d}\r\n" for n in range(1, 61)) + "$ "


class ScreenFeed:
    """A TerminalSession stand-in: a screen fed by hand; writes are recorded."""

    def __init__(self, cols: int = COLS, rows: int = ROWS) -> None:
        self.screen = TerminalScreen(cols, rows)
        self.stream = TerminalStream(self.screen)
        self.written: list[str] = []
        self._listeners: list[Callable[[str], None]] = []

    def feed(self, text: str) -> None:
        self.stream.feed(text)
        for listener in self._listeners:
            listener(text)

    def write(self, text: str) -> None:
        self.written.append(text)

    def resize(self, cols: int, rows: int) -> None:
        self.screen.resize(rows, cols)

    def add_listener(self, listener: Callable[[str], None]) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[str], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def set_visible(self, visible: bool) -> None:
        """Nothing: the screen is fed by hand."""

    def want_history(self, lines: int) -> None:
        """Nothing: the whole scrollback is here."""


STAGES = {
    "primary": PRIMARY,
    "alternate": PRIMARY + ALTERNATE,
    "restored": PRIMARY + ALTERNATE + RESTORE,
    "scrollback": SCROLLED,
}


class PaneSnapshotApp(App[None]):
    def __init__(self, stage: str = "primary") -> None:
        super().__init__()
        self.feed = ScreenFeed()
        self.feed.feed(STAGES[stage])
        self.stage = stage

    def compose(self) -> ComposeResult:
        yield TerminalPane(self.feed, title=f"BE · busy · {self.stage}")


app = PaneSnapshotApp()

if __name__ == "__main__":
    app.run()
