"""A snapshot of the console at 80x24 with 6 sessions and a long question pending (341
characters, 4 options, audit15 #2): the inbox shows every option and the start of the text,
which scrolls (its border says "PgDn: more"); the commands panel keeps its border below it.
Regenerate with `--snapshot-update` after a deliberate change, and look at the SVG."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.support.console_app import (
    fixed_times,  # noqa: F401 (autouse: the same picture every run)
    runtime_dir_fixture,
)
from tests.support.console_inbox import asked, inbox_app

runtime_dir = runtime_dir_fixture("semo-inbox-snap-")


def test_a_long_question_at_80x24(snap_compare, tmp_path: Path, runtime_dir: Path) -> None:
    app = inbox_app(tmp_path, runtime_dir, 1)

    async def settle(_pilot: object) -> None:
        await asked(app, 1)
        app.screen.query_one("#question-list").focus()
        await asyncio.sleep(1.2)  # one more panel refresh, then a quiet screen
        app.clear_notifications()

    assert snap_compare(app, terminal_size=(80, 24), run_before=settle)
