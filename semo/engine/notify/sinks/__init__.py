"""The notification sinks, one module each; `build_sink` makes the one a table names."""

from __future__ import annotations

from collections.abc import Mapping

from semo.engine.bus import EventBus
from semo.engine.notify.settings import NotifySink
from semo.engine.notify.sinks.base import Sink, SinkError


def build_sink(
    settings: NotifySink, label: str, *, bus: EventBus | None, env: Mapping[str, str]
) -> Sink:
    """The sink `settings` describes (SinkError when it cannot be built, e.g. a ${VAR} that
    is not set)."""
    if settings.sink == "console":
        from semo.engine.notify.sinks.console import ConsoleSink

        return ConsoleSink(settings, label, bus)
    if settings.sink == "webhook":
        from semo.engine.notify.sinks.webhook import WebhookSink

        return WebhookSink(settings, label, env)
    if settings.sink == "ntfy":
        from semo.engine.notify.sinks.ntfy import NtfySink

        return NtfySink(settings, label, env)
    if settings.sink == "email":
        from semo.engine.notify.sinks.email import EmailSink

        return EmailSink(settings, label, env)
    from semo.engine.notify.sinks.command import CommandSink

    return CommandSink(settings, label, env)


__all__ = ["Sink", "SinkError", "build_sink"]
