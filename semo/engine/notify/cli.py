"""`semo notify test` and `semo notify engine-died`.

`test`: a test notification to every sink of semo.toml, one result a line; `engine-died`: a
console's report of an engine that died under it (notify/death.py)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from semo.engine.plain_text import plain


def add_notify_commands(commands: Any) -> None:
    notify = commands.add_parser(
        "notify",
        help="notifications ([[notify]] in semo.toml): `semo notify test`",
        description="Notifications (docs/NOTIFY.md).",
    )
    actions = notify.add_subparsers(dest="notify_command", required=True, metavar="ACTION")
    test = actions.add_parser(
        "test",
        help="send a test notification to every [[notify]] sink and print each result",
        description=(
            "Send one test notification to every sink of [[notify]] in the config (one attempt "
            "each, within its timeout) and print what each did. A console sink writes the "
            "desktop notification to this terminal. Exit 0 when every sink worked, 1 when one "
            "failed, 2 for a configuration error."
        ),
    )
    test.add_argument(
        "--config", type=Path, default=Path("semo.toml"), help="config file (default ./semo.toml)"
    )
    test.set_defaults(handler=_run_test)
    died = actions.add_parser(
        "engine-died",
        help="report an engine that died to the remote sinks, once (the console runs it)",
        description=(
            "Report that ENGINE_ID died (its socket dropped without a goodbye) to every sink "
            "of [[notify]] that takes engine_died, except consoles: only when this machine "
            "knows its process is gone, and only once per engine whoever else saw it (other "
            "consoles, the next engine). An attached console runs this in the background; "
            "one result a line. Exit 0 unless a sink failed (1) or the config is wrong (2)."
        ),
    )
    died.add_argument("engine_id", metavar="ENGINE_ID")
    died.add_argument("--reason", default="its connection dropped", help="what the console saw")
    died.add_argument(
        "--config", type=Path, default=Path("semo.toml"), help="config file (default ./semo.toml)"
    )
    died.set_defaults(handler=_run_engine_died)


def _run_test(args: argparse.Namespace) -> int:
    from semo.engine.config import ConfigError, load_config

    try:
        config = load_config(args.config)
    except ConfigError as error:
        print(f"semo notify test: {error}", file=sys.stderr)
        return 2
    for warning in config.warnings:
        print(f"semo notify test: warning: {warning}", file=sys.stderr)
    results = asyncio.run(send_tests(config.office.name, config.notify_sinks()))
    for label, ok, detail in results:
        print(plain(f"{label}: {'ok' if ok else 'FAILED'}: {detail}", one_line=True))
    return 0 if all(ok for _, ok, _ in results) else 1


def _run_engine_died(args: argparse.Namespace) -> int:
    from semo.engine.config import ConfigError, load_config
    from semo.engine.control.paths import office_paths
    from semo.engine.notify.death import report_seen_death

    try:
        config = load_config(args.config)
    except ConfigError as error:
        print(f"semo notify engine-died: {error}", file=sys.stderr)
        return 2
    paths = office_paths(config.office.name, config.store_config())
    results = asyncio.run(report_seen_death(config, paths, args.engine_id, args.reason))
    for label, ok, detail in results:
        shown = f"{label}: {'ok' if ok else 'FAILED'}: {detail}"
        print(plain(f"semo notify engine-died {args.engine_id}: {shown}", one_line=True))
    return 0 if all(ok for _, ok, _ in results) else 1


async def send_tests(office: str, sinks: list[Any]) -> list[tuple[str, bool, str]]:
    """(label, worked, what happened) for each sink, after one test notification each."""
    from semo.engine.notify.notifier import deliver
    from semo.engine.notify.sinks import SinkError, build_sink
    from semo.engine.notify.sources import probe_notice
    from semo.engine.notify.text import redact

    notice = probe_notice(office)
    results: list[tuple[str, bool, str]] = []
    for index, settings in enumerate(sinks):
        label = settings.label(index)
        if settings.sink == "console":
            results.append((label, *_console_test(notice)))
            continue
        try:
            sink = build_sink(settings, label, bus=None, env=os.environ)
        except SinkError as error:  # its message starts with the label, for the engine's log
            results.append((label, False, str(error).removeprefix(f"{label}: ")))
            continue
        try:
            detail = await deliver(sink, notice, retries=0)
            results.append((label, True, f"{sink.where()}: {detail}"))
        except SinkError as error:
            results.append((label, False, f"{sink.where()}: {redact(str(error), sink.secrets)}"))
        finally:
            await sink.close()
    return results


def _console_test(notice: Any) -> tuple[bool, str]:
    from semo.engine.notify.osc import notification_sequences

    if not sys.stdout.isatty():
        return True, "skipped: not a terminal (a running engine's consoles show them)"
    sys.stdout.write(
        notification_sequences(notice.headline, notice.line(), tmux=bool(os.environ.get("TMUX")))
    )
    sys.stdout.flush()
    return True, "OSC 9 / OSC 777 and a bell written to this terminal"
