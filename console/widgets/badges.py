"""Short coloured labels for session states and durations, shared by the panels."""

from __future__ import annotations

from rich.text import Text

from engine.plain_text import plain

STATE_STYLES = {
    "creating": ("starting", "yellow"),
    "ready": ("ready", "green"),
    "executing": ("working", "cyan"),
    "waiting_input": ("asks you", "bold magenta"),
    "error": ("error", "bold red"),
    "terminated": ("ended", "dim"),
}


def state_badge(state: str) -> Text:
    label, style = STATE_STYLES.get(state, (plain(state, one_line=True), ""))
    return Text(f"● {label}", style=style)


def duration(seconds: float) -> str:
    """`<1m`, `5m`, `3h`: coarse on purpose, so a screen does not change every second."""
    if seconds < 60:
        return "<1m"
    if seconds < 3600:
        return f"{int(seconds // 60)}m"
    return f"{int(seconds // 3600)}h"
