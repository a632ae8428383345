"""Snapshots of the console at 80x24, 120x40 and 200x60, each with 3, 6 and 20 sessions (scripted
agents in real PTYs), FE's 4-option question pending and a notification shown. Regenerate
with `scripts/test tests/console --snapshot-update` after a deliberate change, and look at the
SVGs (rsvg-convert -w 1400 X.svg -o X.png)."""

from __future__ import annotations

from pathlib import Path

import pytest

from semo.console.app import SemoApp
from semo.engine.in_process import InProcessEngine
from tests.console.console_snapshot_app import console_engine, office_scripts, settle_office
from tests.support.console_app import (
    fixed_times,  # noqa: F401 (autouse: the same picture every run)
    runtime_dir_fixture,
)

runtime_dir = runtime_dir_fixture("semo-snap-")


SIZES = [(80, 24), (120, 40), (200, 60)]
SESSIONS = [3, 6, 20]


@pytest.mark.parametrize(
    ("size", "sessions"),
    [(size, count) for size in SIZES for count in SESSIONS],
    ids=[f"{w}x{h}-{count}" for w, h in SIZES for count in SESSIONS],
)
def test_main_layout(
    snap_compare, tmp_path: Path, runtime_dir: Path, size: tuple[int, int], sessions: int
) -> None:
    engine = console_engine(
        Path(tmp_path), runtime_dir, scripts=office_scripts(sessions), max_sessions=sessions
    )
    app = SemoApp(InProcessEngine(engine))

    async def settle(_pilot: object) -> None:
        await settle_office(app, sessions)

    assert snap_compare(app, terminal_size=size, run_before=settle)
