"""Per-agent budgets over time: what one agent may make semo store and queue per window.

    budgets = AgentBudgets(config.budgets)
    refused = budgets.take(agent_id, "results", size=len(text))   # None, or why not
    if refused is not None and budgets.note_due(agent_id): tell the agent, once a window

How it works: docs/ROUTING.md, "Budgets".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from semo.engine.config import BudgetsConfig

Kind = Literal["messages", "questions", "invocations", "results"]

#: what each kind is called in a refusal
_NAMES = {
    "messages": "protocol messages",
    "questions": "questions",
    "invocations": "invocations",
    "results": "results",
}


@dataclass
class _Bucket:
    tokens: float
    at: float


class AgentBudgets:
    """The budgets of an office's agents (`[budgets]`), by agent id."""

    def __init__(
        self, config: BudgetsConfig | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.config = config or BudgetsConfig()
        self.clock = clock
        self._buckets: dict[tuple[str, str], _Bucket] = {}
        self._told: dict[str, float] = {}  # agent id -> when it was last told of a refusal
        self._counted: dict[str, int] = {}  # agent id -> refusals it had been told of then
        #: refusals so far, by agent id (the status and the tests read them)
        self.refused: dict[str, int] = {}

    def limit(self, kind: str) -> int:
        return int(getattr(self.config, kind))

    def take(self, agent_id: str, kind: Kind, size: int = 0) -> str | None:
        """Take one `kind` (and `size` bytes when it is stored) from `agent_id`'s budgets:
        None, or why not (nothing is taken then)."""
        now = self.clock()
        count = self._bucket(agent_id, kind, now)
        if count.tokens < 1:
            return self._refuse(agent_id, kind, self.limit(kind), _NAMES[kind])
        if size:
            stored = self._bucket(agent_id, "bytes", now)
            if stored.tokens < size:
                return self._refuse(agent_id, "bytes", self.limit("bytes"), "bytes stored")
            stored.tokens -= size
        count.tokens -= 1
        return None

    def note_due(self, agent_id: str) -> int | None:
        """After a refusal: None while `agent_id` was told within the window, else how many of
        its messages were refused since it was last told (this one included). Once per window,
        so the note (a prompt, which starts a turn) cannot feed the flood it answers, and the
        operator's event is one per window, not one per refused message."""
        now = self.clock()
        last = self._told.get(agent_id)
        if last is not None and now - last < self.config.window:
            return None
        self._told[agent_id] = now
        count = self.refused.get(agent_id, 0) - self._counted.get(agent_id, 0)
        self._counted[agent_id] = self.refused.get(agent_id, 0)
        return count

    def _bucket(self, agent_id: str, kind: str, now: float) -> _Bucket:
        limit = self.limit(kind)
        bucket = self._buckets.get((agent_id, kind))
        if bucket is None:
            bucket = self._buckets[(agent_id, kind)] = _Bucket(float(limit), now)
        else:
            refill = (now - bucket.at) * limit / self.config.window
            bucket.tokens = min(float(limit), bucket.tokens + refill)
            bucket.at = now
        return bucket

    def _refuse(self, agent_id: str, kind: str, limit: int, name: str) -> str:
        self.refused[agent_id] = self.refused.get(agent_id, 0) + 1
        return (
            f"over its budget of {limit} {name} per {self.config.window:g} s "
            f"([budgets] {kind} in semo.toml)"
        )
