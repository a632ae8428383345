"""A job and its timeline as lines of text for the console's jobs view.

The console adds no markup: the lines go through semo/console/text.py."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from semo.engine.interface import AgentView
from semo.engine.office.job_ops import JobTimeline, JobView
from semo.engine.store.models import JobEntry

#: The task's first line in the list is cut to this many characters (the timeline has it all).
TASK_CHARS = 24


def age(since: datetime, now: datetime | None = None) -> str:
    """`<1m`, `5m`, `3h`, `2d`: how long ago, as coarse as the session list's ages (a view
    with nothing happening changes at most once a minute per job)."""
    seconds = max(0, int(((now or datetime.now(UTC)) - since).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return "<1m"


def job_label(job_id: str) -> str:
    """A job as the view names it (the id's start)."""
    return job_id[:8]


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def clock(at: datetime) -> str:
    return at.astimezone().strftime("%H:%M:%S")


def cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def entry_line(entry: JobEntry, agents: Mapping[str, AgentView]) -> str:
    """One step: time, step, the agent's role, the first line of its detail (which names the
    attempt where it matters)."""
    agent = agents.get(entry.agent_id or "")
    who = f" [{agent.role}]" if agent else ""
    detail = first_line(entry.detail or "")
    return f"{clock(entry.at)}  {entry.step}{who}{': ' + detail if detail else ''}"


def task_room(width: int, states: list[str], roles: list[str], age_width: int) -> int:
    """Characters of task that fit a job list `width` cells wide beside its other columns
    (each with a cell of padding either side), between 8 and TASK_CHARS."""
    others = [max(map(len, column), default=0) for column in (states, roles)] + [age_width]
    return max(8, min(TASK_CHARS, width - sum(w + 2 for w in others) - 2))


#: a running job whose agent waits for the operator (a question or a permission)
ASKING = "asks you"


def job_row(
    job: JobView, now: datetime | None = None, asking: bool = False, task_chars: int = TASK_CHARS
) -> tuple[str, str, str, str]:
    """State (`asks you` for a running job whose agent waits for the operator), role, the
    task's first line (cut to `task_chars`), age."""
    task = cut(first_line(job.task), task_chars)
    status = ASKING if asking and job.status == "running" else job.status
    return status, job.role or "?", task, age(job.created_at, now)


def timeline_lines(timeline: JobTimeline, agents: Mapping[str, AgentView]) -> list[str]:
    """The job, its steps in order, then its questions, invocations and results."""
    job = timeline.job
    lines = [
        f"job {job_label(job.id)}  {job.status}  {job.role or '?'}  attempts {job.attempts}",
        f"task: {first_line(job.task)}",
    ]
    if job.failure_reason:
        lines.append(f"reason: {job.failure_reason}")
    elif job.cancel_reason:
        lines.append(f"cancel requested: {job.cancel_reason}")
    lines.append("")
    lines.append("steps:")
    lines += [f"  {entry_line(entry, agents)}" for entry in timeline.entries]

    def role(agent_id: str) -> str:
        agent = agents.get(agent_id)
        return agent.role if agent else agent_id[:8]

    if timeline.questions:
        lines += ["", "questions:"]
        for question in timeline.questions:
            answer = question.answer if question.answer is not None else f"({question.status})"
            lines.append(f"  {role(question.agent_id)} asked: {first_line(question.question)}")
            lines.append(f"    answer: {first_line(answer)}")
    if timeline.invocations:
        lines += ["", "invocations:"]
        for invocation in timeline.invocations:
            who = f"{role(invocation.caller_agent_id)} -> {role(invocation.target_agent_id)}"
            error = f" ({invocation.error})" if invocation.error else ""
            lines.append(f"  {who} {invocation.status}{error}: {first_line(invocation.task)}")
    if timeline.results:
        lines += ["", "results:"]
        for result in timeline.results:
            who = f"{role(result.sender_agent_id)} -> {role(result.recipient_agent_id)}"
            reason = f" ({result.cancel_reason})" if result.cancel_reason else ""
            lines.append(f"  {who} {result.status}{reason}: {first_line(result.summary)}")
    return lines
