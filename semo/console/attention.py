"""What needs the operator: one count for every view's header, the title and the list order.

It also drives the attention key (F7). No Textual or Rich: the first frame
(semo/console/first_frame.py) says the same as Textual's.

A session needs the operator when it asks (a question or a permission in the inbox), when it is
in error, when it is stale (busy and silent for `stale_after` seconds: stuck, or thinking for
long), or when its last job failed and the operator has not looked at it since.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

#: a session row's state words beyond the engine's (semo.engine.protocol.state.STATE_WORDS)
STALE = "stale"
JOB_FAILED = "job_failed"
#: the states that need the operator, in the order the attention key visits them
NEEDS = ("waiting_input", JOB_FAILED, "error", STALE)
#: how the session list is sorted (`[console] sort`)
SORTS = ("attention", "role")


def shown_state(state: str, *, stale: bool = False, failed: bool = False) -> str:
    """The state a session row shows: a failed last job over "ready" and "working", "stale"
    over "working"; asking, errors and ends stay what they are."""
    if state in ("waiting_input", "error", "terminated", "lost"):
        return state
    if failed:
        return JOB_FAILED
    return STALE if stale and state == "executing" else state


def needs_operator(state: str) -> bool:
    """A session row's state (`shown_state`) that needs the operator."""
    return state in NEEDS


@dataclass(frozen=True)
class Attention:
    """What needs the operator now."""

    asks: int = 0
    """questions and permission requests in the inbox"""
    failed_jobs: int = 0
    errors: int = 0
    stale: int = 0

    @property
    def total(self) -> int:
        return self.asks + self.failed_jobs + self.errors + self.stale

    def count_text(self) -> str:
        """ "2 need you", or "" when nothing does."""
        return f"{self.total} need{'s' if self.total == 1 else ''} you" if self.total else ""

    def detail(self) -> str:
        """ "1 asking · 1 job failed": what the count is made of."""
        parts = [
            (self.asks, "asking"),
            (self.failed_jobs, "job failed" if self.failed_jobs == 1 else "jobs failed"),
            (self.errors, "in error"),
            (self.stale, STALE),
        ]
        return " · ".join(f"{n} {what}" for n, what in parts if n)


def attention(inbox: int, states: Iterable[str]) -> Attention:
    """`inbox`: the questions and permission requests waiting; `states`: each live session's
    shown state. A session that asks counts by its inbox items, not twice."""
    counts = dict.fromkeys(NEEDS, 0)
    for state in states:
        if state in counts:
            counts[state] += 1
    return Attention(
        asks=inbox, failed_jobs=counts[JOB_FAILED], errors=counts["error"], stale=counts[STALE]
    )


def header_title(base: str, found: Attention) -> str:
    """A view's header: "semo · 2 need you" (`base` alone when nothing needs the operator)."""
    count = found.count_text()
    return f"{base} · {count}: {found.detail()}" if count else base


def terminal_title(office: str | None, found: Attention) -> str:
    """The terminal's title: "semo: 2 need you · demo", "semo · demo"."""
    count = found.count_text()
    head = f"semo: {count}" if count else "semo"
    return f"{head} · {office}" if office else head


def attention_order(order: list[str], states: Mapping[str, str], sort: str) -> list[str]:
    """`order` (by role) with the sessions that need the operator first, in the order of
    NEEDS, when `sort` is "attention"; as it is for "role"."""
    if sort != "attention":
        return list(order)

    def rank(session_id: str) -> int:
        state = states.get(session_id, "")
        return NEEDS.index(state) if state in NEEDS else len(NEEDS)

    return sorted(order, key=rank)  # stable: by role within a rank


def next_need(order: list[str], states: Mapping[str, str], current: str | None) -> str | None:
    """The session the attention key goes to: the next one after `current` (in list order,
    round) that needs the operator; None when none does."""
    needing = [sid for sid in order if needs_operator(states.get(sid, ""))]
    if not needing:
        return None
    if current in order:
        start = order.index(current)
        after = [sid for sid in order[start + 1 :] + order[: start + 1] if sid in needing]
        return after[0]
    return needing[0]
