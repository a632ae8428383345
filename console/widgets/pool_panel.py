"""The pool panel: every session of the office by role, with its state, kind and age."""

from __future__ import annotations

from textual.widgets import DataTable

from console.text import rich_text
from console.widgets.badges import duration, state_badge
from engine.sessions.pool import PoolStatus


class PoolPanel(DataTable[object]):
    BORDER_TITLE = "Pool"

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.add_columns("role", "state", "kind", "age")

    def show(self, status: PoolStatus | None) -> None:
        if status is None:
            return
        rows = sorted(status.sessions.values(), key=lambda s: (s.role, s.age_s))
        shown = (
            [(s.session_id, s.role, s.state, s.warm, s.leased, duration(s.age_s)) for s in rows],
            dict(status.down),
            status.total,
            status.max_sessions,
        )
        if shown == getattr(self, "_shown", None):
            return  # nothing visible changed: no rebuild, no repaint (an idle console is silent)
        self._shown = shown
        self.clear()
        for session in rows:
            kind = ("warm" if session.warm else "cold") + (" ·leased" if session.leased else "")
            self.add_row(
                rich_text(session.role, one_line=True),
                state_badge(session.state),
                kind,
                duration(session.age_s),
                key=session.session_id,
            )
        for role, reason in status.down.items():
            self.add_row(
                rich_text(role, one_line=True),
                state_badge("error"),
                rich_text(reason[:20], one_line=True),
                "",
                key=f"down:{role}",
            )
        self.border_subtitle = f"{status.total}/{status.max_sessions}"
