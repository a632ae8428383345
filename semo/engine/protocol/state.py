"""Agent session states and the tracker that records every change with its source."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal


class AgentState(StrEnum):
    CREATING = "creating"
    READY = "ready"
    EXECUTING = "executing"
    WAITING_INPUT = "waiting_input"
    ERROR = "error"
    TERMINATED = "terminated"


#: Each state as the operator reads it, the same in the console, the CLI and job timelines.
STATE_WORDS: dict[str, str] = {
    AgentState.CREATING: "starting",
    AgentState.READY: "ready",
    AgentState.EXECUTING: "working",
    AgentState.WAITING_INPUT: "asks you",
    AgentState.ERROR: "error",
    AgentState.TERMINATED: "ended",
}

StateSource = Literal["hook", "screen", "process", "protocol", "engine"]
HISTORY = 1000


@dataclass(frozen=True)
class StateChange:
    state: AgentState
    previous: AgentState
    source: StateSource
    reason: str
    at: float


class StateTracker:
    """Holds the current state; `set` returns a StateChange only when the state changes.

    `terminated` is final: nothing moves a session out of it.
    """

    def __init__(self, initial: AgentState = AgentState.CREATING) -> None:
        self.state = initial
        #: the most recent changes (bounded)
        self.history: deque[StateChange] = deque(maxlen=HISTORY)

    def set(
        self, state: AgentState, source: StateSource, reason: str, at: float
    ) -> StateChange | None:
        if state == self.state or self.state == AgentState.TERMINATED:
            return None
        change = StateChange(state, self.state, source, reason, at)
        self.state = state
        self.history.append(change)
        return change

    @property
    def busy(self) -> bool:
        return self.state == AgentState.EXECUTING
