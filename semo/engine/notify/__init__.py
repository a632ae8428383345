"""Notifications for the operator (docs/NOTIFY.md): notices from engine events, to sinks.

The sinks of `[[notify]]` (consoles, webhook, ntfy, SMTP, a command) never block the engine.
Nothing is imported here: the console imports `semo.engine.notify.osc` (standard library
only) before its first frame."""
