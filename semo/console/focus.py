"""Move the focus now, not after the keys already queued.

Textual's `Widget.focus()` defers the move (`call_later`): keys typed together with the one
that moves the focus (F4 then 1, Enter then text: one read when typing fast or over SSH) are
handled first, by the widget that had the focus. A key action moves it with `focus_now`.
"""

from __future__ import annotations

from textual.widget import Widget


def focus_now(widget: Widget) -> None:
    screen = widget.screen
    screen.set_focus(widget)
    if screen.focused is not widget:  # not focusable yet (just shown): Textual's later move
        widget.focus()
