"""A command of the operator's: run with the notice as JSON on stdin.

It is killed after `timeout`, and gets the engine's environment without the engine's own
credentials."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping

from semo.engine.notify.models import Notice
from semo.engine.notify.settings import NotifySink
from semo.engine.notify.sinks.base import Sink, SinkError

_KEPT_OUT = ("SEMO_", "SUPABASE_")


class CommandSink(Sink):
    def __init__(self, settings: NotifySink, label: str, env: Mapping[str, str]) -> None:
        super().__init__(settings, label)
        self.env = {k: v for k, v in env.items() if not k.upper().startswith(_KEPT_OUT)}

    async def send(self, notice: Notice) -> str:
        argv = self.settings.command
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                env=self.env,
                start_new_session=True,
            )
        except OSError as error:
            raise SinkError(
                f"cannot run {argv[0]}: {error.strerror or error}", retry=False
            ) from None
        try:
            _, stderr = await asyncio.wait_for(
                process.communicate((notice.to_json() + "\n").encode()), self.settings.timeout
            )
        except TimeoutError:
            await _kill(process)
            raise SinkError(
                f"{argv[0]} did not finish within {self.settings.timeout:g} s"
            ) from None
        except BaseException:  # cancelled (the delivery's own timeout, a stop): never left running
            await _kill(process)
            raise
        if process.returncode != 0:
            last = stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
            raise SinkError(f"{argv[0]} exited {process.returncode}: {last[0][:200]}")
        return f"{argv[0]} exited 0"

    def where(self) -> str:
        return self.settings.command[0]


async def _kill(process: asyncio.subprocess.Process) -> None:
    """Kill the command's process group and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        await asyncio.shield(process.wait())
