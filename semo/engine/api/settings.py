"""`[api]` of semo.toml and the API's tokens: pure pydantic, no web framework imported.

    [api]
    listen = "127.0.0.1:8765"      # `semo engine` serves the API here ("" = only with --http)
    token = "..."                  # the token of this file's office (better: SEMO_API_TOKEN)
    tokens = { other-office = "..." }  # more offices of the same store (name or id -> token)
    wait_timeout = 30.0            # how long a write waits for its command's result (at least
                                   # the command's own limit + 5 s: [engine] command_timeout, or
                                   # send_prompt's timeout)
    max_body_bytes = 1048576       # larger request bodies get 413

How it works: docs/API.md, "Settings and tokens".
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from semo.engine.jobwork.settings import GitSection
from semo.engine.ship.settings import ShipSection

TOKEN_ENV = "SEMO_API_TOKEN"
TOKENS_ENV = "SEMO_API_TOKENS"
MIN_TOKEN_CHARS = 16
DEFAULT_WAIT_TIMEOUT = 30.0
DEFAULT_COMMAND_TIMEOUT = 30.0
DEFAULT_MAX_BODY_BYTES = 1024 * 1024
TOKEN_HINT = "e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))'"


class ApiSettingsError(ValueError):
    """The API cannot be served with these settings; the message says what to change."""


def _check_token(value: SecretStr | None) -> SecretStr | None:
    if value is None:
        return None
    token = value.get_secret_value()
    if token == "":
        return None  # `token = ""`: not set
    if len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token):
        raise ValueError(
            f"an API token needs at least {MIN_TOKEN_CHARS} characters and no spaces ({TOKEN_HINT})"
        )
    return value


class ApiSection(BaseModel):
    """`[api]`: the Sessions REST API (docs/API.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: HOST:PORT that `semo engine` serves the API on; "" = not served unless --http is given.
    listen: str = ""
    #: the token of the config's office; SEMO_API_TOKEN wins over it.
    token: SecretStr | None = None
    #: more offices of the same store: office name or id -> token; SEMO_API_TOKENS adds to it.
    tokens: dict[str, SecretStr] = Field(default_factory=dict)
    #: seconds a write waits for its command's result before answering 504 with the command id.
    wait_timeout: float = Field(default=DEFAULT_WAIT_TIMEOUT, gt=0, le=3600)
    #: request bodies larger than this get 413.
    max_body_bytes: int = Field(default=DEFAULT_MAX_BODY_BYTES, ge=1024, le=64 * 1024 * 1024)

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str) -> str:
        if value:
            parse_listen(value)
        return value

    @field_validator("token")
    @classmethod
    def _token(cls, value: SecretStr | None) -> SecretStr | None:
        return _check_token(value)

    @field_validator("tokens")
    @classmethod
    def _tokens(cls, value: dict[str, SecretStr]) -> dict[str, SecretStr]:
        for office, token in value.items():
            if not office.strip():
                raise ValueError("an office name or id must not be empty")
            if _check_token(token) is None:
                raise ValueError(f"{office}: the token is empty")
        return value


def parse_listen(value: str) -> tuple[str, int]:
    """ "HOST:PORT" (or "[::1]:PORT") -> (host, port); ValueError says what is wrong."""
    host, sep, port_text = value.strip().rpartition(":")
    if not sep or not host:
        raise ValueError(f"{value!r} is not HOST:PORT (e.g. 127.0.0.1:8765)")
    host = host.removeprefix("[").removesuffix("]")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"{value!r}: the port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"{value!r}: the port must be 0..65535 (0: any free port)")
    return host, port


