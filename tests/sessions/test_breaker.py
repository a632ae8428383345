"""CircuitBreaker: closed -> open -> half_open -> closed/open, per key, on an injected clock."""

from __future__ import annotations

import threading

import pytest

from semo.engine.sessions.breaker import BreakerState, BreakerTransition, CircuitBreaker

CLOSED, OPEN, HALF_OPEN = BreakerState.CLOSED, BreakerState.OPEN, BreakerState.HALF_OPEN


class FakeClock:
    """Seconds that move only when the test says so."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def events() -> list[BreakerTransition]:
    return []


@pytest.fixture
def breaker(clock: FakeClock, events: list[BreakerTransition]) -> CircuitBreaker:
    return CircuitBreaker(
        failure_threshold=3,
        window_seconds=300,
        reset_timeout=60,
        clock=clock,
        on_transition=events.append,
    )


def moves(events: list[BreakerTransition]) -> list[tuple[str, str]]:
    return [(e.old.value, e.new.value) for e in events]


def test_unknown_key_is_closed_and_allowed(breaker: CircuitBreaker) -> None:
    assert breaker.state("FE") == CLOSED
    assert breaker.allow("FE")
    assert breaker.failures("FE") == 0
    assert breaker.retry_after("FE") == 0


def test_opens_at_threshold_within_window(
    breaker: CircuitBreaker, clock: FakeClock, events: list[BreakerTransition]
) -> None:
    breaker.record_failure("BE")
    clock.advance(100)
    breaker.record_failure("BE")
    assert breaker.state("BE") == CLOSED and breaker.allow("BE")
    assert events == []
    clock.advance(100)
    breaker.record_failure("BE")
    assert breaker.state("BE") == OPEN
    assert not breaker.allow("BE")
    assert breaker.retry_after("BE") == 60
    assert len(events) == 1
    event = events[0]
    assert (event.key, event.old, event.new, event.failures) == ("BE", CLOSED, OPEN, 3)
    assert event.at == clock.now
    assert "3 failures within 300s" in event.reason


def test_failures_outside_window_are_forgotten(breaker: CircuitBreaker, clock: FakeClock) -> None:
    breaker.record_failure("BE")
    clock.advance(200)
    breaker.record_failure("BE")
    clock.advance(101)  # the first failure is now 301 s old
    breaker.record_failure("BE")
    assert breaker.state("BE") == CLOSED
    assert breaker.failures("BE") == 2
    clock.advance(300)
    assert breaker.failures("BE") == 0


def test_success_in_closed_does_not_hide_a_restart_storm(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    # start ok -> crash -> restart ok -> crash -> ...: must still open
    for _ in range(3):
        assert breaker.allow("QA")
        breaker.record_success("QA")
        clock.advance(5)
        breaker.record_failure("QA")
    assert breaker.state("QA") == OPEN


def test_half_open_lets_exactly_one_trial_through(
    breaker: CircuitBreaker, clock: FakeClock, events: list[BreakerTransition]
) -> None:
    for _ in range(3):
        breaker.record_failure("FE")
    clock.advance(59.9)
    assert not breaker.allow("FE")
    assert breaker.retry_after("FE") == pytest.approx(0.1)
    clock.advance(0.1)
    assert breaker.state("FE") == OPEN  # state() never moves the breaker
    assert breaker.allow("FE")  # the trial
    assert breaker.state("FE") == HALF_OPEN
    assert [breaker.allow("FE") for _ in range(5)] == [False] * 5
    clock.advance(1000)
    assert not breaker.allow("FE")  # still waiting for the trial's outcome
    assert moves(events)[-1] == ("open", "half_open")
    assert events[-1].reason == "reset timeout elapsed: trial"


def test_trial_success_closes_and_forgets(
    breaker: CircuitBreaker, clock: FakeClock, events: list[BreakerTransition]
) -> None:
    for _ in range(3):
        breaker.record_failure("FE")
    clock.advance(60)
    assert breaker.allow("FE")
    breaker.record_success("FE")
    assert breaker.state("FE") == CLOSED
    assert breaker.failures("FE") == 0
    assert all(breaker.allow("FE") for _ in range(3))
    assert moves(events) == [("closed", "open"), ("open", "half_open"), ("half_open", "closed")]
    # a fresh count: two failures do not reopen it
    breaker.record_failure("FE")
    breaker.record_failure("FE")
    assert breaker.state("FE") == CLOSED


def test_trial_failure_reopens_for_another_timeout(
    breaker: CircuitBreaker, clock: FakeClock, events: list[BreakerTransition]
) -> None:
    for _ in range(3):
        breaker.record_failure("FE")
    clock.advance(60)
    assert breaker.allow("FE")
    clock.advance(10)
    breaker.record_failure("FE")
    assert breaker.state("FE") == OPEN
    assert events[-1].reason == "trial failed"
    clock.advance(59)
    assert not breaker.allow("FE")  # the timeout runs from the reopening
    clock.advance(1)
    assert breaker.allow("FE")
    assert moves(events) == [
        ("closed", "open"),
        ("open", "half_open"),
        ("half_open", "open"),
        ("open", "half_open"),
    ]


def test_failures_while_open_do_not_extend_it(breaker: CircuitBreaker, clock: FakeClock) -> None:
    for _ in range(3):
        breaker.record_failure("FE")
    clock.advance(30)
    breaker.record_failure("FE")
    clock.advance(30)
    assert breaker.allow("FE")


def test_keys_are_independent(breaker: CircuitBreaker) -> None:
    for _ in range(3):
        breaker.record_failure("FE")
    assert breaker.state("FE") == OPEN
    assert breaker.state("BE") == CLOSED
    assert breaker.allow("BE")
    breaker.record_failure("BE")
    assert breaker.failures("BE") == 1 and breaker.failures("FE") == 3


def test_reset_closes_and_reports(breaker: CircuitBreaker, events: list[BreakerTransition]) -> None:
    for _ in range(3):
        breaker.record_failure("FE")
    breaker.reset("FE")
    assert breaker.state("FE") == CLOSED and breaker.allow("FE")
    assert moves(events) == [("closed", "open"), ("open", "closed")]
    breaker.reset("nobody")  # no event for a closed key
    assert len(events) == 2


def test_threshold_one_and_zero_reset_timeout(clock: FakeClock) -> None:
    breaker = CircuitBreaker(failure_threshold=1, window_seconds=10, reset_timeout=0, clock=clock)
    breaker.record_failure("x")
    assert breaker.state("x") == OPEN
    assert breaker.allow("x")  # the trial, at once
    assert not breaker.allow("x")


def test_clean_keys_do_not_accumulate(breaker: CircuitBreaker, clock: FakeClock) -> None:
    for i in range(100):
        breaker.allow(f"role-{i}")
        breaker.record_success(f"role-{i}")
    breaker.record_failure("BE")
    clock.advance(301)
    breaker.record_success("BE")
    assert breaker.keys() == []


def test_callback_errors_do_not_break_the_breaker(clock: FakeClock) -> None:
    def boom(_event: BreakerTransition) -> None:
        raise RuntimeError("listener bug")

    breaker = CircuitBreaker(failure_threshold=1, clock=clock, on_transition=boom)
    breaker.record_failure("x")
    assert breaker.state("x") == OPEN


def test_callback_may_query_the_breaker(clock: FakeClock) -> None:
    seen: list[BreakerState] = []
    breaker: CircuitBreaker

    def listener(event: BreakerTransition) -> None:
        seen.append(breaker.state(event.key))  # would deadlock if called under the lock

    breaker = CircuitBreaker(failure_threshold=1, clock=clock, on_transition=listener)
    breaker.record_failure("x")
    assert seen == [OPEN]


def test_concurrent_allow_grants_one_trial(clock: FakeClock) -> None:
    breaker = CircuitBreaker(failure_threshold=1, reset_timeout=60, clock=clock)
    breaker.record_failure("x")
    clock.advance(60)
    granted: list[bool] = []
    barrier = threading.Barrier(16)

    def worker() -> None:
        barrier.wait()
        granted.append(breaker.allow("x"))

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert granted.count(True) == 1


@pytest.mark.parametrize(
    "kwargs",
    [{"failure_threshold": 0}, {"window_seconds": 0}, {"reset_timeout": -1}],
)
def test_bad_parameters(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        CircuitBreaker(**kwargs)  # type: ignore[arg-type]
