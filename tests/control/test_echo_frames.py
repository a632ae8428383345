"""Frames of the session a console types into: its echo goes out at once, not after the frame
interval (FRAME_SECONDS), while output nobody typed for keeps waiting for its interval.
`screen_frames` is called with an explicit time, so nothing here depends on the clock."""

from __future__ import annotations

import pytest

from semo.engine.control.server import FRAME_SECONDS
from semo.engine.engine import Engine
from tests.support.control_engine import attached, client_of

pytestmark = pytest.mark.timeout(120)


async def test_typed_output_is_framed_at_once_other_output_waits(engine: Engine) -> None:
    server = engine.control
    assert server is not None
    client = client_of(engine)
    try:
        await attached(client, "A")
        session_id = next(s.session_id for s in engine.sessions() if s.role == "A")
        connection = next(c for c in server._connections if session_id in c.attached)
        state = connection.attached[session_id]
        now = state.flushed_at + FRAME_SECONDS / 2  # a frame went out half an interval ago

        state.pending, state.typed_at = True, state.flushed_at - 1  # typed before that frame
        frames, due = server.screen_frames(connection, now)
        assert frames == [] and due is not None and due > now  # waits for its interval

        state.typed_at = state.flushed_at + FRAME_SECONDS / 4  # a key since the last frame
        frames, due = server.screen_frames(connection, now)
        assert len(frames) == 1 and not state.pending  # the echo's frame, now
    finally:
        await client.close()
