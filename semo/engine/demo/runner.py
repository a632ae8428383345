"""`semo demo --headless`: the demo office's job run to the end without the console.

The engine starts the demo office (FE, BE and QA as scripted demo agents in PTYs), FE gets a job,
asks the operator a question (answered here as the operator would: the first option), invokes
BE, then QA, and finishes. Every routing step is printed as it happens; the rows stay in the
store (`semo sessions --office demo --all`, `semo questions --office demo --all`).
"""

from __future__ import annotations

import asyncio
import contextlib

from semo.engine.demo.office import DEMO_TASK, demo_config, prepare_demo_repository
from semo.engine.engine import Engine
from semo.engine.events import Event, JobEvent, RoutingStep, SessionStatusChanged
from semo.engine.plain_text import plain
from semo.engine.store.models import Job


def describe(event: Event, roles: dict[str, str]) -> str | None:
    if isinstance(event, RoutingStep):
        who = roles.get(event.agent_id or "", "?")
        return f"{who}: {event.step.replace('_', ' ')}: {event.detail[:90]}"
    if isinstance(event, JobEvent):
        return f"job {event.step} ({event.status}) {event.detail[:80]}".rstrip()
    if isinstance(event, SessionStatusChanged) and event.status in ("waiting_input", "error"):
        return f"{event.role}: {event.status} ({event.reason})"
    return None


async def run_headless(timeout: float = 60.0, *, steps: int = 2, delay: float = 0.3) -> int:
    prepare_demo_repository()
    engine = Engine(demo_config(steps=steps, delay=delay))
    await engine.start()
    office, store = engine.office, engine.store
    if office is None or store is None:  # start() sets both
        raise RuntimeError("the demo engine started without an office or a store")
    print(f"semo demo: office {office.name!r} in the {store.backend} store")
    roles = {agent.id: role for role, agent in engine.agents.items()}
    printer = asyncio.create_task(_print_events(engine, roles))
    try:
        job = await engine.store.create_job(
            Job(office_id=engine.office_id, agent_id=engine.agents["FE"].id, task=DEMO_TASK)
        )
        assert engine.jobs is not None
        runner = asyncio.create_task(engine.jobs.execute_job(job.id))
        answering = asyncio.create_task(_answer_like_an_operator(engine))
        try:
            done = await asyncio.wait_for(runner, timeout)
        finally:
            answering.cancel()
        print(f"\nsemo demo: job {done.status}: {DEMO_TASK!r} ({done.attempts} attempt(s))")
        await _print_work(engine, done.id)
        print("semo demo: see the rows: semo questions --office demo --all")
        return 0 if done.status == "done" else 1
    finally:
        printer.cancel()
        await engine.stop("demo over")


async def _print_work(engine: Engine, job_id: str) -> None:
    """The job's branch and its diffstat: what the agents changed."""
    from semo.engine.gitrun import GitError
    from semo.engine.ship.gitops import diffstat

    job = await engine.store.get_job(job_id)
    if not job.branch or not job.base_branch:
        return
    try:
        stat = await diffstat(engine.config.office.repository, job.base_branch, job.branch)
    except GitError as error:
        print(plain(f"semo demo: the job's branch {job.branch} cannot be read: {error}"))
        return
    print(plain(f"semo demo: the job's work is on {job.branch}:\n{stat.rstrip()}"))
    print("semo demo: in the console (semo demo): F5, the job selected, then d shows its diff")


async def _answer_like_an_operator(engine: Engine) -> None:
    while True:
        for question in await engine.store.list_questions(engine.office_id):
            await asyncio.sleep(0.5)  # an operator takes a moment
            print(f"operator: answers {question.question!r} with option 1")
            with contextlib.suppress(Exception):
                await engine.answer(question.id, option=1)
        await engine.store.wait_for_change(engine.office_id, 1.0)


async def _print_events(engine: Engine, roles: dict[str, str]) -> None:
    with engine.bus.subscribe() as events:
        async for event in events:
            if (line := describe(event, roles)) is not None:
                print(plain(line), flush=True)
