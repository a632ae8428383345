"""Fixtures shared by test folders: the engine's stores, the job runner rig, a runtime folder.

A folder's own conftest.py (tests/store: all three backends) or a test module may override
them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from semo.engine.events import BaseEvent, EventBus
from semo.engine.routing.jobs import JobEvent
from semo.engine.sessions.manager import SessionManager
from semo.engine.store.models import Office
from tests.store.conftest import Stores, open_stores
from tests.support.job_rig import JobRig, agent_env, launch_options
from tests.support.temp_dirs import short_temp_dir


@pytest.fixture
def runtime_dir() -> Iterator[Path]:
    """A short temporary folder (a Unix socket path must stay short), removed after."""
    with short_temp_dir("semo-rt-") as path:
        yield path


@pytest.fixture(params=["sqlite", "postgres"])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    """New stores of one backend per test: sqlite, then postgres (a fresh database)."""
    async with open_stores(request.param, tmp_path) as factory:
        yield factory


@pytest.fixture
async def job_rig(stores: Stores) -> AsyncIterator[JobRig]:
    """The JobRunner rig (tests/support/job_rig.py) on a new store with an office "jobs"; its
    pools closed after. Every JobEvent on its bus is in `job_rig.events`."""
    store = await stores.new()
    office = await store.create_office(Office(name="jobs"))
    bus = EventBus()
    with short_temp_dir("semo-jobs-") as tmp:  # short: the hook socket lives there
        async with SessionManager(
            agent_env=agent_env(), runtime_dir=tmp / "run", launch_options=launch_options
        ) as manager:
            rig = JobRig(store, office, manager, bus, tmp)

            def collect(event: BaseEvent) -> None:
                if isinstance(event, JobEvent):
                    rig.events.append(event)

            bus.add_listener(collect)
            try:
                yield rig
            finally:
                for pool in rig.pools:
                    await pool.close()
