"""A *spy* agent: run as a `generic` agent, it looks for secrets, writes what it found, then
sits at a `$ ` prompt like an idle shell.

    python -m tests.support.spy_agent REPORT.json

The report is one JSON object:

    {"pid": ..., "ppid": ...,
     "env": {...its own environment...},
     "parent_environ": "NAME=value\\n..." or null, "parent_environ_error": "..." or null,
     "parent_mem_error": "..." or null (null: it could read the parent's memory),
     "caps": "CapEff: ..."}

It is written to a temporary file and renamed, so a reader never sees half a report.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def _read_parent_environ(ppid: int) -> tuple[str | None, str | None]:
    try:
        data = Path(f"/proc/{ppid}/environ").read_bytes()
    except OSError as error:
        return None, f"{type(error).__name__}: {error.strerror}"
    return data.replace(b"\0", b"\n").decode("utf-8", "replace"), None


def _read_parent_mem(ppid: int) -> str | None:
    """None when a read of the parent's memory worked (the attack succeeded)."""
    try:
        maps = Path(f"/proc/{ppid}/maps").read_text().splitlines()
        start = int(maps[0].split("-")[0], 16)
        with open(f"/proc/{ppid}/mem", "rb") as mem:
            mem.seek(start)
            mem.read(16)
    except (OSError, ValueError, IndexError) as error:
        return f"{type(error).__name__}: {error}"
    return None


def _caps() -> str:
    try:
        lines = Path("/proc/self/status").read_text().splitlines()
    except OSError:
        return ""
    return " ".join(line for line in lines if line.startswith("CapEff"))


def main() -> int:
    report_path = Path(sys.argv[1])
    ppid = os.getppid()
    environ, environ_error = _read_parent_environ(ppid)
    report = {
        "pid": os.getpid(),
        "ppid": ppid,
        "env": dict(os.environ),
        "parent_environ": environ,
        "parent_environ_error": environ_error,
        "parent_mem_error": _read_parent_mem(ppid),
        "caps": _caps(),
    }
    tmp = report_path.with_name(report_path.name + ".tmp")
    tmp.write_text(json.dumps(report))
    tmp.rename(report_path)
    sys.stdout.write("spied\r\n$ ")
    sys.stdout.flush()
    while True:  # an idle shell: read and ignore input until the engine ends us
        if not sys.stdin.buffer.read1(4096):
            time.sleep(0.1)


if __name__ == "__main__":
    sys.exit(main())
