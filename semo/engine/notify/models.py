"""What a notification says: a `Notice`, built from engine events, cleaned on construction.

A notice names the office, the agent, what is needed and the command or key that answers it;
every text field is made inert and bounded (semo.engine.notify.text.clean) when the model is built,
whatever the producer passed in. `key` is what de-duplication compares.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from semo.engine.notify.text import clean, slack_text
from semo.engine.store.models import now

NoticeKind = Literal[
    "question",
    "permission",
    "job_done",
    "job_failed",
    "job_review",
    "agent_error",
    "agent_stale",
    "engine_died",
    "breaker_open",
    "summary",
    "test",
]
#: the event names a `[[notify]] events` list may hold (summary and test go to every sink)
EVENT_NAMES: tuple[str, ...] = tuple(
    k for k in get_args(NoticeKind) if k not in ("summary", "test")
)
#: the events a sink gets when its `events` is left out: what needs a person, and failures
DEFAULT_EVENTS: tuple[str, ...] = tuple(name for name in EVENT_NAMES if name != "agent_stale")
#: the events that wait for a person: notified once they waited a sink's `delay`
WAITING: frozenset[str] = frozenset({"question", "permission"})

LIMITS = {"office": 100, "agent": 40, "title": 120, "text": 400, "answer": 200, "ref": 80}


class Notice(BaseModel):
    """One notification, ready for any sink (all text one line, bounded, inert)."""

    model_config = ConfigDict(frozen=True)

    kind: NoticeKind
    office: str
    agent: str = ""
    #: e.g. "FE asks you"
    title: str
    #: what is needed, e.g. the question
    text: str = ""
    #: the command or key that answers it
    answer: str = ""
    #: the question, job, session, engine or role it is about
    ref: str = ""
    #: how many events a summary stands for
    count: int = Field(default=1, ge=1)
    at: datetime = Field(default_factory=now)

    @field_validator("office", "agent", "title", "text", "answer", "ref", mode="before")
    @classmethod
    def _inert(cls, value: object, info: object) -> str:
        # pydantic gives a field validator a ValidationInfo with the field's name
        return clean(value, LIMITS[info.field_name])  # type: ignore[attr-defined]

    @property
    def key(self) -> str:
        """What de-duplication compares: the kind and what it is about."""
        return f"{self.kind}:{self.ref}" if self.ref else f"{self.kind}:{self.title}"

    @property
    def headline(self) -> str:
        """`semo OFFICE: TITLE`: a notification's title or a mail's subject."""
        return clean(f"semo {self.office}: {self.title}", 160)

    def line(self) -> str:
        """The whole notice on one line: title, what is needed, how to answer."""
        parts = [self.headline]
        if self.text:
            parts.append(self.text)
        if self.answer:
            parts.append(f"→ {self.answer}")
        return " — ".join(parts)

    def lines(self) -> list[str]:
        """The notice as lines of a mail or a message body."""
        found = [f"office: {self.office}"]
        if self.agent:
            found.append(f"agent: {self.agent}")
        if self.text:
            found.append(f"needed: {self.text}")
        if self.answer:
            found.append(f"answer: {self.answer}")
        found.append(f"at: {self.at.isoformat(timespec='seconds')}")
        return found

    def payload(self) -> dict[str, object]:
        """The JSON object a webhook or a command gets: `text` the one-line form in Slack's
        markup (escaped: a Slack-compatible endpoint shows it as it is), the fields beside."""
        data = self.model_dump(mode="json")
        data["needed"] = data.pop("text")
        return {"text": slack_text(self.line()), "headline": self.headline, **data}

    def to_json(self) -> str:
        return json.dumps(self.payload(), ensure_ascii=False)
