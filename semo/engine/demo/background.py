"""The demo engine `semo demo` starts in the background.

Started as `python -m semo.engine.demo.background`.

It runs the demo office (semo.engine.demo.office) with its control socket until SIGTERM or SIGINT
(`semo stop --demo`, or the console's confirmed "Stop the office"), and gives FE the demo job
once it runs. An office from semo.toml runs in the background as `semo engine --config ...`
(semo.engine.daemon) instead; both are started by semo.engine.control.launcher.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys

from semo.engine.control.server import stop_reason
from semo.engine.demo.office import DEMO_TASK, demo_config, new_demo_job, prepare_demo_repository
from semo.engine.engine import Engine
from semo.engine.hardening import make_non_dumpable
from semo.engine.logs import configure_logging

log = logging.getLogger("semo.demo")


async def run_demo_engine() -> int:
    prepare_demo_repository()
    engine = Engine(demo_config(), control=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    job_task: asyncio.Task[object] | None = None
    reason = "stopped by signal"
    try:
        await engine.start()
        job = await new_demo_job(engine)
        if job is not None and engine.jobs is not None:
            log.info("demo: FE got a job: %s", DEMO_TASK)
            job_task = asyncio.create_task(engine.jobs.execute_job(job.id))
        await stop.wait()
    except (OSError, ValueError) as error:
        log.error("the demo engine cannot run: %s", error)
        reason = f"failed: {error}"
        return 1
    finally:
        if job_task is not None:
            job_task.cancel()
            with contextlib.suppress(BaseException):
                await job_task
        await engine.stop(stop_reason(engine, reason))
    return 0


def main() -> int:
    make_non_dumpable()
    configure_logging("text", secrets=[])
    return asyncio.run(run_demo_engine())


if __name__ == "__main__":
    sys.exit(main())
