"""The console's screens."""

from semo.console import widths as _widths  # Rich measures with the terminal model's table

del _widths
