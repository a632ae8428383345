"""One sink's de-duplication and rate limit: a storm becomes a bounded summary.

`admit(notice, now)` answers "send" (a slot is free in the sliding window of `window`
seconds, which holds at most `max_messages` sends), "duplicate" (the same `key` was admitted
less than `dedupe` seconds ago) or "held" (no slot: counted for the summary). `summary(now)`
is the one notice that stands for everything held, once a slot is free again (`due`). So a
sink sends at most `max_messages` messages per window, a summary included, whatever comes.
"""

from __future__ import annotations

from collections import Counter, deque

from semo.engine.notify.models import Notice

#: keys remembered for de-duplication at most (the oldest are forgotten first)
MAX_KEYS = 10_000


class Throttle:
    """De-duplication and a sliding-window rate limit for one sink (not thread-safe)."""

    def __init__(self, max_messages: int, window: float, dedupe: float) -> None:
        self.max_messages = max(1, max_messages)
        self.window = window
        self.dedupe = dedupe
        self._sent: deque[float] = deque()
        self._seen: dict[str, float] = {}
        self._held: list[Notice] = []
        #: notices dropped as duplicates, and held for a summary, since the start
        self.duplicates = 0
        self.held_total = 0

    @property
    def holding(self) -> int:
        return len(self._held)

    def admit(self, notice: Notice, now: float) -> str:
        """ "send", "duplicate" or "held" (see the module docstring)."""
        seen = self._seen.get(notice.key)
        if seen is not None and now - seen < self.dedupe:
            self.duplicates += 1
            return "duplicate"
        self._remember(notice.key, now)
        if not self._held and self._free(now):
            self._sent.append(now)
            return "send"
        self._held.append(notice)
        self.held_total += 1
        return "held"

    def due(self, now: float) -> float | None:
        """When the summary of what is held can go (None: nothing held)."""
        if not self._held:
            return None
        self._expire(now)
        if len(self._sent) < self.max_messages:
            return now
        return self._sent[0] + self.window

    def summary(self, now: float, *, force: bool = False) -> Notice | None:
        """The summary of what is held if a slot is free now, or whatever the rate when
        `force` (the notifier stops: one message more, never the held ones lost); the held
        notices are forgotten. One held notice goes as it is."""
        if not self._held or not (force or self._free(now)):
            return None
        held, self._held = self._held, []
        self._sent.append(now)
        if len(held) == 1:
            return held[0]
        return summarize(held)

    def _free(self, now: float) -> bool:
        self._expire(now)
        return len(self._sent) < self.max_messages

    def _expire(self, now: float) -> None:
        while self._sent and now - self._sent[0] >= self.window:
            self._sent.popleft()

    def _remember(self, key: str, now: float) -> None:
        self._seen.pop(key, None)
        self._seen[key] = now
        while len(self._seen) > MAX_KEYS:
            del self._seen[next(iter(self._seen))]


_WHAT = {
    "question": ("question waits", "questions wait"),
    "permission": ("permission request waits", "permission requests wait"),
    "job_done": ("job done", "jobs done"),
    "job_failed": ("job failed", "jobs failed"),
    "job_review": ("job needs review", "jobs need review"),
    "agent_error": ("agent in error", "agents in error"),
    "agent_stale": ("agent silent", "agents silent"),
    "engine_died": ("engine died", "engines died"),
    "breaker_open": ("circuit breaker open", "circuit breakers open"),
    "summary": ("earlier summary", "earlier summaries"),
    "test": ("test", "tests"),
}


def summarize(held: list[Notice]) -> Notice:
    """One notice for many: how many of each kind, and which agents."""
    count = sum(notice.count for notice in held)
    kinds = Counter[str]()
    for notice in held:
        kinds[notice.kind] += notice.count
    agents = Counter(notice.agent for notice in held if notice.agent)
    parts = []
    for kind, number in kinds.most_common():
        one, many = _WHAT[kind]
        parts.append(f"{number} {one if number == 1 else many}")
    text = ", ".join(parts)
    if agents:
        text += " (" + ", ".join(f"{agent} {n}" for agent, n in agents.most_common(8)) + ")"
    answer = "semo questions · semo jobs" if {"question", "permission"} & set(kinds) else ""
    return Notice(
        kind="summary",
        office=held[0].office,
        title=f"{count} notifications",
        text=text,
        answer=answer or "semo jobs",
        count=count,
        at=held[-1].at,
    )
