"""Which hook reports a session's CLI can have sent: only turns semo or the operator started.

    gate = TurnGate()
    gate.submitted()          # semo typed a prompt and Enter, or the operator pressed Enter
    gate.admit("Stop")        # True: the turn's end (it closes the turn); False: dropped

How it works: docs/SECURITY.md, "Turn credits for hook reports".
"""

from __future__ import annotations

from collections import Counter

#: credits (submitted turns not yet ended) kept at once
MAX_OPEN_TURNS = 4
#: reports other than a turn's start and end admitted per turn (permission requests, notices)
MAX_EVENTS_PER_TURN = 200


class TurnGate:
    """The hook reports one session's CLI can have sent (see the module's docstring)."""

    def __init__(self) -> None:
        self.open = 0
        self.started = False
        self.in_turn = 0
        #: dropped reports by event name
        self.dropped: Counter[str] = Counter()

    def submitted(self) -> None:
        """semo (or the operator) submitted input: one turn may report."""
        self.open = min(self.open + 1, MAX_OPEN_TURNS)
        self.in_turn = 0

    def admit(self, event: str) -> bool:
        """Whether a report of `event` can be the CLI's; a Stop admitted closes its turn."""
        if event == "SessionEnd":
            return True
        if event == "SessionStart" and not self.started:
            self.started = True
            return True
        if self.open <= 0:
            return self._drop(event)
        if event == "Stop":
            self.open -= 1
        elif event not in ("UserPromptSubmit", "SessionStart"):
            if self.in_turn >= MAX_EVENTS_PER_TURN:
                return self._drop(event)
            self.in_turn += 1
        return True

    def _drop(self, event: str) -> bool:
        self.dropped[event] += 1
        return False
