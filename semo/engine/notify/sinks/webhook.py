"""A webhook: a JSON POST of the notice.

`format = "json"`: the notice's fields with `text`, its one-line form in Slack's markup (so
Slack and compatible endpoints show it); `"slack"`: `{"text"}` only."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from semo.engine.notify.models import Notice
from semo.engine.notify.settings import NotifySink
from semo.engine.notify.sinks.base import Sink
from semo.engine.notify.sinks.http import host_of, post_json
from semo.engine.notify.text import slack_text


class WebhookSink(Sink):
    def __init__(self, settings: NotifySink, label: str, env: Mapping[str, str]) -> None:
        super().__init__(settings, label)
        self.url = self._expand(settings.url, env, secret=False)
        self.headers = {
            key: self._expand(value, env, secret=True) for key, value in settings.headers.items()
        }
        self.client = httpx.AsyncClient(timeout=settings.timeout, follow_redirects=False)

    async def send(self, notice: Notice) -> str:
        body = (
            {"text": slack_text(notice.line())}
            if self.settings.format == "slack"
            else notice.payload()
        )
        return await post_json(self.client, self.url, body, self.headers)

    async def close(self) -> None:
        await self.client.aclose()

    def where(self) -> str:
        return host_of(self.url)
