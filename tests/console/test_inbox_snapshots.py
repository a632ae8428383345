"""A snapshot of the console at 80x24 with 6 sessions and a long question pending (341
characters, 4 options, audit15 #2): the inbox shows every option and the start of the text,
which scrolls (its border says "PgDn: more"); the commands panel keeps its border below it.
Regenerate with `--snapshot-update` after a deliberate change, and look at the SVG."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.app import SemoApp
from console.widgets.commands_panel import CommandsPanel
from tests.console.console_snapshot_app import console_engine
from tests.console.test_inbox_layout import asked, inbox_scripts


@pytest.fixture(autouse=True)
def fixed_times(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CommandsPanel, "TIME_FORMAT", "hh:mm:ss")  # the same picture every run


@pytest.fixture
def runtime_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="semo-inbox-snap-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_long_question_at_80x24(snap_compare, tmp_path: Path, runtime_dir: Path) -> None:
    engine = console_engine(tmp_path, runtime_dir, scripts=inbox_scripts(6, 1), max_sessions=6)
    app = SemoApp(engine)

    async def settle(_pilot: object) -> None:
        await asked(app, 1)
        app.screen.query_one("#question-list").focus()
        await asyncio.sleep(1.2)  # one more panel refresh, then a quiet screen
        app.clear_notifications()

    assert snap_compare(app, terminal_size=(80, 24), run_before=settle)
