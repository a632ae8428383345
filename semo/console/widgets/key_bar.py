"""The footer: what the keys do where the focus is, fitted to the terminal's width.

How it works: docs/CONSOLE.md, "The key bar".
"""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.dom import DOMNode
from textual.screen import Screen
from textual.widgets import Input, Static

from semo.console.panel_text import (
    KEY_STYLE,
    KEY_STYLE_16,
    PANE_KEYS,
    PRIORITY,
    SCROLL_KEYS,
    Hint,
    fit_parts,
)


def fit(hints: list[Hint], width: int, lead: str = "") -> Text:
    """As many hints as fit in `width` cells, the most important first, in their order."""
    return Text.assemble(*fit_parts(hints, width, lead), no_wrap=True, end="")


def in_ansi_colours(text: Text) -> Text:
    """`text` with its keys in the 16-colour key style."""
    recoloured = text.copy()
    recoloured.spans = [
        span._replace(style=KEY_STYLE_16) if span.style == KEY_STYLE else span
        for span in text.spans
    ]
    return recoloured


def key_display(binding: Binding, screen: Screen[object]) -> str:
    if binding.key_display:
        return binding.key_display
    shown = screen.app.get_key_display(binding)
    return shown.upper() if shown.startswith("f") and shown[1:].isdigit() else shown


class KeyBar(Static):
    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        width: 100%;
        background: $footer-background;
        color: $footer-foreground;
        padding: 0 1;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, markup=False)
        self.text = Text()
        """What the bar shows now (tests read it)."""

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._changed)
        self.call_after_refresh(self.update_keys)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def on_resize(self) -> None:
        self.update_keys()

    def _changed(self, _screen: Screen[object]) -> None:
        self.update_keys()

    def update_keys(self) -> None:
        if not self.is_attached or not self.size.width:
            return
        text = self.compose_text(self.size.width)
        if self.app.current_theme.ansi:
            text = in_ansi_colours(text)
        if text.plain != self.text.plain or text.spans != self.text.spans:
            self.text = text
            self.update(text)

    def compose_text(self, width: int) -> Text:
        from semo.console.widgets.prefix_catcher import PrefixCatcher
        from semo.console.widgets.terminal_pane import TerminalPane

        screen = self.screen
        own = getattr(screen, "SCREEN_HINTS", None)
        if own:  # a screen that says what its keys are (the palette: its bindings are hidden)
            return fit([Hint(*hint) for hint in own], width)
        focused = screen.focused
        if isinstance(focused, PrefixCatcher):  # the prefix was typed outside a pane
            keys = [Hint(*h) for h in PANE_KEYS]
            keys.insert(2, Hint("Esc", "nothing", 1.5))
            return fit(keys, width, "next key:")
        if isinstance(focused, TerminalPane):
            if focused.scrolling:
                return fit([Hint(*h) for h in SCROLL_KEYS], width, "scrollback: ")
            lead = "next key: " if focused.armed else f"{focused.prefix_display} then "
            return fit([Hint(*h) for h in PANE_KEYS], width, lead)
        hints: list[Hint] = []
        node: DOMNode | None = focused
        if isinstance(focused, Input):  # a line being typed: the answer or the prompt
            hints += [Hint("Enter", "send", 0.5), Hint("Esc", "close", 0.6)]
            node = None
        while node is not None and node is not screen:  # keys of the focus itself
            extra = getattr(node, "KEY_HINTS", None)
            if extra:
                hints += [Hint(*hint) for hint in extra]
                break
            node = node.parent
        seen: set[str] = set()
        palette = screen.app.COMMAND_PALETTE_BINDING
        for key, (_node, binding, enabled, _tooltip) in screen.active_bindings.items():
            shown = binding.show or (key == palette and screen.app.ENABLE_COMMAND_PALETTE)
            action = binding.action.partition("(")[0]
            if not shown or not enabled or action in seen:
                continue
            seen.add(action)
            what = binding.description or action.replace("_", " ")
            priority = PRIORITY.get(action, 5) + len(hints) / 100
            hints.append(Hint(key_display(binding, screen), what, priority))
        return fit(hints, width)
