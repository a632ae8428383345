"""Snapshots of the console's main layout at 80x24 and 160x48 (scripted agents, questions
pending). Regenerate with `scripts/test tests/console --snapshot-update` after a deliberate
change, and look at the SVGs."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.app import SemoApp
from tests.console.console_snapshot_app import console_engine, settle_with_questions


@pytest.fixture
def runtime_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="semo-snap-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
def test_main_layout(
    snap_compare, tmp_path: Path, runtime_dir: Path, size: tuple[int, int]
) -> None:
    app = SemoApp(console_engine(Path(tmp_path), runtime_dir))

    async def settle(_pilot: object) -> None:
        await settle_with_questions(app)

    assert snap_compare(app, terminal_size=size, run_before=settle)
