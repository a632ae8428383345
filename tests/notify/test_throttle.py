"""The per-sink throttle on an explicit clock: duplicates, the sliding window, the summary."""

from __future__ import annotations

from semo.engine.notify.models import Notice
from semo.engine.notify.throttle import Throttle


def question(number: int, agent: str = "FE") -> Notice:
    return Notice(kind="question", office="acme", agent=agent, title="asks", ref=f"q-{number}")


def test_a_storm_is_the_limit_then_one_summary_per_window() -> None:
    throttle = Throttle(max_messages=3, window=60, dedupe=600)
    verdicts = [throttle.admit(question(n, "FE" if n % 2 else "BE"), 0.0) for n in range(100)]
    assert verdicts.count("send") == 3 and verdicts.count("held") == 97
    assert throttle.due(1.0) == 60.0  # the oldest send leaves the window then
    assert throttle.summary(59.0) is None  # no slot yet
    summary = throttle.summary(60.0)
    assert summary is not None and summary.kind == "summary" and summary.count == 97
    assert summary.text == "97 questions wait (FE 49, BE 48)"
    assert throttle.summary(60.0) is None and throttle.holding == 0
    assert throttle.admit(question(200), 60.5) == "send"  # slots: sends at 0 left at 60


def test_duplicates_within_the_dedupe_time_are_dropped() -> None:
    throttle = Throttle(max_messages=10, window=60, dedupe=600)
    assert throttle.admit(question(1), 0.0) == "send"
    assert throttle.admit(question(1), 599.0) == "duplicate"
    assert throttle.admit(question(1), 1200.0) == "send"  # 600 s after the last admitted
    assert throttle.duplicates == 1


def test_a_forced_summary_ignores_the_rate_and_one_held_notice_goes_as_it_is() -> None:
    throttle = Throttle(max_messages=1, window=60, dedupe=0)
    assert throttle.admit(question(1), 0.0) == "send"
    assert throttle.admit(question(2), 1.0) == "held"
    assert throttle.summary(2.0) is None
    held = throttle.summary(2.0, force=True)
    assert held is not None and held.kind == "question" and held.ref == "q-2"
