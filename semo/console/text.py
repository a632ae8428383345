"""Text from agents and the store, as the console shows it: never markup, no control characters.

Every string the console did not write itself (a question, its options, an error, a result, a
reason) reaches Textual through these two functions, never as a markup string: `[/x]` in a
question is shown as typed, `[@click=app.quit]` is not a link, and `ESC ] 52 ; ...` is shown as
`\\x1b]52;...` (semo.engine.plain_text) instead of writing the operator's clipboard.
"""

from __future__ import annotations

from rich.text import Text
from textual.content import Content

from semo.engine.plain_text import plain


def content(text: str, *, one_line: bool = False, style: str = "") -> Content:
    """A Textual Content showing `text` literally (for Static, titles, options)."""
    shown = Content(plain(text, one_line=one_line))
    return shown.stylize(style) if style else shown


def rich_text(text: str, *, one_line: bool = False, style: str = "") -> Text:
    """A Rich Text showing `text` literally (for DataTable cells)."""
    return Text(plain(text, one_line=one_line), style=style, end="")
