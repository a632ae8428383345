"""The command palette: Textual's, with a plain search glyph and the key bar under it.

Textual's own glyph is an emoji two cells wide that common terminal fonts draw as a box."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.command import CommandPalette, SearchIcon

from semo.console.widgets.key_bar import KeyBar


class SemoPalette(CommandPalette):
    SCREEN_HINTS: ClassVar[list[tuple[str, str, float]]] = [
        ("type", "search", 3.0),
        ("up/down", "choose", 2.0),
        ("Enter", "run", 0.5),
        ("Esc", "close", 0.6),
    ]

    def compose(self) -> ComposeResult:
        yield from super().compose()
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one(SearchIcon).icon = ">"
