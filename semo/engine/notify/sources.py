"""Engine events as notices: which events matter, and what each notice says.

`Waiting` starts a wait (a question or a permission request: notified once it waited a sink's
`delay` and is still open); a later routing step about the same row (answered, cancelled,
allowed, denied...) or the end of the asking session ends it. Everything else becomes a
`Notice` at once or nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from semo.engine.notify.models import Notice, NoticeKind

#: routing steps that open a permission request (APPROVE's hooks may name it either way)
PERMISSION_STEPS = frozenset({"permission_asked", "permission_requested", "permission_request"})
QUESTION_STEPS = frozenset({"question_asked"})


@dataclass(frozen=True)
class Waiting:
    """A question or permission request that waits for a person."""

    notice: Notice
    ref: str
    session_id: str | None


#: the role of an agent id (or of a session id), for the notice
RoleOf = Callable[[str | None], str]


def from_event(event: Any, office: str, role_of: RoleOf) -> Notice | Waiting | None:
    """The notice (or wait) an engine event stands for, if any."""
    kind = getattr(event, "kind", None)
    if kind == "routing_step":
        return _routing(event, office, role_of)
    if kind == "job":
        return _job(event, office, role_of)
    if kind == "session_status" and event.status == "error":
        role = event.role or role_of(event.agent_id)
        return Notice(
            kind="agent_error",
            office=office,
            agent=role,
            title=f"{role} is in error",
            text=event.reason or "the agent reported an error",
            answer=f"console: select {role} and look at its pane · semo sessions",
            ref=event.session_id,
        )
    if kind == "session_signal" and event.signal_kind == "stale":
        role = role_of(event.session_id)  # role_of knows sessions too
        return Notice(
            kind="agent_stale",
            office=office,
            agent=role,
            title=f"{role} is silent while busy",
            text=event.text,
            answer="console: look at its pane · semo sessions",
            ref=event.session_id,
        )
    return None


def _routing(event: Any, office: str, role_of: RoleOf) -> Waiting | None:
    step, ref = event.step, event.ref_id
    if not ref or (step not in QUESTION_STEPS and step not in PERMISSION_STEPS):
        return None
    role = role_of(event.agent_id)
    if step in QUESTION_STEPS:
        notice = Notice(
            kind="question",
            office=office,
            agent=role,
            title=f"{role} asks you",
            text=event.detail,
            answer=f'semo answer {ref} "..." · console: the inbox',
            ref=ref,
        )
    else:
        notice = Notice(
            kind="permission",
            office=office,
            agent=role,
            title=f"{role} asks for permission",
            text=event.detail,
            answer=f"semo questions; semo answer {ref} (allow or deny) · console: the inbox",
            ref=ref,
        )
    return Waiting(notice, ref, event.session_id)


def _job(event: Any, office: str, role_of: RoleOf) -> Notice | None:
    step = event.step
    review = (
        event.needs_human
        or step == "needs_review"
        or getattr(event, "status", None) == "needs_review"
    )
    if step not in ("done", "failed", "needs_review"):
        return None
    role = role_of(event.agent_id)
    show = f"semo job show {event.job_id}"
    kind: NoticeKind
    if review:
        kind, title = "job_review", f"a job of {role} needs your review"
    elif step == "done":
        kind, title = "job_done", f"a job of {role} is done"
    else:
        kind, title = "job_failed", f"a job of {role} failed"
    return Notice(
        kind=kind,
        office=office,
        agent=role,
        title=title,
        text=event.detail,
        answer=show,
        ref=f"{event.job_id}:{event.attempts}",
    )


def engine_died(office: str, engine_id: str, what: str) -> Notice:
    """An engine of the office that died, as found by `what` ("found by X on start")."""
    return Notice(
        kind="engine_died",
        office=office,
        title=f"engine {engine_id} died",
        text=what,
        answer="semo engines · its jobs were failed or retried: semo jobs",
        ref=engine_id,
    )


def breaker_open(office: str, role: str, reason: str, cooldown: float) -> Notice:
    """The circuit breaker of `role`'s sessions opened."""
    return Notice(
        kind="breaker_open",
        office=office,
        agent=role,
        title=f"{role} sessions keep crashing",
        text=f"circuit breaker open ({reason}): no new {role} session for {cooldown:g} s",
        answer="semo engines · the engine's log · [pool] restart_* in semo.toml",
        ref=role,
    )


def probe_notice(office: str) -> Notice:
    """What `semo notify test` sends."""
    return Notice(
        kind="test",
        office=office,
        title="test notification",
        text="semo notify test: this sink works",
        answer="nothing to do",
        ref="",
    )
