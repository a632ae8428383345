"""An engine's death reported once to the office's sinks, whoever saw it first on this machine.

How it works: docs/NOTIFY.md, "An engine that died under a console".
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from semo.engine.control.paths import OfficePaths, private_dir, state_dir

if TYPE_CHECKING:
    from semo.engine.config import SemoConfig

log = logging.getLogger("semo.notify")

__all__ = ["claim_report", "report_seen_death"]

#: claims older than this are removed when a new one is made (the dead run is long forgotten)
FORGET_AFTER = 30 * 24 * 3600.0


def claims_dir() -> Path:
    return state_dir() / "notified"


def claim_report(paths: OfficePaths, engine_id: str) -> bool | None:
    """True for the first caller on this machine that reports `engine_id`'s death in the
    office of `paths`; False when someone did already; None when the claim cannot be made
    (the folder cannot be written: the caller decides)."""
    digest = hashlib.sha256(f"{paths.label}\0{engine_id}".encode()).hexdigest()[:32]
    folder = claims_dir()
    try:
        private_dir(folder)
        descriptor = os.open(folder / f"died-{digest}", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return False
    except OSError as error:
        log.warning("notify: cannot claim the report of engine %s's death: %s", engine_id, error)
        return None
    os.close(descriptor)
    _forget_old(folder)
    return True


def _forget_old(folder: Path) -> None:
    cutoff = time.time() - FORGET_AFTER
    with contextlib.suppress(OSError):
        for path in folder.glob("died-*"):
            with contextlib.suppress(OSError):
                if path.stat().st_mtime < cutoff:
                    path.unlink()


async def report_seen_death(
    config: SemoConfig, paths: OfficePaths, engine_id: str, reason: str
) -> list[tuple[str, bool, str]]:
    """A console saw `engine_id` go away without a goodbye: the office's remote sinks that
    take ``engine_died`` get one notice, if the engine is gone and nobody reported it yet.
    (label, worked, what happened) per sink; empty when nothing was sent."""
    from semo.engine.liveness import local_engine_gone
    from semo.engine.notify.notifier import deliver
    from semo.engine.notify.secrets import config_secrets
    from semo.engine.notify.sinks import SinkError, build_sink
    from semo.engine.notify.sources import engine_died
    from semo.engine.notify.text import redact

    sinks = [
        (settings.label(index), settings)
        for index, settings in enumerate(config.notify_sinks())
        if settings.sink != "console" and "engine_died" in settings.events
    ]
    if not sinks:
        return []
    gone = await asyncio.to_thread(local_engine_gone, engine_id)
    if gone is None:
        log.info("notify: engine %s may still run; its consoles' report is not sent", engine_id)
        return []
    if not await asyncio.to_thread(claim_report, paths, engine_id):
        return []  # reported already (another console, the next engine), or cannot tell
    secrets = config_secrets(config)
    what = (
        f"the engine stopped without ending its work ({gone}; seen by an attached console: "
        f"{reason}); the next engine of the office takes over what it left"
    )
    notice = engine_died(config.office.name, engine_id, redact(what, secrets))
    results: list[tuple[str, bool, str]] = []
    for label, settings in sinks:
        try:
            sink = build_sink(settings, label, bus=None, env=os.environ)
        except SinkError as error:
            results.append((label, False, redact(str(error), secrets)))
            continue
        hidden = [*secrets, *sink.secrets]
        try:
            detail = await deliver(sink, notice, functools.partial(_hide, hidden=hidden))
            results.append((label, True, detail))
        except SinkError as error:
            results.append((label, False, _hide(str(error), hidden)))
        finally:
            await sink.close()
    return results


def _hide(text: str, hidden: list[str]) -> str:
    from semo.engine.notify.text import redact

    return redact(text, hidden)
