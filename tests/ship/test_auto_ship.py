"""`[ship] on_done`: an engine's AutoShip, listening on a real EventBus, ships a job when its
`done` step is published (push then merge here), and leaves other steps and other settings
alone; a step that fails is on the timeline, and the engine goes on."""

from __future__ import annotations

from semo.engine.events import EventBus, JobEvent
from semo.engine.office.job_ops import job_timeline
from semo.engine.ship.auto import AutoShip
from semo.engine.ship.settings import ShipSection
from tests.ship.conftest import World
from tests.support.git_repo import git


def step(world: World, name: str) -> JobEvent:
    return JobEvent(
        office_id=world.job.office_id,
        job_id=world.job.id,
        agent_id=world.job.agent_id,
        step=name,  # type: ignore[arg-type]
        status="done",
    )


async def test_a_done_job_is_pushed_and_merged_by_itself(world: World) -> None:
    bus = EventBus()
    auto = AutoShip(world.store, ShipSection(on_done=["push", "merge"]))
    remove = bus.add_listener(auto.on_event)
    try:
        bus.publish(step(world, "turn"))
        await auto.idle()
        assert (
            git(world.origin, "branch", "--list", world.target.branch) == ""
        )  # nothing before `done`
        bus.publish(step(world, "done"))
        await auto.idle()
    finally:
        remove()
        await auto.stop()
    branch = world.target.branch
    assert git(world.origin, "rev-parse", branch) == git(world.repo, "rev-parse", branch)
    assert git(world.repo, "rev-parse", "main") == git(world.repo, "rev-parse", branch)
    steps = [e.step for e in (await job_timeline(world.store, world.job.id)).entries]
    assert steps[-2:] == ["pushed", "merged"]


async def test_without_on_done_nothing_ships_and_a_failure_is_recorded(world: World) -> None:
    idle = AutoShip(world.store, ShipSection())
    idle.on_event(step(world, "done"))
    await idle.idle()
    assert git(world.origin, "branch", "--list", world.target.branch) == ""
    broken = AutoShip(world.store, ShipSection(remote="nowhere", on_done=["push"]))
    broken.on_event(step(world, "done"))
    await broken.idle()
    entries = (await job_timeline(world.store, world.job.id)).entries
    assert entries[-1].step == "ship_failed" and "pushing" in entries[-1].detail
