"""What every sink is: `send(notice)` delivers one notice or raises SinkError."""

from __future__ import annotations

from collections.abc import Mapping

from semo.engine.notify.models import Notice
from semo.engine.notify.settings import MissingVariable, NotifySink, expand, variables


class SinkError(Exception):
    """A delivery that failed; `retry` says whether trying again may help (a refused request
    or a bad address will not)."""

    def __init__(self, message: str, *, retry: bool = True) -> None:
        super().__init__(message)
        self.retry = retry


class Sink:
    """One configured destination. Subclasses implement `send`; `secrets` are the values
    (tokens, passwords, secret URLs) that must never appear in a log or a result."""

    def __init__(self, settings: NotifySink, label: str) -> None:
        self.settings = settings
        self.label = label
        self.secrets: list[str] = []

    async def send(self, notice: Notice) -> str:
        """Deliver `notice`; a short description of what happened (e.g. "HTTP 200")."""
        raise NotImplementedError

    async def close(self) -> None:
        """Free what the sink holds (connections)."""

    def where(self) -> str:
        """Where it sends, without secrets (for `semo notify test`)."""
        return self.settings.sink

    def _expand(self, value: str, env: Mapping[str, str], *, secret: bool) -> str:
        try:
            expanded = expand(value, env)
        except MissingVariable as error:
            raise SinkError(f"{self.label}: {error}", retry=False) from None
        # what came from the environment is a secret, and a secret value as a whole
        self.secrets.extend(env[name] for name in variables(value))
        if secret:
            self.secrets.append(expanded)
        return expanded
