"""Notifications for the operator (docs/NOTIFY.md): notices from engine events, sent to the
sinks of `[[notify]]` (consoles, webhook, ntfy, SMTP, a command) without ever blocking the
engine."""

from __future__ import annotations

from engine.notify.models import Notice
from engine.notify.notifier import Notifier

__all__ = ["Notice", "Notifier"]
