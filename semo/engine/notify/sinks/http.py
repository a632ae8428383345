"""The HTTP part the webhook and ntfy sinks share: one POST, its status judged."""

from __future__ import annotations

from typing import Any

import httpx

from semo.engine.notify.sinks.base import SinkError

#: statuses worth a retry besides 5xx
_RETRY = {408, 425, 429}


async def post_json(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str]
) -> str:
    """POST `body` as JSON; "HTTP <status>" on a 2xx, else SinkError (a retry for 5xx, 408,
    425, 429 and transport errors). The URL is never part of the error: it may be a secret."""
    try:
        response = await client.post(url, json=body, headers=headers)
    except httpx.HTTPError as error:
        raise SinkError(f"{type(error).__name__}: the request failed") from None
    status = response.status_code
    if 200 <= status < 300:
        return f"HTTP {status}"
    raise SinkError(f"HTTP {status}", retry=status >= 500 or status in _RETRY)


def host_of(url: str) -> str:
    """The URL's scheme and host, for messages (its path may hold a token)."""
    parsed = httpx.URL(url)
    port = f":{parsed.port}" if parsed.port else ""
    return f"{parsed.scheme}://{parsed.host}{port}"
