"""Logging for the headless engine: one line per record, as text or as JSON.

    configure_logging("json", secrets=[database_password, supabase_key])

JSON lines carry ``ts`` (UTC, ISO 8601), ``level``, ``logger``, ``msg`` and any ``extra=`` fields
a call passed; exceptions go in ``exc``. Every registered secret is replaced by ``***`` in the
final line, whatever put it there (a DSN in an error message, a key in a library's log).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

LogFormat = Literal["text", "json"]
REDACTED = "***"
_STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


class RedactingHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes formatted lines with each secret (4+ characters) replaced by ***."""

    def __init__(self, stream: TextIO, secrets: Iterable[str] = ()) -> None:
        super().__init__(stream)
        self.secrets = sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        for secret in self.secrets:
            line = line.replace(secret, REDACTED)
        return line


def configure_logging(
    fmt: LogFormat = "text",
    *,
    level: int = logging.INFO,
    secrets: Iterable[str] = (),
    stream: TextIO | None = None,
) -> logging.Handler:
    """Send every record of the process to `stream` (stderr) in `fmt`; returns the handler."""
    handler = RedactingHandler(stream or sys.stderr, secrets)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, RedactingHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for noisy in ("httpx", "httpcore", "websockets", "hpack"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
    return handler
