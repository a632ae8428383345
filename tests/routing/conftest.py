"""Fixtures of the routing tests: the dispatcher rig (on tests/conftest.py's `stores`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from semo.engine.events import EventBus
from semo.engine.sessions.manager import SessionManager
from semo.engine.store.models import Office
from tests.store.conftest import Stores
from tests.support.dispatch_rig import Rig, bash_env


@pytest.fixture
async def rig(stores: Stores, tmp_path: Path) -> AsyncIterator[Rig]:
    """The dispatcher rig on a new store with an office "routing"; its dispatchers stopped
    after (the job runner's is `job_rig`, tests/conftest.py)."""
    store = await stores.new()
    office = await store.create_office(Office(name="routing"))
    folder = tmp_path / "work"
    folder.mkdir()
    manager = SessionManager(agent_env=bash_env(), runtime_dir=tmp_path / "run")
    async with manager:
        rig = Rig(stores, store, office, manager, EventBus(), folder)
        try:
            yield rig
        finally:
            for dispatcher in rig.dispatchers:
                await dispatcher.stop(grace=0)
