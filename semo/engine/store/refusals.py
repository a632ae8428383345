"""Why Supabase Realtime refused a connection or a channel, and how long to wait.

A permanent refusal (a wrong key, a table outside the `supabase_realtime` publication, the
channel cap, Realtime disabled) does not go away by retrying, a rate limit goes away after a
while (the server may say how long), anything else is transient.

The reasons are the real server's (supabase/realtime's operational error codes and messages,
e.g. "ChannelRateLimitReached: Too many channels", "Unauthorized: You do not have permissions
to read from this Channel topic: ...", "Unable to subscribe to changes with given parameters",
"Too many messages per second"), matched as substrings of the error text.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

Kind = Literal["permanent", "rate_limited", "transient"]


@dataclass(frozen=True)
class Refusal:
    """A classified refusal: `code` names it, `advice` says how to fix a permanent one."""

    kind: Kind
    code: str
    advice: str = ""


_PERMANENT: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (
        ("unable to subscribe to changes", "realtimedisabledforconfiguration"),
        "publication",
        "a table semo listens to is not in the supabase_realtime publication, which fails the"
        " whole channel: alter publication supabase_realtime add table ... (see `semo supabase"
        " doctor`)",
    ),
    (
        (
            "invalidjwttoken",
            "invalid jwt",
            "jwtsignatureerror",
            "malformedjwt",
            "invalid api key",
            "missingapikey",
            "no api key",
        ),
        "key",
        "SUPABASE_SERVICE_ROLE_KEY is not this project's service-role key (Project Settings ->"
        " API)",
    ),
    (
        ("unauthorized", "permissions to read"),
        "unauthorized",
        "the service role is not admitted to the office's private channel: check"
        " SUPABASE_SERVICE_ROLE_KEY and the policies on realtime.messages (`semo supabase"
        " doctor`)",
    ),
    (
        ("channelratelimitreached", "too many channels"),
        "channel cap",
        "one connection holds more office channels than the project allows (100 by default):"
        " fewer offices per engine, or a higher limit from Supabase",
    ),
    (
        ("realtimedisabledfortenant", "tenantnotfound", "privateonly"),
        "realtime disabled",
        "Realtime is disabled or suspended for this project (check its dashboard and quotas)",
    ),
)
_RATE_LIMITED = (
    "clientjoinratelimitreached",
    "joinsratelimitreached",
    "connectionratelimitreached",
    "messagepersecondratelimitreached",
    "databaseconnectionratelimitreached",
    "too many joins",
    "too many connected users",
    "too many messages per second",
    "http 429",
)


def classify(reason: str) -> Refusal:
    """The kind of refusal `reason` (an error text, e.g. a join's or a system message's) is."""
    text = reason.lower()
    for needles, code, advice in _PERMANENT:
        if any(n in text for n in needles):
            return Refusal("permanent", code, advice)
    if any(n in text for n in _RATE_LIMITED):
        return Refusal("rate_limited", "rate limit")
    return Refusal("transient", "transient")


def retry_after(error: BaseException | None) -> float | None:
    """The server's hint, in seconds, from a refused WebSocket handshake's Retry-After."""
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    value = headers.get("Retry-After")
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and seconds >= 0 else None


@dataclass(frozen=True)
class Backoff:
    """How long to wait before the `attempt`-th retry (1 = the first) of each kind."""

    #: transient: 50 ms doubling up to this, jittered
    transient_max: float = 1.0
    #: rate limited: at least this (or the server's hint when longer), jittered
    rate_limited: float = 30.0
    #: permanent: this, jittered (the refusal is reported once, the engine polls meanwhile)
    permanent: float = 300.0

    def delay(
        self,
        refusal: Refusal,
        attempt: int,
        hint: float | None = None,
        rng: random.Random | None = None,
    ) -> float:
        rng = rng or random.Random()
        if refusal.kind == "permanent":
            return self.permanent * rng.uniform(1.0, 1.2)
        if refusal.kind == "rate_limited":
            base = max(self.rate_limited, hint or 0.0)
            return base * rng.uniform(1.0, 1.5)
        if attempt <= 0:
            return 0.0
        return min(self.transient_max, 0.05 * 2 ** (attempt - 1)) * rng.uniform(0.5, 1.0)
