"""Jobs as people use them, shared by `semo job ...`, the REST API and the console.

    job, command = await create_job(store, office.id, role="FE", task="Build the login page")
    final = await follow_job(store, job.id, on_entry=print)   # each timeline step, then the end
    timeline = await job_timeline(store, job.id)              # the row, its steps and its work
    await cancel_job(store, job.id, "not needed any more")

A job is created as a `jobs` row (pending) plus a `run_job` command carrying its id: the
dispatcher of an engine of the office claims the command and its JobRunner runs the job
(semo/engine/routing/jobs.py). The engine writes each step to the job's timeline (`job_events`); the
invocations and results the job caused carry its id.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from semo.engine.events import BROADCAST_EVENT, JobEvent, JobStep
from semo.engine.store.base import NotFound, Store
from semo.engine.store.models import (
    Agent,
    AgentCommand,
    AgentInvocation,
    AgentResult,
    Job,
    JobEntry,
    UserQuestion,
    validation_problems,
)

#: The longest task accepted (characters): a task is typed into an agent's terminal.
MAX_TASK_CHARS = 100_000
#: Steps after which a job's timeline has nothing more to say (until an engine retries it).
FINAL_STEPS = frozenset({"done", "failed", "needs_review"})
#: Seconds a follower waits for the last steps of a job that has ended without one.
SETTLE_SECONDS = 5.0
#: Steps about a question (a permission too): the row is shown with the timeline.
QUESTION_STEPS = frozenset(
    {"question_asked", "question_answered", "permission_asked", "permission_decided"}
)


class JobRequest(BaseModel):
    """What a person gives to create a job."""

    model_config = ConfigDict(extra="forbid")

    role: str = Field(min_length=1, max_length=32, description="the role of the agent to run it")
    task: str = Field(min_length=1, max_length=MAX_TASK_CHARS, description="what to do")
    context: dict[str, Any] | None = Field(
        default=None, description="a JSON object given to the agent with the task"
    )


class JobView(Job):
    """A job row with its agent's role and name."""

    role: str | None = None
    agent_name: str | None = None


class JobTimeline(BaseModel):
    """A job, every step the engine recorded for it, and the work it caused."""

    job: JobView
    entries: list[JobEntry]
    questions: list[UserQuestion]
    invocations: list[AgentInvocation]
    results: list[AgentResult]


def view(job: Job, agents: dict[str, Agent]) -> JobView:
    agent = agents.get(job.agent_id)
    return JobView(
        **job.model_dump(),
        role=agent.role if agent else None,
        agent_name=agent.name if agent else None,
    )


async def agents_of(store: Store, office_id: str) -> dict[str, Agent]:
    return {agent.id: agent for agent in await store.list_agents(office_id)}


async def create_job(
    store: Store,
    office_id: str,
    *,
    role: str,
    task: str,
    context: dict[str, Any] | None = None,
) -> tuple[Job, AgentCommand]:
    """A pending job for the office's agent `role` and the `run_job` command that runs it.
    NotFound when no agent has that role (the message lists the roles), ValueError for a bad
    task or context."""
    if not task.strip():
        raise ValueError("the task is empty")
    try:
        request = JobRequest(role=role, task=task, context=context)
    except ValidationError as error:
        raise ValueError(validation_problems(error)) from None
    agents = await store.list_agents(office_id)
    agent = next((a for a in agents if a.role == request.role), None)
    if agent is None:
        agent = next((a for a in agents if a.role.lower() == request.role.lower()), None)
    if agent is None:
        known = ", ".join(sorted(a.role for a in agents)) or "none yet: start the engine once"
        raise NotFound(f"no agent with role {request.role!r} in this office (roles: {known})")
    job = Job(office_id=office_id, agent_id=agent.id, task=request.task, context=request.context)
    created = JobEntry(job_id=job.id, office_id=office_id, step="created", detail=job.task[:200])
    # the job, its run_job command and this step in one transaction
    job, command = await store.submit_job(job, created)
    await _announce(store, job, "created", job.task[:200])
    return job, command


async def list_jobs(store: Store, office_id: str, *, include_ended: bool) -> list[JobView]:
    """The office's jobs, oldest first: the open ones (pending, running, and needs_review:
    waiting for the operator to resolve a conflict), or all."""
    agents = await agents_of(store, office_id)
    if include_ended:
        jobs = await store.list_jobs(office_id)
    else:  # only the open ones are read, not every job the office ever ran
        open_jobs = [
            *await store.list_jobs(office_id, status="pending"),
            *await store.list_jobs(office_id, status="running"),
            *await store.list_jobs(office_id, status="needs_review"),
        ]
        jobs = sorted(open_jobs, key=lambda job: (job.created_at, job.id))  # as the store orders
    return [view(job, agents) for job in jobs]


