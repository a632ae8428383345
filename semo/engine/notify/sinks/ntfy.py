"""ntfy (ntfy.sh or a server of one's own): the notice published as JSON.

It goes to the server's root with the topic of the configured topic URL
(`https://ntfy.sh/my-topic`)."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from semo.engine.notify.models import Notice
from semo.engine.notify.settings import NotifySink
from semo.engine.notify.sinks.base import Sink, SinkError
from semo.engine.notify.sinks.http import host_of, post_json

_TAGS = {
    "question": ["question"],
    "permission": ["lock"],
    "job_done": ["white_check_mark"],
    "job_failed": ["x"],
    "job_review": ["eyes"],
    "agent_error": ["warning"],
    "agent_stale": ["hourglass"],
    "engine_died": ["skull"],
    "breaker_open": ["rotating_light"],
}


class NtfySink(Sink):
    def __init__(self, settings: NotifySink, label: str, env: Mapping[str, str]) -> None:
        super().__init__(settings, label)
        url = self._expand(settings.url, env, secret=False).rstrip("/")
        base, _, topic = url.rpartition("/")
        if not topic or base.endswith(":/"):
            raise SinkError(f"{label}: url must name a topic, e.g. https://ntfy.sh/my-topic")
        self.base, self.topic = base + "/", topic
        self.headers = {
            key: self._expand(value, env, secret=True) for key, value in settings.headers.items()
        }
        self.client = httpx.AsyncClient(timeout=settings.timeout, follow_redirects=False)

    async def send(self, notice: Notice) -> str:
        message = "\n".join(part for part in (notice.text, notice.answer and f"→ {notice.answer}"))
        body = {
            "topic": self.topic,
            "title": notice.headline,
            "message": message or notice.title,
            "priority": self.settings.priority,
            "tags": _TAGS.get(notice.kind, []),
        }
        return await post_json(self.client, self.base, body, self.headers)

    async def close(self) -> None:
        await self.client.aclose()

    def where(self) -> str:
        return host_of(self.base)
