"""A circuit breaker per key (an agent role): keeps a crashing session from restarting in a storm.

How it works: docs/SESSIONS.md, "The circuit breaker".
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = ["BreakerState", "BreakerTransition", "CircuitBreaker"]

log = logging.getLogger("semo.breaker")


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True)
class BreakerTransition:
    """One state change of one key's breaker."""

    key: Hashable
    old: BreakerState
    new: BreakerState
    at: float  # the breaker's clock
    reason: str  # e.g. "3 failures within 300s", "reset timeout elapsed: trial", "trial failed"
    failures: int  # failures in the window when it happened


@dataclass
class _Circuit:
    state: BreakerState = BreakerState.CLOSED
    failures: deque[float] = field(default_factory=deque)
    opened_at: float = 0.0


TransitionCallback = Callable[[BreakerTransition], object]


class CircuitBreaker:
    """Independent breakers per key; see the module docstring for the rules."""

    def __init__(
        self,
        failure_threshold: int = 3,
        window_seconds: float = 300,
        reset_timeout: float = 60,
        clock: Callable[[], float] = time.monotonic,
        *,
        on_transition: TransitionCallback | None = None,
    ) -> None:
        if failure_threshold < 1:
            raise ValueError("failure_threshold must be at least 1")
        if window_seconds <= 0:
            raise ValueError("window_seconds must be positive")
        if reset_timeout < 0:
            raise ValueError("reset_timeout must not be negative")
        self.failure_threshold = failure_threshold
        self.window_seconds = float(window_seconds)
        self.reset_timeout = float(reset_timeout)
        self.clock = clock
        self.on_transition = on_transition
        self._circuits: dict[Hashable, _Circuit] = {}
        self._lock = threading.Lock()

    # -- queries -----------------------------------------------------------------------------

    def state(self, key: Hashable) -> BreakerState:
        """The key's state as of its last ``allow`` / ``record_*`` (unknown keys: closed)."""
        with self._lock:
            circuit = self._circuits.get(key)
            return circuit.state if circuit else BreakerState.CLOSED

    def failures(self, key: Hashable) -> int:
        """Failures the key has in the window now (0 once forgotten)."""
        with self._lock:
            circuit = self._circuits.get(key)
            if circuit is None:
                return 0
            self._expire(circuit, self.clock())
            return len(circuit.failures)

    def retry_after(self, key: Hashable) -> float:
        """Seconds until an open breaker lets a trial through (0 when not open or due)."""
        with self._lock:
            circuit = self._circuits.get(key)
            if circuit is None or circuit.state != BreakerState.OPEN:
                return 0.0
            return max(0.0, circuit.opened_at + self.reset_timeout - self.clock())

    def keys(self) -> list[Hashable]:
        """Keys with a breaker that is not closed-and-clean."""
        with self._lock:
            return list(self._circuits)

    # -- the protocol ------------------------------------------------------------------------

    def allow(self, key: Hashable) -> bool:
        """May the caller try now? In ``open`` after ``reset_timeout``, this call gets the one
        half-open trial (and must report its outcome)."""
        events: list[BreakerTransition] = []
        with self._lock:
            circuit = self._circuits.get(key)
            if circuit is None or circuit.state == BreakerState.CLOSED:
                result = True
            elif circuit.state == BreakerState.OPEN:
                now = self.clock()
                if now - circuit.opened_at >= self.reset_timeout:
                    reason = "reset timeout elapsed: trial"
                    self._move(key, circuit, BreakerState.HALF_OPEN, now, reason, events)
                    result = True
                else:
                    result = False
            else:  # half-open: the one trial is out
                result = False
        self._emit(events)
        return result

    def record_failure(self, key: Hashable) -> None:
        """A try failed (a crash, a failed start)."""
        events: list[BreakerTransition] = []
        with self._lock:
            now = self.clock()
            circuit = self._circuits.setdefault(key, _Circuit())
            if circuit.state == BreakerState.HALF_OPEN:
                circuit.failures.append(now)
                self._expire(circuit, now)
                circuit.opened_at = now
                self._move(key, circuit, BreakerState.OPEN, now, "trial failed", events)
            elif circuit.state == BreakerState.CLOSED:
                circuit.failures.append(now)
                self._expire(circuit, now)
                if len(circuit.failures) >= self.failure_threshold:
                    circuit.opened_at = now
                    reason = f"{len(circuit.failures)} failures within {self.window_seconds:g}s"
                    self._move(key, circuit, BreakerState.OPEN, now, reason, events)
            # open: nothing to learn; the reset timeout runs from when it opened
        self._emit(events)

    def record_success(self, key: Hashable) -> None:
        """A try succeeded. Closes a half-open breaker (failures forgotten); in ``closed`` the
        failures in the window are kept (see the module docstring)."""
        events: list[BreakerTransition] = []
        with self._lock:
            circuit = self._circuits.get(key)
            if circuit is None:
                return
            now = self.clock()
            if circuit.state == BreakerState.HALF_OPEN:
                circuit.failures.clear()
                self._move(key, circuit, BreakerState.CLOSED, now, "trial succeeded", events)
            elif circuit.state == BreakerState.CLOSED:
                self._expire(circuit, now)
            if circuit.state == BreakerState.CLOSED and not circuit.failures:
                del self._circuits[key]
        self._emit(events)

    def reset(self, key: Hashable) -> None:
        """Forget the key (an operator's "try again now"): closed, no failures."""
        events: list[BreakerTransition] = []
        with self._lock:
            circuit = self._circuits.pop(key, None)
            if circuit is not None and circuit.state != BreakerState.CLOSED:
                circuit.failures.clear()
                self._move(key, circuit, BreakerState.CLOSED, self.clock(), "reset", events)
        self._emit(events)

    # -- internals ---------------------------------------------------------------------------

    def _expire(self, circuit: _Circuit, now: float) -> None:
        horizon = now - self.window_seconds
        while circuit.failures and circuit.failures[0] <= horizon:
            circuit.failures.popleft()

    def _move(
        self,
        key: Hashable,
        circuit: _Circuit,
        new: BreakerState,
        now: float,
        reason: str,
        events: list[BreakerTransition],
    ) -> None:
        old, circuit.state = circuit.state, new
        events.append(BreakerTransition(key, old, new, now, reason, len(circuit.failures)))

    def _emit(self, events: list[BreakerTransition]) -> None:
        for event in events:
            log.info("circuit %s: %s -> %s (%s)", event.key, event.old, event.new, event.reason)
            if self.on_transition is not None:
                try:
                    self.on_transition(event)
                except Exception:
                    log.exception("breaker transition callback failed for %s", event.key)