async def get_job(store: Store, job_id: str, office_id: str | None = None) -> Job:
    """The job (NotFound also when it belongs to another office than `office_id`)."""
    job = await store.get_job(job_id)
    if office_id is not None and job.office_id != office_id:
        raise NotFound(f"no job {job_id} in this office")
    return job


async def job_timeline(store: Store, job_id: str, office_id: str | None = None) -> JobTimeline:
    job = await get_job(store, job_id, office_id)
    agents = await agents_of(store, job.office_id)
    entries = await store.list_job_entries(job.id)
    question_ids = [e.ref_id for e in entries if e.step in QUESTION_STEPS and e.ref_id]
    questions: list[UserQuestion] = []
    for question_id in dict.fromkeys(question_ids):
        try:
            questions.append(await store.get_question(question_id))
        except NotFound:
            continue
    invocations = await store.list_invocations(job.office_id, job_id=job.id)
    results = await store.list_results(job.office_id, job_id=job.id)
    return JobTimeline(
        job=view(job, agents),
        entries=entries,
        questions=questions,
        invocations=invocations,
        results=results,
    )


async def cancel_job(store: Store, job_id: str, reason: str, office_id: str | None = None) -> Job:
    """Cancel a job: a pending one fails at once, a running one is ended by its engine (within
    a second or so). StoreConflict when it has ended or is being cancelled already."""
    job = await get_job(store, job_id, office_id)
    reason = reason.strip() or "cancelled by an operator"
    job = await store.request_job_cancel(job.id, reason)  # its timeline step with it
    step: JobStep = "failed" if job.status == "failed" else "cancel_requested"
    detail = job.failure_reason if job.status == "failed" else reason
    await _announce(store, job, step, detail or reason)
    return job


async def _announce(store: Store, job: Job, step: JobStep, detail: str) -> None:
    """A job change made outside an engine, for remote watchers (Realtime on supabase; the
    engine's own steps go through its event bus)."""
    event = JobEvent(
        office_id=job.office_id,
        job_id=job.id,
        agent_id=job.agent_id,
        step=step,
        status=job.status,
        attempts=job.attempts,
        session_id=job.session_id,
        needs_human=job.needs_human,
        detail=detail,
    )
    await store.publish_event(job.office_id, BROADCAST_EVENT, event.model_dump(mode="json"))


async def follow_job(
    store: Store,
    job_id: str,
    *,
    on_entry: Callable[[JobEntry], None],
    timeout: float | None = None,
    poll: float = 0.5,
) -> Job | None:
    """Call `on_entry` with each of the job's timeline steps, in order, until the job has ended
    (done, failed or needs_review, and its last step says so, or `SETTLE_SECONDS` passed
    without a new step); the final row, or None when `timeout` seconds passed first."""
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    last_id = 0
    last_step = ""
    quiet_since: float | None = None
    while True:
        job = await store.get_job(job_id)
        entries = await store.list_job_entries(job_id, after=last_id)
        for entry in entries:
            on_entry(entry)
            last_id = entry.id or last_id
            last_step = entry.step
        if job.status in ("done", "failed", "needs_review"):
            if last_step in FINAL_STEPS:
                return job
            now = loop.time()
            if entries or quiet_since is None:
                quiet_since = now
            elif now - quiet_since >= SETTLE_SECONDS:
                return job
        else:
            quiet_since = None
        if deadline is not None and loop.time() >= deadline:
            return None
        wait = poll if deadline is None else max(0.0, min(poll, deadline - loop.time()))
        await store.wait_for_change(job.office_id, wait)
        # a wake-up is a hint that arrives at once for many changes: read at most every poll
        await asyncio.sleep(min(wait, 0.1))


def describe_entry(entry: JobEntry, agents: dict[str, Agent]) -> str:
    """One line for a person: time, step, the agent's role, the detail, the row it is about."""
    at = _clock(entry.at)
    agent = agents.get(entry.agent_id or "")
    who = f" [{agent.role}]" if agent else ""
    attempt = f" attempt {entry.attempts}" if entry.step == "session" else ""
    ref = f" ({entry.ref_id})" if entry.ref_id else ""
    detail = f": {entry.detail}" if entry.detail else ""
    return f"{at}  {entry.step}{who}{attempt}{detail}{ref}"


def _clock(value: datetime) -> str:
    return value.astimezone().strftime("%H:%M:%S")
