"""Running the real `semo` command of this venv as a subprocess, as a user would."""

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO

SEMO = Path(sys.executable).with_name("semo")


def environment_without_semo() -> dict[str, str]:
    """This process's environment less every SEMO_* and SUPABASE_* variable, so a test's
    `semo` reads only the office it is given."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("SEMO_", "SUPABASE_"))}


async def stop_process(process: asyncio.subprocess.Process, grace: float | None) -> None:
    """End `process` if it still runs: SIGTERM and up to `grace` seconds to exit, then
    SIGKILL; with `grace` None, SIGKILL at once."""
    if process.returncode is not None:
        return
    if grace is not None:
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), grace)
            return
        except TimeoutError:
            pass
    process.kill()
    await process.wait()


@asynccontextmanager
async def semo_engine(
    config: Path,
    env: Mapping[str, str],
    stderr: int | IO[bytes],
    *,
    args: Sequence[str] = (),
    prefix: Sequence[str] = (),
    grace: float | None = None,
) -> AsyncIterator[asyncio.subprocess.Process]:
    """`semo engine --config CONFIG ARGS` run in the config's folder (behind `prefix`, a
    command that runs it, if any), stopped on exit as `stop_process` says."""
    process = await asyncio.create_subprocess_exec(
        *prefix,
        str(SEMO),
        "engine",
        "--config",
        str(config),
        *args,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=stderr,
        env=dict(env),
        cwd=config.parent,
    )
    try:
        yield process
    finally:
        await stop_process(process, grace)
