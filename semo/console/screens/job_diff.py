"""The diff view of a job (`d` in the jobs view): its files one at a time, coloured, scrollable.

The heading says which file of how many, its status and its line counts; `n` / `p` (or `]` /
`[`) go to the next / previous file, the arrows, PgUp/PgDn, Home/End scroll (left and right
too: lines are not wrapped), Escape goes back. Every line is text from the repository, so
untrusted: semo/console/diff_text.py shows it literally (no markup, control characters visible).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Header, RichLog, Static

from semo.console.diff_text import FileChange, file_heading, patch_lines
from semo.console.text import content
from semo.console.widgets.key_bar import KeyBar


class JobDiffScreen(Screen[None]):
    """One job's diff: ``files`` in order, ``title`` above them (the job and its branch)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "back", "Back"),
        Binding("n,right_square_bracket", "file(1)", "Next file"),
        Binding("p,left_square_bracket", "file(-1)", "Previous file"),
    ]
    DEFAULT_CSS = """
    JobDiffScreen #diff-heading { height: 1; background: $boost; padding: 0 1; }
    JobDiffScreen #diff-body { height: 1fr; }
    """

    def __init__(self, title: str, files: Sequence[FileChange]) -> None:
        super().__init__()
        self.diff_title = title
        self.files = list(files)
        self.index = 0
        self.heading_text = ""

    def compose(self) -> ComposeResult:
        yield Header(icon="*")
        yield Static(id="diff-heading", markup=False)
        yield RichLog(id="diff-body", wrap=False, markup=False, highlight=False, auto_scroll=False)
        yield KeyBar()

    def on_mount(self) -> None:
        self.title = "semo · diff"
        self.sub_title = self.diff_title
        self.show_file()
        self.query_one("#diff-body", RichLog).focus()

    def show_file(self) -> None:
        """The current file's heading and lines, scrolled to its top."""
        body = self.query_one("#diff-body", RichLog)
        body.clear()
        if not self.files:
            self.heading_text = "no changes: the job's branch is its base"
            body.write(Text("nothing to show"))
        else:
            change = self.files[self.index]
            self.heading_text = file_heading(change, self.index + 1, len(self.files))
            for line in patch_lines(change.patch):
                body.write(line)
        self.query_one("#diff-heading", Static).update(content(self.heading_text, one_line=True))
        body.scroll_home(animate=False)

    def action_file(self, step: int) -> None:
        if self.files:
            self.index = (self.index + step) % len(self.files)
            self.show_file()

    def action_back(self) -> None:
        self.dismiss()
