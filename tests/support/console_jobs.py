"""Driving the console's jobs view in tests: a job in some state, the create form, the palette."""

from __future__ import annotations

import asyncio

from textual.command import CommandPalette
from textual.widgets import Input

from semo.console.app import SemoApp
from semo.console.screens.jobs import CreateJob
from semo.engine.engine import Engine
from semo.engine.store.models import Job
from tests.support.console_app import waiter
from tests.support.waiting import eventually_value

TIMEOUT = 20.0
wait_for = waiter(TIMEOUT)


async def job_in(engine: Engine, status: str) -> Job:
    """The newest job of `engine` in `status`, waited for."""

    async def newest() -> Job | None:
        jobs = [j for j in await engine.list_jobs() if j.status == status]
        return jobs[-1] if jobs else None

    return await eventually_value(newest, f"a job {status}", TIMEOUT)


async def create(app: SemoApp, pilot: object, role: str, task: str) -> None:
    await wait_for(lambda: isinstance(app.screen, CreateJob), "the job form")
    form = app.screen
    form.query_one("#job-role", Input).value = role
    form.query_one("#job-task", Input).value = task
    form.query_one("#job-task", Input).focus()
    await pilot.press("enter")  # type: ignore[attr-defined]


async def run_palette(app: SemoApp, pilot: object, name: str) -> None:
    await pilot.press("ctrl+p")  # type: ignore[attr-defined]
    await wait_for(lambda: isinstance(app.screen, CommandPalette), "the palette")
    await pilot.press(*name)  # type: ignore[attr-defined]
    await asyncio.sleep(0.5)  # the palette's search runs in a worker
    await pilot.press("enter")  # type: ignore[attr-defined]