@dataclass(frozen=True)
class ApiSettings:
    """What the API serves with: tokens resolved from the file and the environment."""

    #: office name or id -> its token
    tokens: Mapping[str, SecretStr]
    wait_timeout: float = DEFAULT_WAIT_TIMEOUT
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    #: the engines' `[engine] command_timeout`: a write waits at least this (+ a margin), so
    #: that the engine's own timeout, not the API's, ends a command that takes too long
    command_timeout: float = DEFAULT_COMMAND_TIMEOUT
    #: the config's `[ship]`: what `POST .../jobs/{id}/ship` pushes to and opens PRs with
    ship: ShipSection = field(default_factory=ShipSection)
    #: the config's `[git]`: the identity semo commits a role's leftovers with (resolve --done)
    git: GitSection = field(default_factory=GitSection)

    def __repr__(self) -> str:  # never the tokens
        return (
            f"ApiSettings(offices={sorted(self.tokens)}, wait_timeout={self.wait_timeout}, "
            f"command_timeout={self.command_timeout}, "
            f"max_body_bytes={self.max_body_bytes})"
        )

    def secrets(self) -> list[str]:
        """Every token, for log redaction."""
        return [token.get_secret_value() for token in self.tokens.values()]


def resolve_settings(
    section: ApiSection,
    office: str | None,
    env: Mapping[str, str] | None = None,
    *,
    command_timeout: float = DEFAULT_COMMAND_TIMEOUT,
    ship: ShipSection | None = None,
    git: GitSection | None = None,
) -> ApiSettings:
    """The tokens of `section` with SEMO_API_TOKEN (for `office`, the config's office) and
    SEMO_API_TOKENS (JSON) from `env` (None: os.environ) winning. ApiSettingsError when no
    token is left: the API never serves without authentication. `command_timeout`: the
    config's `[engine] command_timeout`."""
    env = os.environ if env is None else env
    tokens: dict[str, SecretStr] = dict(section.tokens)
    if (raw := env.get(TOKENS_ENV, "").strip()) != "":
        try:
            extra = json.loads(raw)
        except json.JSONDecodeError:
            raise ApiSettingsError(
                f'{TOKENS_ENV} is not JSON: give an object {{"office": "token", ...}}'
            ) from None
        if not isinstance(extra, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in extra.items()
        ):
            raise ApiSettingsError(f'{TOKENS_ENV} must be a JSON object {{"office": "token"}}')
        for name, token in extra.items():
            try:
                checked = _check_token(SecretStr(token))
            except ValueError as error:
                raise ApiSettingsError(f"{TOKENS_ENV}: {name}: {error}") from None
            if checked is None or not name.strip():
                raise ApiSettingsError(f"{TOKENS_ENV}: {name!r}: empty office or token")
            tokens[name] = checked
    own = section.token
    if (raw := env.get(TOKEN_ENV, "")) != "":
        try:
            own = _check_token(SecretStr(raw))
        except ValueError as error:
            raise ApiSettingsError(f"{TOKEN_ENV}: {error}") from None
    if own is not None:
        if office is None:
            raise ApiSettingsError(
                f"{TOKEN_ENV} / [api] token is the token of the config's [office]; without a "
                f"config file give {TOKENS_ENV} instead"
            )
        tokens[office] = own
    if not tokens:
        raise ApiSettingsError(
            f"the API needs a token: set {TOKEN_ENV} (the office's token, {TOKEN_HINT}) or "
            f"{TOKENS_ENV}, or [api] token / tokens in semo.toml"
        )
    return ApiSettings(
        tokens=tokens,
        wait_timeout=section.wait_timeout,
        max_body_bytes=section.max_body_bytes,
        command_timeout=command_timeout,
        ship=ship or ShipSection(),
        git=git or GitSection(),
    )


def token_secrets(section: ApiSection, env: Mapping[str, str] | None = None) -> list[str]:
    """Every token in `section` and the environment, best effort (never raises): for log
    redaction, whether or not the API is served."""
    env = os.environ if env is None else env
    found = [t.get_secret_value() for t in (section.token, *section.tokens.values()) if t]
    if env.get(TOKEN_ENV):
        found.append(env[TOKEN_ENV])
    try:
        extra = json.loads(env.get(TOKENS_ENV) or "{}")
    except json.JSONDecodeError:
        extra = None
        found.append(env.get(TOKENS_ENV, ""))
    if isinstance(extra, dict):
        found.extend(v for v in extra.values() if isinstance(v, str))
    return [secret for secret in found if secret]
