"""The console's screens."""

from console import widths as _widths  # Rich measures with the terminal model's table

del _widths
