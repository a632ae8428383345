"""The commands panel: the office's recent commands (newest first) and how they ended."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from engine.store.models import AgentCommand

STATUS_STYLES = {"pending": "yellow", "processing": "cyan", "completed": "green", "failed": "red"}


class CommandsPanel(DataTable[object]):
    BORDER_TITLE = "Commands"

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.add_columns("at", "command", "status", "result")

    def show(self, commands: list[AgentCommand], results: dict[str, str]) -> None:
        """`results`: a short text per finished command id (its error or its outcome)."""
        self.clear()
        for command in commands:
            style = STATUS_STYLES.get(command.status, "")
            self.add_row(
                command.created_at.strftime("%H:%M:%S"),
                command.command_type,
                Text(command.status, style=style),
                results.get(command.id, ""),
                key=command.id,
            )
