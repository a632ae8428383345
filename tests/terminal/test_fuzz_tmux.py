"""Random streams of the sequences TUIs send (cursor addressing, erases, SGR, margins, wide text)
rendered by tmux 3.3a and by semo's screen, compared row by row with their colours and the
cursor. semo reads each stream in reads cut at random places (the fast path's parts, its table
of calls and its kept-back draws all meet read boundaries); tmux gets it from `cat` in a pane
whose tty does no output processing (`stty -opost`), so both see the same bytes."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from semo.engine.terminal.stream import make_screen_and_stream
from tests.support.tmux_fuzz import (
    COLUMNS,
    ROWS,
    fuzz_stream,
    screen_cells,
    tmux_cells,
    tmux_screen,
)

pytestmark = pytest.mark.tmux


@pytest.mark.parametrize("seed", range(16))
def test_random_tui_streams_render_as_in_tmux(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    text = fuzz_stream(rng, 3000)
    path = tmp_path / "stream"
    path.write_bytes(text.encode())
    screen, stream = make_screen_and_stream(COLUMNS, ROWS)
    cuts = sorted(rng.randrange(len(text)) for _ in range(12))
    for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True):
        stream.feed(text[a:b])
    tmux_rows, tmux_cursor = tmux_screen(path, escapes=False)
    ours = screen.text_rows()
    assert ours == [row.rstrip(" ") for row in tmux_rows], f"seed {seed}: {text!r}"
    assert (min(screen.cursor.x, COLUMNS - 1), screen.cursor.y) == tmux_cursor
    escaped, _ = tmux_screen(path, escapes=True)
    assert screen_cells(screen) == tmux_cells(escaped)
