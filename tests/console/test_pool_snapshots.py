"""Snapshots of the pool view (F9) at 80x24, 120x40 and 200x60: FE and BE warm and idle, QA
configured without a session. Regenerate with `scripts/test tests/console --snapshot-update`
after a deliberate change, and look at the SVGs (rsvg-convert -w 1400 X.svg -o X.png)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import DataTable

from semo.console.app import SemoApp
from semo.console.screens.pool import PoolScreen
from semo.engine.in_process import InProcessEngine
from tests.console.console_snapshot_app import console_engine
from tests.support.waiting import eventually

SCRIPTS: dict[str, list[object]] = {"FE": [], "BE": [], "QA": []}


@pytest.fixture
def runtime_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="semo-psnap-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize(
    "size", [(80, 24), (120, 40), (200, 60)], ids=["80x24", "120x40", "200x60"]
)
def test_pool_view(snap_compare, tmp_path: Path, runtime_dir: Path, size: tuple[int, int]) -> None:
    engine = console_engine(tmp_path, runtime_dir, scripts=SCRIPTS, warm_roles=["FE", "BE"])
    app = SemoApp(InProcessEngine(engine))

    async def settle(pilot: object) -> None:
        await eventually(lambda: len(getattr(app.screen, "order", ())) == 2, 20)
        await pilot.press("f9")  # type: ignore[attr-defined]
        await eventually(lambda: isinstance(app.screen, PoolScreen), 20)
        pool = app.screen
        assert isinstance(pool, PoolScreen)
        await eventually(
            lambda: [r.cells[3] for r in pool.rows] == ["idle"] * 2 + ["no session"], 20
        )
        table = pool.query_one("#pool-list", DataTable)
        await eventually(lambda: not table._require_update_dimensions, 20)
        app.clear_notifications()
        await pilot.pause()  # type: ignore[attr-defined]

    assert snap_compare(app, terminal_size=size, run_before=settle)
