"""`[[notify]]` in semo.toml: one table per sink (docs/NOTIFY.md is the reference).

    [[notify]]
    sink = "webhook"                      # console, webhook, ntfy, email, command
    url = "${SLACK_WEBHOOK_URL}"          # ${VAR}: from the engine's environment
    format = "slack"
    events = ["question", "job_failed"]   # default: DEFAULT_EVENTS

Which keys a table may have depends on its sink; a key of another sink is an error that says
so. `${VAR}` in `url`, `headers`, `username` and `password` is read from the environment when
the sink is built (`expand`), so secrets stay out of the file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from semo.engine.notify.models import DEFAULT_EVENTS, EVENT_NAMES

SinkType = Literal["console", "webhook", "ntfy", "email", "command"]

#: keys every sink has; the others belong to the sinks named
_COMMON = {
    "sink",
    "name",
    "events",
    "delay",
    "max_messages",
    "window",
    "dedupe",
    "timeout",
    "retries",
    "backoff",
}
_OWN: dict[str, set[str]] = {
    "console": set(),
    "webhook": {"url", "format", "headers"},
    "ntfy": {"url", "headers", "priority"},
    "email": {
        "host",
        "port",
        "starttls",
        "tls",
        "username",
        "password",
        "from_addr",
        "to",
        "ca_file",
    },
    "command": {"command"},
}
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class KeyProblem(ValueError):
    """A ValueError raised by a cross-key check that knows which key is wrong (engine.config
    names the key in its error)."""

    def __init__(self, loc: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.loc = loc


class MissingVariable(ValueError):
    """A `${VAR}` that the environment does not have."""


def expand(value: str, env: Mapping[str, str] | None = None) -> str:
    """`value` with each `${VAR}` replaced by the environment's VAR (MissingVariable when a
    variable is unset or empty)."""
    env = os.environ if env is None else env

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        found = env.get(name, "")
        if not found:
            raise MissingVariable(f"${{{name}}} is not set in the engine's environment")
        return found

    return _VARIABLE.sub(one, value)


def variables(value: str) -> list[str]:
    """The names of the `${VAR}`s in `value`."""
    return _VARIABLE.findall(value)


class NotifySink(BaseModel):
    """One `[[notify]]` table."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sink: SinkType
    #: shown in logs and `semo notify test`; default "<sink> #<n>"
    name: str = Field(default="", max_length=60)
    events: list[str] = Field(default_factory=lambda: list(DEFAULT_EVENTS))
    #: seconds a question or permission request waits before this sink hears of it
    delay: float | None = Field(default=None, ge=0, le=86_400)
    #: at most this many messages per `window` seconds; the rest become one summary
    max_messages: int = Field(default=5, ge=1, le=1000)
    window: float = Field(default=60.0, gt=0, le=86_400)
    #: seconds during which the same notice (kind and subject) is sent once
    dedupe: float = Field(default=600.0, ge=0, le=7 * 86_400)
    timeout: float = Field(default=10.0, gt=0, le=300)
    retries: int = Field(default=3, ge=0, le=20)
    #: seconds before the first retry; doubled each time
    backoff: float = Field(default=2.0, ge=0, le=600)

    url: str = ""
    format: Literal["json", "slack"] = "json"
    headers: dict[str, str] = Field(default_factory=dict)
    priority: int = Field(default=3, ge=1, le=5)

    host: str = ""
    port: int = Field(default=587, ge=1, le=65_535)
    starttls: bool = True
    tls: bool = False
    username: str = ""
    password: SecretStr | None = None
    from_addr: str = ""
    to: list[str] = Field(default_factory=list)
    ca_file: Path | None = None

    command: list[str] = Field(default_factory=list)

    @field_validator("events")
    @classmethod
    def _events(cls, events: list[str]) -> list[str]:
        for name in events:
            if name not in EVENT_NAMES:
                raise ValueError(f"{name!r} is not an event (events: {', '.join(EVENT_NAMES)})")
        return events

    @field_validator("url")
    @classmethod
    def _url(cls, url: str) -> str:
        if url and not url.startswith(("http://", "https://", "${")):
            raise ValueError("must be an http:// or https:// URL (or ${VAR} naming one)")
        return url

    @field_validator("headers")
    @classmethod
    def _headers(cls, headers: dict[str, str]) -> dict[str, str]:
        for key, value in headers.items():
            if not re.fullmatch(r"[A-Za-z0-9-]{1,64}", key):
                raise ValueError(f"{key!r} is not a header name")
            if any(c in value for c in "\r\n\0"):
                raise ValueError(f"{key}: a header value must be one line")
        return headers

    @field_validator("to")
    @classmethod
    def _to(cls, to: list[str]) -> list[str]:
        for address in to:
            if not re.fullmatch(r"[^@\s<>,;\"]+@[^@\s<>,;\"]+", address):
                raise ValueError(f"{address!r} is not a mail address")
        return to

    @model_validator(mode="before")
    @classmethod
    def _own_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("sink") not in _OWN:
            return data
        sink = data["sink"]
        for key in data:
            if key in _COMMON or key in _OWN[sink] or key not in cls.model_fields:
                continue  # unknown keys: pydantic's own error
            owners = [name for name, keys in _OWN.items() if key in keys]
            raise KeyProblem((key,), f"a key of sink = {' / '.join(owners)}, not of sink = {sink}")
        return data

    @model_validator(mode="after")
    def _needed(self) -> NotifySink:
        needs = {
            "webhook": ("url",),
            "ntfy": ("url",),
            "email": ("host", "from_addr", "to"),
            "command": ("command",),
        }.get(self.sink, ())
        missing = [key for key in needs if not getattr(self, key)]
        if missing:
            raise KeyProblem((missing[0],), f"missing: sink = {self.sink} needs it")
        if self.tls and self.starttls and "starttls" in self.model_fields_set:
            raise ValueError("tls (implicit TLS) and starttls are exclusive")
        if self.password is not None and not self.username:
            raise ValueError("password needs username")
        return self

    def label(self, index: int) -> str:
        """The name shown in logs and results: `name`, else "<sink> #<index + 1>"."""
        return self.name or f"{self.sink} #{index + 1}"

    def wait_delay(self) -> float:
        """`delay`, else 0 for consoles (at once) and 60 seconds for the others."""
        if self.delay is not None:
            return self.delay
        return 0.0 if self.sink == "console" else 60.0

    def secret_in_file(self) -> bool:
        """A password written in the file (not a ${VAR}): worth a warning."""
        if self.password is None:
            return False
        return _VARIABLE.fullmatch(self.password.get_secret_value()) is None


def console_default() -> list[NotifySink]:
    """The sinks of an office without `[[notify]]`: its consoles, with the default events."""
    return [NotifySink(sink="console")]
