"""The pool view's text (screens/pool.py): a row per pooled session and per idle role.

A row per pooled session and per role without one, and lines for open breakers and requests
waiting for a session."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from semo.engine.plain_text import plain

if TYPE_CHECKING:
    from semo.engine.interface import PoolView

POOL_COLUMNS = ("role", "session", "kind", "lease", "age", "what")
NO_SESSION = "no session"
ROLE_ROW = "role:"  # the key of a role's row without a session: ROLE_ROW + role


class PoolRow(NamedTuple):
    key: str  # a session id, or ROLE_ROW + the role
    cells: tuple[str, ...]


def seconds_text(seconds: float | None) -> str:
    """`<1m`, `5m`, `3h`, `2d` (the session list's ages); '' when unknown."""
    if seconds is None:
        return ""
    whole = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if whole >= size:
            return f"{whole // size}{unit}"
    return "<1m"


def task_text(task_id: str | None) -> str:
    """A lease's task as the console shows it: `job 1a2b3c4d` for a job's, else its start."""
    if not task_id:
        return ""
    if task_id.startswith("job-"):
        return f"job {task_id.removeprefix('job-')[:8]}"
    return plain(task_id, one_line=True)[:20]


def pool_rows(
    status: PoolView | None, roles: Iterable[str], names: Mapping[str, str]
) -> list[PoolRow]:
    """The sessions, warm first, by role, the oldest first; then each configured role that
    has no session (why, when it is a warm role that is down)."""
    rows: list[PoolRow] = []
    have: set[str] = set()
    sessions = sorted(
        (status.sessions if status else {}).items(),
        key=lambda item: (not item[1].warm, item[1].role, -(item[1].age_s or 0.0)),
    )
    for session_id, info in sessions:
        have.add(info.role)
        if info.leased:
            lease, what = "leased", task_text(info.task_id) or "a turn"
        else:
            lease = "idle" if info.idle_s is not None else "starting"
            what = f"idle {seconds_text(info.idle_s)}" if info.idle_s is not None else ""
        rows.append(
            PoolRow(
                session_id,
                (
                    info.role,
                    names.get(session_id, session_id[:6]),
                    "warm" if info.warm else "cold",
                    lease,
                    seconds_text(info.age_s),
                    what,
                ),
            )
        )
    why_down = status.why_down if status else {}
    for role in sorted(set(roles) - have):
        why = plain(why_down.get(role, ""), one_line=True)
        kind = "warm" if role in why_down else ""
        rows.append(
            PoolRow(ROLE_ROW + role, (role, "", kind, NO_SESSION, "", why or "s starts one"))
        )
    return rows


def pool_summary(status: PoolView | None) -> str:
    """One line: how full the pool is, warm and cold, leased and idle, waiting."""
    if status is None:
        return "no pool: the engine is not running"
    sessions = status.sessions.values()
    warm = sum(s.warm for s in sessions)
    leased = sum(s.leased for s in sessions)
    idle = sum(s.idle_s is not None for s in sessions)
    parts = [
        f"{status.total}/{status.max_sessions} sessions",
        f"warm {warm}, cold {len(status.sessions) - warm}",
        f"leased {leased}, idle {idle}",
    ]
    if status.starting:
        parts.append(f"starting {status.starting}")
    parts.append(f"{len(status.waiting)} waiting")
    return " · ".join(parts)


def pool_notes(status: PoolView | None) -> list[str]:
    """Open (or half-open) breakers with their retry time, then the requests waiting for a
    session, the longest waiting first."""
    if status is None:
        return []
    lines: list[str] = []
    for role, breaker in sorted(status.breakers.items()):
        if breaker.state == "closed":
            continue
        retry = (
            f"retry in {max(0, round(breaker.retry_after_s))} s"
            if breaker.retry_after_s > 0
            else "retry now"
        )
        lines.append(
            f"breaker {plain(role, one_line=True)} {breaker.state}: "
            f"{breaker.failures} failed starts, {retry}"
        )
    for waiter in status.waiting:
        what = task_text(waiter.task_id) or "a session"
        lines.append(
            f"waiting for {plain(waiter.role, one_line=True)}: {what} "
            f"({seconds_text(waiter.waited_s)})"
        )
    return lines or ["no breaker open, nothing waiting for a session"]
