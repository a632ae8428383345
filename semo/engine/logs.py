"""Logging for the headless engine: one entry per record, as text or as JSON.

    configure_logging("json", secrets=[database_password, supabase_key])
    add_secret(session_token)      # a secret made at run time (discard_secret when it is gone)

How it works: docs/OPERATIONS.md, "Logs".
"""

from __future__ import annotations

import json
import logging
import math
import re
import sys
import threading
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Literal, TextIO
from urllib.parse import quote, quote_plus

from semo.engine.plain_text import plain, plain_json

LogFormat = Literal["text", "json"]
REDACTED = "***"
MIN_SECRET = 4
_STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"

#: `NAME=value`, `NAME: value`, `'NAME': 'value'`, `"NAME": "value"` (JSON-escaped quotes too)
#: for a name that says it holds a secret; and `Bearer <credential>`
_NAMED_SECRET = re.compile(
    r"""(?ix)
    (?P<head>
        \b[a-z0-9_]*(?:token|secret|passw(?:or)?d|api_?key|access_?key|private_?key|credentials?)
        [a-z0-9_]*
        (?:\\?['"])?\s*[:=]\s*(?:\\?['"])?
      | \bbearer\s+
    )
    (?P<value>[^\s'"\\,;&)}\]]{4,})
    """
)

_lock = threading.Lock()
_registered: dict[str, int] = {}  # secret -> how many holders added it
_version = 0


def add_secret(secret: str) -> None:
    """Redact `secret` in every log line of the process from now on."""
    global _version
    if len(secret) < MIN_SECRET:
        return
    with _lock:
        _registered[secret] = _registered.get(secret, 0) + 1
        _version += 1


def discard_secret(secret: str) -> None:
    """Undo one `add_secret` (a session's token, once the session is gone)."""
    global _version
    with _lock:
        count = _registered.get(secret, 0)
        if count <= 1:
            if _registered.pop(secret, None) is None:
                return
        else:
            _registered[secret] = count - 1
        _version += 1


def _json_inner(text: str, *, ascii_only: bool) -> str:
    return (json.dumps(text) if ascii_only else plain_json(text))[1:-1]


def _repr_inner(text: str) -> tuple[str, str]:
    """The body of repr(text) in single quotes (`'` escaped) and in double quotes."""
    single = repr(text + "'\"")[1:-4]  # both quotes present: repr picks ' and escapes it
    return single, single.replace("\\'", "'")


def _escaped_forms(text: str) -> set[str]:
    forms = {
        text,
        _json_inner(text, ascii_only=True),
        _json_inner(text, ascii_only=False),
        *_repr_inner(text),
        repr(text.encode("utf-8", "surrogatepass"))[2:-1],
        quote(text, safe=""),
        quote(text),
        quote_plus(text),
    }
    return forms


def secret_forms(secret: str) -> set[str]:
    """Every string that `secret` can appear as in a log line (see the module docstring)."""
    first = _escaped_forms(secret)
    forms = set(first)
    for form in first:
        forms.add(_json_inner(form, ascii_only=True))
        forms.add(_json_inner(form, ascii_only=False))
        forms.update(_repr_inner(form))
    forms |= {plain(form) for form in forms}
    return {form for form in forms if len(form) >= MIN_SECRET}


class Redactor:
    """Replaces every form of each secret by `REDACTED`, longest first."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = sorted({s for s in secrets if len(s) >= MIN_SECRET}, key=len, reverse=True)
        self._own = frozenset(self.secrets)
        self._version = -1
        self._pattern: re.Pattern[str] | None = None

    def _current(self) -> re.Pattern[str] | None:
        if self._version != _version:
            with _lock:
                version, secrets = _version, self._own | set(_registered)
            forms: set[str] = set()
            for secret in secrets:
                forms |= secret_forms(secret)
            ordered = sorted(forms, key=len, reverse=True)
            self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None
            self._version = version
        return self._pattern

    def __call__(self, text: str) -> str:
        pattern = self._current()
        if pattern is not None:
            text = pattern.sub(REDACTED, text)
        return _NAMED_SECRET.sub(_keep_name, text)


def _keep_name(match: re.Match[str]) -> str:
    if match.group("value").isdigit():  # max_tokens=1000 is a count, not a credential
        return match.group()
    return match.group("head") + REDACTED


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
        return plain_json(entry, default=str)


class TextFormatter(logging.Formatter):
    """`TEXT_FORMAT`, controls made visible, continuation lines indented by two spaces."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        return plain(super().format(record)).replace("\n", "\n  ")


class RedactingHandler(logging.StreamHandler[TextIO]):
    """Writes formatted lines with each secret (4+ characters, in any escaped form) and each
    secret given to `add_secret` replaced by ***."""

    def __init__(self, stream: TextIO, secrets: Iterable[str] = ()) -> None:
        super().__init__(stream)
        self.redact = Redactor(secrets)

    @property
    def secrets(self) -> list[str]:
        return self.redact.secrets

    def format(self, record: logging.LogRecord) -> str:
        return self.redact(super().format(record))


def configure_logging(
    fmt: LogFormat = "text",
    *,
    level: int = logging.INFO,
    secrets: Iterable[str] = (),
    stream: TextIO | None = None,
) -> logging.Handler:
    """Send every record of the process to `stream` (stderr) in `fmt`; returns the handler."""
    handler = RedactingHandler(stream or sys.stderr, secrets)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, RedactingHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for noisy in ("httpx", "httpcore", "websockets", "hpack"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
    return handler


class ThrottledWarnings:
    """At most one log line per kind every ``interval`` seconds; the next line of a kind says
    how many were left out. A flood of bad connections costs a few lines, not one each."""

    def __init__(self, logger: logging.Logger, interval: float) -> None:
        self.logger = logger
        self.interval = interval
        self._kinds: dict[str, tuple[float, int]] = {}  # kind -> (last logged, suppressed)

    def warning(self, kind: str, text: str) -> None:
        now = time.monotonic()
        last, suppressed = self._kinds.get(kind, (-math.inf, 0))
        if now - last < self.interval:
            self._kinds[kind] = (last, suppressed + 1)
            return
        self._kinds[kind] = (now, 0)
        if suppressed:
            text += f" ({suppressed} more like it in the last {now - last:.0f} s not logged)"
        self.logger.warning("%s", text)

    def flush(self) -> None:
        """Log how many lines of each kind were left out since its last line (at a stop)."""
        now = time.monotonic()
        for kind, (last, suppressed) in list(self._kinds.items()):
            if suppressed:
                self._kinds[kind] = (now, 0)
                self.logger.warning(
                    "%d more %s line(s) in the last %.0f s not logged", suppressed, kind, now - last
                )
