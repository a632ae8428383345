"""The commands panel: the office's recent commands (newest first) and how they ended."""

from __future__ import annotations

from textual.widgets import DataTable

from console.text import rich_text
from engine.store.models import AgentCommand

STATUS_STYLES = {"pending": "yellow", "processing": "cyan", "completed": "green", "failed": "red"}


class CommandsPanel(DataTable[object]):
    BORDER_TITLE = "Commands"

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.add_columns("at", "command", "status", "result")

    def show(self, commands: list[AgentCommand], results: dict[str, str]) -> None:
        """`results`: a short text per finished command id (its error or its outcome)."""
        shown = [(c.id, c.status, results.get(c.id, "")) for c in commands]
        if shown == getattr(self, "_shown", None):
            return  # nothing changed: no rebuild, no repaint
        self._shown = shown
        self.clear()
        for command in commands:
            style = STATUS_STYLES.get(command.status, "")
            self.add_row(
                command.created_at.strftime("%H:%M:%S"),
                rich_text(command.command_type, one_line=True),
                rich_text(command.status, one_line=True, style=style),
                rich_text(results.get(command.id, ""), one_line=True),
                key=command.id,
            )
