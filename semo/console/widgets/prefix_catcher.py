"""The prefix chord outside a pane: the next key, whatever it is, is the command.

A one-cell focusable widget instead of a modal screen: the prefix moves the focus to it at once
(semo/console/focus.py focus_now), so a key typed right after the prefix (in the same read: typing
fast, SSH, `tmux send-keys C-] d`) reaches it; a modal pushed by the prefix was not there yet
for that key, which went to the session list instead. The footer says what the next key does
(semo/console/widgets/key_bar.py); the focus goes back where it was.
"""

from __future__ import annotations

from collections.abc import Callable

from textual import events
from textual.widget import Widget

from semo.console.focus import focus_now


class PrefixCatcher(Widget, can_focus=True):
    DEFAULT_CSS = """
    PrefixCatcher { dock: top; width: 1; height: 1; background: $panel; }
    """

    def __init__(self, run: Callable[[str], None], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._run = run
        self._back: Widget | None = None

    def render(self) -> str:
        return ""

    def arm(self, back: Widget | None) -> None:
        """Catch the next key; then the focus goes back to `back`."""
        self._back = back
        focus_now(self)

    def on_key(self, event: events.Key) -> None:
        event.stop()
        event.prevent_default()
        back, self._back = self._back, None
        if back is not None and back.is_attached:
            focus_now(back)
        else:
            self.screen.set_focus(None)
        if event.key != "escape":
            self._run(event.key)
