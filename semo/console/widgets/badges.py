"""Short coloured labels for session states and durations, shared by the panels.

One word per state everywhere (session list, pane titles, help): the operator never sees the
engine's `waiting_input`, only "asks you". Glyphs are plain ASCII or in every common terminal
font.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from semo.console.attention import JOB_FAILED, STALE
from semo.engine.plain_text import plain
from semo.engine.protocol.state import STATE_WORDS

if TYPE_CHECKING:  # the first frame (semo/console/first_frame.py) uses this module without Rich
    from rich.text import Text

_STYLES = {
    "creating": "yellow",
    "ready": "green",
    "executing": "cyan",
    "waiting_input": "bold magenta",
    "error": "bold red",
    "terminated": "dim",
}
#: each state: its words (semo.engine.protocol.state.STATE_WORDS) and its style
STATE_STYLES = {state: (STATE_WORDS[state], style) for state, style in _STYLES.items()}
LOST = "lost"
"""A session of an engine that is gone (as `semo sessions` says it)."""
STATE_STYLES[LOST] = (LOST, "bold red")
STATE_STYLES[STALE] = (STALE, "bold yellow")
STATE_STYLES[JOB_FAILED] = ("failed", "bold red")  # its last job; seen: "ready" again


def state_word(state: str) -> str:
    """The state in words ("asks you" for `waiting_input`)."""
    return STATE_STYLES.get(state, (plain(state, one_line=True), ""))[0]


def state_badge(state: str) -> Text:
    from rich.text import Text

    label, style = STATE_STYLES.get(state, (plain(state, one_line=True), ""))
    return Text(f"* {label}", style=style, end="")


def duration(seconds: float) -> str:
    """`<1m`, `5m`, `3h`: coarse on purpose, so a screen does not change every second."""
    if seconds < 60:
        return "<1m"
    if seconds < 3600:
        return f"{int(seconds // 60)}m"
    return f"{int(seconds // 3600)}h"


def clip(text: str, width: int) -> str:
    """`text` on one line, at most `width` cells wide (an ellipsis marks the cut)."""
    text = plain(text, one_line=True)
    if width <= 0:
        return ""
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"
