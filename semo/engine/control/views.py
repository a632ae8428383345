"""What a console reads from the engine's office snapshot, without pydantic.

How it works: docs/CONSOLE.md, "The office snapshot, without pydantic".
"""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import Any

from semo.engine.plain_text import plain


def _value(name: str, value: Any) -> Any:
    if isinstance(value, str) and name.endswith("_at"):
        with contextlib.suppress(ValueError):
            return datetime.fromisoformat(value)
    return value


#: a finished run_job command's job statuses: the commands panel says them, not "ok"
JOB_OUTCOMES = ("done", "failed", "cancelled", "needs_review")


def outcome_text(result: Any) -> str:
    """What the commands panel says of a finished command (an AgentCommandResult, or the
    console's CommandOutcome): its error; for a run_job command, the job's status and why it
    failed ("failed: the agent exited"; a job that failed is a command that completed); else
    "ok". At most 60 characters."""
    data = getattr(result, "result", None) or {}
    status = data.get("status") if isinstance(data, dict) else None
    if not result.success:
        text = result.error or "failed"
    elif status in JOB_OUTCOMES:
        reason = data.get("failure_reason") or ""
        text = f"{status}: {reason}" if reason else str(status)
    else:
        text = "ok"
    return plain(str(text), one_line=True)[:60]


class Record:
    """A row of the snapshot with attribute access: `record.created_at` is a datetime,
    a missing field is an AttributeError (as on the model)."""

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = {name: _value(name, value) for name, value in data.items()}

    def __getattr__(self, name: str) -> Any:
        try:
            return self._data[name]
        except KeyError:
            raise AttributeError(name) from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Record) and other._data == self._data

    def __hash__(self) -> int:
        return hash(self._data.get("id"))

    def __repr__(self) -> str:
        return f"Record({self._data!r})"

    def dump(self) -> dict[str, Any]:
        """The fields as given (datetimes parsed)."""
        return dict(self._data)


#: at most this much of a session's last line goes into the office snapshot
LAST_LINE_CHARS = 200


def last_line(rows: list[str]) -> str:
    """The last row with text, without an agent's leading bullet (a bare prompt character or
    the closing line of a protocol block does not count): the session list's "last line"."""
    for row in reversed(rows):
        text = row.strip().lstrip("●⏺").lstrip()
        if text and text.strip("❯>$#%:") != "" and not text.startswith("[/"):
            return text[:LAST_LINE_CHARS]
    return ""


#: routing steps the office snapshot carries (the latest; the commands panel shows 20 rows)
RECENT_STEPS = 50
#: at most this much of a step's detail goes into the snapshot
STEP_DETAIL_CHARS = 200


def step_view(event: Any, roles: dict[str, str], number: int) -> dict[str, Any]:
    """A routing step (semo.engine.events.RoutingStep) as the office snapshot carries it: plain
    text only. `key` is the one the console gives the live event ("step:<step>:<ref id>"),
    so a step seen live and in a snapshot is one row; `roles` by agent id."""
    detail = plain(str(event.detail or ""), one_line=True)
    return {
        "key": f"step:{event.step}:{event.ref_id or f'n{number}'}",
        "at": event.at.isoformat(),
        "step": plain(event.step, one_line=True),
        "role": plain(roles.get(event.agent_id or "", "?"), one_line=True),
        "agent_id": event.agent_id,
        "session_id": event.session_id,
        "ref_id": event.ref_id,
        "detail": detail[:STEP_DETAIL_CHARS],
    }
