"""Running the real `semo` command of this venv as a subprocess, as a user would."""

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO

SEMO = Path(sys.executable).with_name("semo")
REPO = Path(__file__).resolve().parents[2]


def environment_without_semo() -> dict[str, str]:
    """This process's environment less every SEMO_* and SUPABASE_* variable, so a test's
    `semo` reads only the office it is given."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("SEMO_", "SUPABASE_"))}


def semo_env(**extra: str) -> dict[str, str]:
    """`environment_without_semo()` with this checkout on PYTHONPATH (the scripted agents are
    modules of tests/), and `extra`."""
    return environment_without_semo() | {"PYTHONPATH": str(REPO)} | extra


async def run_semo(
    *args: str,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
) -> subprocess.CompletedProcess[str]:
    """`semo ARGS` run to its end in a worker thread (default environment:
    `semo_env()`), its output as text; TimeoutExpired after `timeout` seconds."""
    return await asyncio.to_thread(
        subprocess.run,
        [str(SEMO), *args],
        capture_output=True,
        text=True,
        env=dict(env) if env is not None else semo_env(),
        cwd=cwd,
        timeout=timeout,
    )


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


@asynccontextmanager
async def engine_in(
    folder: Path, env: Mapping[str, str], *, grace: float = 60.0, log: str = "engine.log"
) -> AsyncIterator[asyncio.subprocess.Process]:
    """`semo engine` of `folder/semo.toml`, with its own short XDG_RUNTIME_DIR (removed after)
    and its stderr appended to `folder/LOG`; SIGTERM and `grace` seconds on exit."""
    runtime = Path(tempfile.mkdtemp(prefix="semo-e"))
    try:
        with (folder / log).open("ab") as sink:
            engine_env = {**env, "XDG_RUNTIME_DIR": str(runtime)}
            async with semo_engine(folder / "semo.toml", engine_env, sink, grace=grace) as process:
                yield process
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


async def start_semo(
    *args: str, cwd: Path, env: Mapping[str, str] | None = None
) -> asyncio.subprocess.Process:
    """`semo ARGS` started in `cwd` (default environment: `semo_env()`) and left running, its
    stdout and stderr piped (read them with `communicate()`), e.g. `semo job create --wait`."""
    return await asyncio.create_subprocess_exec(
        str(SEMO),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(env) if env is not None else semo_env(),
        cwd=cwd,
    )
