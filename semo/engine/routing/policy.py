"""The error policy of a job (seed 004): what to do when an attempt fails.

    decision = decide(Failure(kind="timeout", attempts=1, detail="no outcome in 1800 s"))
    if decision.retry: ...                      # one more attempt
    else: job failed, decision.reason, decision.needs_human

How it works: docs/JOBS.md, "The error policy in code".
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "MAX_ATTEMPTS",
    "Decision",
    "Failure",
    "FailureKind",
    "decide",
    "kind_for_pattern",
]

FailureKind = Literal[
    "enoent",
    "permission_denied",
    "timeout",
    "crash",
    "error",
    "no_session",
    "terminated",
    "cancelled",
]

#: Timeouts and crashes are retried once: at most this many attempts in all.
MAX_ATTEMPTS = 2

_SIGNAL_KINDS: dict[str, FailureKind] = {
    "enoent": "enoent",
    "permission_denied": "permission_denied",
}


class Failure(BaseModel):
    """One failed attempt of a job."""

    model_config = ConfigDict(frozen=True)

    kind: FailureKind
    #: attempts made so far, the failed one included (>= 1)
    attempts: int = Field(ge=1)
    #: what happened, for the operator (the signal's line, the exit status, the timeout...)
    detail: str = ""


class Decision(BaseModel):
    """What to do about a failure. Not retried means the job is failed, with `reason`."""

    model_config = ConfigDict(frozen=True)

    retry: bool
    #: the retry runs in a new session (the old one is gone or unusable)
    recreate_session: bool = False
    needs_human: bool = False
    reason: str


def kind_for_pattern(pattern: str) -> FailureKind:
    """The failure kind of an error signal's pattern name (semo.engine.protocol.monitor.PATTERNS):
    ``enoent`` and ``permission_denied`` are their own kinds, every other error is ``error``."""
    return _SIGNAL_KINDS.get(pattern, "error")


def decide(failure: Failure) -> Decision:
    """The decision for `failure` (see the module's table)."""
    kind, detail = failure.kind, failure.detail
    what = f": {detail}" if detail else ""
    retries_left = failure.attempts < MAX_ATTEMPTS
    if kind == "enoent":
        return Decision(
            retry=False, reason=f"a file or folder the task needs does not exist (ENOENT){what}"
        )
    if kind == "permission_denied":
        return Decision(
            retry=False,
            needs_human=True,
            reason=f"permission denied{what}; a human has to grant access or change the task",
        )
    if kind == "timeout":
        if retries_left:
            return Decision(retry=True, reason=f"timed out{what}; retrying once")
        return Decision(
            retry=False, reason=f"timed out{what} (attempt {failure.attempts}, no retry left)"
        )
    if kind == "crash":
        if retries_left:
            return Decision(
                retry=True,
                recreate_session=True,
                reason=f"the agent's session crashed{what}; retrying once in a new session",
            )
        return Decision(
            retry=False,
            reason=f"the agent's session crashed{what} (attempt {failure.attempts}, no retry left)",
        )
    if kind == "error":
        return Decision(retry=False, reason=f"the agent reported an error{what}")
    if kind == "no_session":
        return Decision(retry=False, reason=f"no session to run the job in{what}")
    if kind == "terminated":
        return Decision(retry=False, reason=f"the agent's session was ended{what}")
    return Decision(retry=False, reason=f"the job was interrupted{what}")
