"""The keys help (F1, ?, or the prefix then ?): what every key does where the focus is.

A modal screen over the console, so the panes keep their size; Escape, q or F1 close it.
"""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from semo.console.widgets.key_bar import KeyBar

PREFIX_KEYS = [
    ("d", "detach (the agents keep running)"),
    ("z", "zoom the pane to the whole terminal, again to leave"),
    ("n / p", "next / previous session"),
    ("q", "the question inbox"),
    ("a", "the next thing that needs you (questions, failed jobs, errors, stale agents)"),
    ("j", "the jobs view"),
    (":", "the command palette (every action)"),
    ("[", "scrollback: arrows, PgUp/PgDn, Home/End; q leaves"),
    ("o", "out of the pane, to the session list"),
    ("?", "this help"),
    ("the prefix", "sends the prefix chord itself to the agent"),
]
OUTSIDE_KEYS = [
    ("up / down, n / p", "pick a session"),
    ("Enter", "type into the selected session's pane"),
    ("Tab, shift+Tab", "next / previous panel (never into a pane: Enter opens it)"),
    ("F1, ?", "this help"),
    ("F2", "layout: one large pane, or 2, 4, 6"),
    ("F3", "zoom the selected pane (it takes the keys: the prefix then z leaves)"),
    ("F4", "the question inbox: 1-9 answer, y/n, Enter types an answer"),
    ("F5", "the jobs view: c create a job, x cancel one, Escape back"),
    ("", "d the job's diff (n/p files), Enter its agent's pane, s a shell in its worktree"),
    ("F6", "a prompt for the selected session (Escape closes)"),
    ("F7", "the next thing that needs you: the inbox, then failed, errored or stale sessions"),
    ("F8", "cancel the selected session's turn"),
    ("F9", "the pool: warm/cold, leased/idle, roles without a session (s starts one),"),
    ("", "open breakers and their retry time, jobs waiting for a session"),
    ("ctrl+p", "the command palette: new session, terminate, record, stop the office..."),
    ("ctrl+q", "detach (the agents keep running)"),
    ("ctrl+r", "start the engine again (only when it is gone)"),
]


class KeysHelp(ModalScreen[None]):
    DEFAULT_CSS = """
    KeysHelp { align: center middle; }
    KeysHelp > VerticalScroll {
        width: 76; max-width: 100%; height: auto; max-height: 100%;
        border: round $accent; background: $surface; padding: 0 1;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,f1,question_mark", "close", "Close"),
    ]

    def __init__(self, prefix: str, *, in_pane: bool) -> None:
        super().__init__()
        self.prefix = prefix
        self.in_pane = in_pane

    def compose(self) -> ComposeResult:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold", no_wrap=True)
        table.add_column()
        where = "in a pane" if self.in_pane else "outside a pane"
        table.add_row(Text("Keys", style="bold underline"), Text(f"(the focus is {where})"))
        if self.in_pane:
            table.add_row("", f"every key goes to the agent except {self.prefix}; then:")
            rows = PREFIX_KEYS
        else:
            rows = OUTSIDE_KEYS
        for key, what in rows:
            table.add_row(key, what)
        table.add_row("", "")
        if self.in_pane:
            table.add_row("", "outside a pane: F-keys, ctrl+p palette, ctrl+q detach")
        else:
            table.add_row(self.prefix, "then d z n p q j : [ ? as in a pane; twice: into the pane")
        table.add_row("Escape", "closes this help")
        with VerticalScroll():
            yield Static(table)
        yield KeyBar()

    def action_close(self) -> None:
        self.dismiss(None)
