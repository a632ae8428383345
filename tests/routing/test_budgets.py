"""AgentBudgets: per-agent token buckets over time (engine/routing/budgets.py), on a clock the
test moves: a burst of the limit, then the steady rate; bytes counted with the kind; agents
apart; one note per window with the count of refusals since the last one."""

from __future__ import annotations

from semo.engine.config import BudgetsConfig
from semo.engine.routing.budgets import AgentBudgets


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def budgets(**limits: float) -> tuple[AgentBudgets, Clock]:
    clock = Clock()
    return AgentBudgets(BudgetsConfig(**limits), clock=clock), clock


def test_a_burst_of_the_limit_then_the_steady_rate() -> None:
    limits, clock = budgets(window=60, results=3)
    assert [limits.take("A", "results") for _ in range(3)] == [None, None, None]
    refused = limits.take("A", "results")
    assert (
        refused is not None and "3 results per 60 s" in refused and "[budgets] results" in refused
    )
    clock.now += 19.9  # not yet one token back (3 per 60 s: one per 20 s)
    assert limits.take("A", "results") is not None
    clock.now += 0.2
    assert limits.take("A", "results") is None
    assert limits.take("A", "results") is not None
    clock.now += 3600  # refills to the limit, never past it
    assert [limits.take("A", "results") for _ in range(4)][-1] is not None


def test_bytes_are_taken_with_the_kind_and_refused_alone() -> None:
    limits, _clock = budgets(window=60, results=100, bytes=100_000)
    assert limits.take("A", "results", size=60_000) is None
    refused = limits.take("A", "results", size=60_000)
    assert refused is not None and "100000 bytes stored" in refused
    # the refused one took nothing: a smaller one still fits, its count too
    assert limits.take("A", "results", size=40_000) is None
    assert limits.take("A", "results") is None


def test_agents_and_kinds_have_budgets_of_their_own() -> None:
    limits, _clock = budgets(window=60, results=1, invocations=1)
    assert limits.take("A", "results") is None
    assert limits.take("A", "results") is not None
    assert limits.take("B", "results") is None
    assert limits.take("A", "invocations") is None


def test_one_note_per_window_with_the_refusals_since_the_last() -> None:
    limits, clock = budgets(window=60, messages=1)
    limits.take("A", "messages")
    for _ in range(5):
        assert limits.take("A", "messages") is not None
    assert limits.note_due("A") == 5
    assert limits.take("A", "messages") is not None
    assert limits.note_due("A") is None  # within the window: no second note
    clock.now += 30  # half a window: half a token back, not one
    for _ in range(2):
        assert limits.take("A", "messages") is not None
    clock.now += 31
    assert limits.note_due("A") == 3  # the refusals since the first note
    assert limits.refused == {"A": 8}
