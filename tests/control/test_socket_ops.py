"""The console operations of the control socket on a real engine (bash agents in PTYs), through
a real `EngineClient`: a new session from the pool, a recording started and stopped, a turn
cancelled, a question answered, a session terminated, and the session events that follow.

- `new_session` gives a session of the role from the pool; the client can type into it.
- `record_start` / `record_stop`: the asciicast file holds what the session printed meanwhile.
- `cancel` interrupts what runs (a `sleep 30`): the next command line runs at once after it.
- `answer` answers a pending question of the session: the answer is recorded and typed.
- `terminate` ends the session: the engine no longer runs it and the client got the
  terminated event on its bus.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from semo.engine.engine import Engine
from semo.engine.events import BaseEvent, SessionStatusChanged
from semo.engine.store.models import UserQuestion
from tests.support.control_engine import client_of
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(120)


async def test_console_operations_reach_the_engine(engine: Engine) -> None:
    client = client_of(engine)
    seen: list[BaseEvent] = []
    client.bus.add_listener(seen.append)
    await client.start()
    try:
        session = await client.new_session("A")  # the pool's idle A session, or a new one
        assert session.role == "A"
        await eventually(
            lambda: any(
                s.session_id == session.session_id and s.state.value == "ready"
                for s in engine.sessions()
            ),
            30,
        )
        terminal = session.terminal
        terminal.add_listener(lambda _chunk: None)
        mine = next(s for s in engine.sessions() if s.session_id == session.session_id)

        def shown(text: str) -> bool:
            return any(text in row for row in mine.terminal.screen.display)

        cast = await client.start_recording(session.session_id)
        terminal.write("echo rec-$((6*7))\r")
        await eventually(lambda: shown("rec-42"), 20)
        await client.stop_recording(session.session_id)
        recorded = await asyncio.to_thread(Path(cast).read_text)
        assert "rec-42" in recorded
        with pytest.raises(RuntimeError, match="is not being recorded"):
            await client.stop_recording(session.session_id)  # said, never "stopped"

        terminal.write("sleep 30; echo slept\r")
        await eventually(lambda: shown("sleep 30; echo slept"), 20)
        await client.cancel(session.session_id)
        terminal.write("echo after-$((1+1))\r")
        await eventually(lambda: shown("after-2"), 20)  # sleep was interrupted
        assert all(row.strip() != "slept" for row in mine.terminal.screen.display)

        question = await engine.store.create_question(
            UserQuestion(
                office_id=engine.office_id,
                agent_id=mine.agent_id,
                session_id=session.session_id,
                question_type="text",
                question="Name?",
            )
        )
        answered = await client.answer(question.id, text="answer-from-console")
        assert answered == "answer-from-console"
        stored = await engine.store.get_question(question.id)
        assert stored.status == "answered"
        await eventually(lambda: shown("answer-from-console"), 20)

        await client.terminate(session.session_id)
        await eventually(
            lambda: all(s.session_id != session.session_id for s in engine.sessions()), 20
        )
        await eventually(
            lambda: any(
                isinstance(e, SessionStatusChanged)
                and e.session_id == session.session_id
                and e.status == "terminated"
                for e in seen
            ),
            10,
        )
    finally:
        await client.close()
