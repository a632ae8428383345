"""A Claude Code conversation survives a SIGKILL of its engine (real Claude Code CLI, offline,
scripted Messages API; a real `semo engine` process, then a second engine).

The first engine's BE session gets a prompt with a marker word; the engine is SIGKILLed (its
agent goes with it). The next engine of the office starts BE's conversation again with
`claude --resume` in the same worktree, as the pool's warm BE session (no second BE is started
there), and types a note that it was restarted: the request the scripted API gets for that note
carries the earlier turn (the marker word and the first reply), and the note, which names the
question the first turn asked ([ASK_USER]) and nobody could answer before the engine died. That
question is asked again for the resumed session: its answer is typed into the conversation.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

import pytest

from semo.engine.config import load_config
from semo.engine.engine import Engine
from semo.engine.sessions.agent_session import AgentSession
from tests.support.claude_home import claude_env
from tests.support.claude_resume import (
    ASKED,
    CONFIG,
    FIRST_REPLY,
    MARKER,
    first_engine,
    make_repo,
)
from tests.support.scripted_api import ScriptedMessagesAPI

pytestmark = [pytest.mark.claude, pytest.mark.timeout(300)]


async def test_a_claude_conversation_is_resumed_after_an_engine_sigkill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await asyncio.to_thread(make_repo, tmp_path)
    runtime = Path(tempfile.mkdtemp(prefix="semo-ctl-"))
    replies = [FIRST_REPLY, "Back again.", "Yellow it is."]
    with ScriptedMessagesAPI(replies=replies) as api:
        (tmp_path / "semo.toml").write_text(CONFIG.format(base_url=api.base_url))
        env = {
            **claude_env(tmp_path / "elsewhere", tmp_path / "home", api),
            "XDG_RUNTIME_DIR": str(runtime),
            "XDG_STATE_HOME": str(tmp_path / "state"),
            "LANG": "C.UTF-8",
        }
        await asyncio.to_thread(first_engine, tmp_path, env)

        config = load_config(tmp_path / "semo.toml")
        monkeypatch.setenv("XDG_STATE_HOME", env["XDG_STATE_HOME"])  # where the record is
        monkeypatch.setenv("XDG_RUNTIME_DIR", env["XDG_RUNTIME_DIR"])
        second = Engine(config, control=True, agent_env=env)
        await second.start()
        try:

            def resumed() -> AgentSession | None:
                return next(
                    (s for s in second.sessions() if "--resume" in s.terminal.argv),
                    None,
                )

            async def note_requested() -> bool:
                return any("was restarted" in r.body_text() for r in api.main_requests)

            deadline = asyncio.get_running_loop().time() + 180
            while resumed() is None or not await note_requested():
                assert asyncio.get_running_loop().time() < deadline, "no resumed session"
                await asyncio.sleep(0.2)
            session = resumed()
            assert session is not None and session.cwd is not None
            assert session.cwd.name != "repo"  # the worktree the first engine made for BE
            note = next(r for r in api.main_requests if "was restarted" in r.body_text())
            body = note.body_text()
            assert MARKER in body and FIRST_REPLY.splitlines()[0] in body  # the earlier turn
            # what was waiting for it: the question it asked, cancelled with the dead engine
            assert f'"{ASKED}" got no answer before the restart' in body
            # one BE session: the resumed one is the pool's warm BE session
            assert [s.session_id for s in second.sessions() if not s.ended] == [session.session_id]
            # the question is asked again for it; the answer reaches the conversation
            [question] = await second.pending_questions()
            assert (question.question, question.session_id) == (ASKED, session.session_id)
            await second.answer(question.id, text="yellow")

            def answered() -> bool:
                return any("yellow" in r.last_user_text() for r in api.main_requests)

            while not answered():
                assert asyncio.get_running_loop().time() < deadline, "no answer typed"
                await asyncio.sleep(0.2)
            request = next(r for r in api.main_requests if "yellow" in r.last_user_text())
            assert "Answer to your question" in request.last_user_text()
            assert MARKER in request.body_text()
        finally:
            await second.stop("test over")
            shutil.rmtree(runtime, ignore_errors=True)
