"""The console's theme for the terminal's colours: ANSI colours where only 16 exist.

Textual's default theme is truecolor; on a 16-colour terminal (TERM=screen, xterm, linux) its
orange accent comes out bright red, the colour of errors, and its greys merge. There the
console uses Textual's `ansi-dark` theme: the terminal's own colours, red only for errors.
"""

from __future__ import annotations

from typing import Literal

Colours = Literal["auto", "16", "full"]
#: Rich's names for a terminal with 16 colours (or fewer)
SIXTEEN_COLOUR_SYSTEMS = frozenset({"standard", "windows"})
ANSI_THEME = "ansi-dark"


def theme_for(colours: Colours, detected: str | None) -> str | None:
    """The theme to use (None: Textual's default) for `colours` and the detected system."""
    if colours == "16" or (colours == "auto" and detected in SIXTEEN_COLOUR_SYSTEMS):
        return ANSI_THEME
    return None
