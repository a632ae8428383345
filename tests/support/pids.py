"""Process ids for tests."""

from __future__ import annotations

import subprocess


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid
