"""The console's report of an engine that died under it, sent to the office's remote sinks.

The console shows the death on its own terminal at once (`SemoApp._engine_died`); the webhook,
ntfy, mail and command sinks of semo.toml hear of it through `semo notify engine-died`, started
here in the background (its own session: it outlives a console that quits) with its output
appended to the engine's log. That command reports only a death this machine can confirm, and
only once per engine, however many consoles saw it (semo/engine/notify/death.py)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from pathlib import Path


def report_in_background(config: Path, engine_id: str, reason: str, log: Path | None) -> None:
    """Start `semo notify engine-died` for `engine_id`; never raises (a console that cannot
    report still shows the death, and the next engine reports what a console did not)."""
    command = [
        sys.executable, "-m", "semo", "notify", "engine-died",
        "--config", str(config.absolute()), "--reason", reason[:500], "--", engine_id,
    ]  # fmt: skip
    try:
        with contextlib.ExitStack() as stack:
            out = stack.enter_context(log.open("ab")) if log is not None else subprocess.DEVNULL
            child = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
    except OSError:
        return
    threading.Thread(target=child.wait, name="engine death report", daemon=True).start()
