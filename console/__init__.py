"""semo console: the Textual operator app; talks only to the Engine facade."""

from console import widths as _widths  # Rich measures with the terminal model's table

del _widths
