"""A job's diff as the console's diff view shows it: one file at a time, as Rich Text.

Each line is coloured by what it is (added, removed, hunk, header), never markup, control
characters made visible (semo/console/text.py), tabs expanded.

    lines = patch_lines(file.patch)       # [Text, ...] for a RichLog
    head = file_heading(file, 2, 5)       # "2/5  M app/login.py  +12 -3"
"""

from __future__ import annotations

from typing import Protocol

from rich.text import Text

from semo.engine.plain_text import plain

TAB_SIZE = 4
STYLES = {"+": "green", "-": "red", "@": "cyan", "\\": "dim"}
HEADERS = (
    "diff --git ",
    "index ",
    "--- ",
    "+++ ",
    "new file mode",
    "deleted file mode",
    "similarity",
    "rename ",
    "old mode",
    "new mode",
    "Binary files",
)


class FileChange(Protocol):
    """One file of a job's diff (semo.engine.jobwork's FileDiff has these)."""

    path: str
    status: str
    added: int | None
    removed: int | None
    patch: str


def counts(added: int | None, removed: int | None) -> str:
    """`+12 -3`, or `binary` when git could not count lines."""
    if added is None or removed is None:
        return "binary"
    return f"+{added} -{removed}"


def file_heading(change: FileChange, index: int, total: int) -> str:
    """`2/5  M app/login.py  +12 -3` (a rename shows `old -> new`)."""
    old_path = getattr(change, "old_path", None)
    path = f"{old_path} -> {change.path}" if old_path else change.path
    return plain(
        f"{index}/{total}  {change.status} {path}  {counts(change.added, change.removed)}",
        one_line=True,
    )


def patch_lines(patch: str) -> list[Text]:
    """The patch's lines, each styled by what it is: headers bold (before the first hunk of a
    file), hunk lines cyan, added green, removed red."""
    lines: list[Text] = []
    in_hunk = False
    for raw in patch.splitlines() or ["(no textual change)"]:
        text = Text(plain(raw.replace("\t", " " * TAB_SIZE)), end="", no_wrap=True)
        if raw.startswith("diff --git "):
            in_hunk = False
        if raw.startswith("@@"):
            in_hunk = True
            text.stylize("cyan")
        elif not in_hunk and raw.startswith(HEADERS):
            text.stylize("bold")
        elif in_hunk and raw[:1] in STYLES:
            text.stylize(STYLES[raw[:1]])
        lines.append(text)
    return lines
