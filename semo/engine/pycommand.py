"""The command line of a Python process semo starts: this interpreter, `-P`, a module.

`python -m MODULE` puts the current folder first on `sys.path`; semo's processes start in the
operator's repository (`semo console`) or an agent's folder, so a committed `json.py` there
would be imported into the engine with its secrets. `-P` (Python >= 3.11, PYTHONSAFEPATH)
leaves that folder out and keeps PYTHONPATH, the site-packages and their `.pth` files, so
editable and PYTHONPATH installs still import semo. docs/SECURITY.md has the reasoning.
"""

from __future__ import annotations

import sys


def python_module(module: str, *args: str) -> list[str]:
    """`[python, "-P", "-m", module, *args]` with this process's interpreter."""
    return [sys.executable, "-P", "-m", module, *args]
