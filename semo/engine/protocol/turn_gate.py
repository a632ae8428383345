"""Which hook reports a session's CLI can have sent: only turns semo or the operator started.

    gate = TurnGate()
    gate.submitted()          # semo typed a prompt and Enter, or the operator pressed Enter
    gate.admit("Stop")        # True: the turn's end (it closes the turn); False: dropped

A hook message carries the session's token, and the agent has that token (it is in the CLI's
environment, which its tools inherit), so the agent can send hook messages of its own: each
forged Stop used to be a new turn, with its own message budget and its own questions (3,000
pending questions in 1.5 s). No secret fixes that for a same-uid agent: it can read its
environment, its worktree, the settings file and the transcript, and its tool processes are
children of the CLI just like the CLI's hook processes (docs/SECURITY.md, "Hook turns"). What the
agent cannot do is make semo submit a prompt. So every turn is a *credit* semo hands out when it
submits input; the credit is the per-turn nonce, held by the engine rather than the CLI:

- ``SessionStart``: the first one of the CLI's life is free; later ones (``/clear``) need a
  turn open (a submission).
- ``UserPromptSubmit``: needs an open turn; it does not close it.
- ``Stop``: needs an open turn and closes it.
- ``SessionEnd``: always (it only ends the session).
- Every other event (``Notification``, ``PermissionRequest``, any later one): needs an open turn,
  at most ``MAX_EVENTS_PER_TURN`` of them per turn.

At most ``MAX_OPEN_TURNS`` credits are outstanding (a submission whose turn never ended, such as
one the operator cancelled, leaves one; the cap bounds what a forger can spend of them).
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
