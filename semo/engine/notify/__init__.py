"""Notifications for the operator (docs/NOTIFY.md): notices from engine events, sent to the
sinks of `[[notify]]` (consoles, webhook, ntfy, SMTP, a command) without ever blocking the
engine. Nothing is imported here: the console imports `engine.notify.osc` (standard library
only) before its first frame."""
