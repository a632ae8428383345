"""Operations built on the Store that the CLI, the console and the REST API share."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable

from semo.engine.approval_policy import PERMISSION_OPTIONS, canonical_answer
from semo.engine.runtime import descends_from
from semo.engine.store._shared import question_not_pending
from semo.engine.store.base import NotFound, Store, StoreConflict, StoreError
from semo.engine.store.models import (
    AgentCommandResult,
    AgentSession,
    EngineHeartbeat,
    Office,
    UserQuestion,
)

YES = {"y", "yes", "true", "1"}
NO = {"n", "no", "false", "0"}


async def resolve_office(store: Store, office: str | None) -> Office:
    """The office named or id'd by `office`, `$SEMO_OFFICE`, or the store's only office."""
    wanted = office or os.environ.get("SEMO_OFFICE")
    offices = await store.list_offices()
    if wanted:
        for candidate in offices:
            if wanted in (candidate.id, candidate.name):
                return candidate
        raise NotFound(f"no office {wanted!r} (known: {_names(offices)})")
    if len(offices) == 1:
        return offices[0]
    if not offices:
        raise NotFound("the store has no office yet: start one with `semo demo` or `semo engine`")
    raise StoreError(f"several offices ({_names(offices)}): pass --office or set SEMO_OFFICE")


def _names(offices: list[Office]) -> str:
    return ", ".join(o.name for o in offices) or "none"


def answer_text(question: UserQuestion, text: str | None, option: int | None) -> str:
    """The answer to store, checked against the question's type; ValueError says why not."""
    if (text is None) == (option is None):
        raise ValueError("give the answer text or an option number, not both")
    if question.question_type == "permission":
        return _permission_answer(question, text, option)
    if option is not None:
        if question.question_type != "choice" and question.question_type != "confirm":
            raise ValueError(f"question {question.id} is a text question: give the answer text")
        options = question.options or ["yes", "no"]
        if not 1 <= option <= len(options):
            raise ValueError(f"the option must be 1..{len(options)} (options: {options})")
        return options[option - 1]
    assert text is not None
    text = text.strip()
    if not text:
        raise ValueError("the answer is empty")
    if question.question_type == "confirm":
        if text.lower() in YES:
            return "yes"
        if text.lower() in NO:
            return "no"
        raise ValueError("a confirm question takes yes or no")
    if question.question_type == "choice" and text not in question.options:
        raise ValueError(f"not one of the options {question.options}; or give the option number")
    return text


def _permission_answer(question: UserQuestion, text: str | None, option: int | None) -> str:
    """A permission's answer: option 1 allow, 2 allow for this session, 3 deny; or the text
    (``deny: <reason>`` sends the reason to the agent)."""
    if option is not None:
        if not 1 <= option <= len(PERMISSION_OPTIONS):
            raise ValueError(f"the option must be 1..3 (options: {list(PERMISSION_OPTIONS)})")
        return PERMISSION_OPTIONS[option - 1]
    assert text is not None
    return canonical_answer(text)


#: set by the engine in every agent's environment (semo.engine.protocol.hooks.ENV_TOKEN)
_AGENT_MARK = "SEMO_HOOK_TOKEN"


def _refuse_an_agent(question: UserQuestion, session: AgentSession) -> None:
    """StoreConflict when this process runs inside an agent (its environment carries a hook
    token, or the asking agent is among its parents): an agent never approves its own tool
    use (docs/SECURITY.md)."""
    inside = bool(os.environ.get(_AGENT_MARK)) or (
        session.pid is not None and descends_from(os.getpid(), session.pid) is not False
    )
    if inside:
        raise StoreConflict(
            f"permission {question.id} cannot be answered from inside an agent's session: "
            "the operator answers it"
        )


async def answer_question(
    store: Store, question_id: str, *, text: str | None = None, option: int | None = None
) -> UserQuestion:
    """Answer a pending question whose session is still alive (StoreConflict otherwise)."""
    question = await store.get_question(question_id)
    if question.status != "pending":
        raise StoreConflict(
            question_not_pending(
                question_id, question.status, question.cancel_reason, answering=True
            )
        )
    if question.session_id:
        try:
            session = await store.get_session(question.session_id)
        except NotFound:
            session = None
        if session is None or session.status == "terminated":
            raise StoreConflict(
                f"question {question_id} belongs to session {question.session_id}, which has ended"
            )
        if question.question_type == "permission":
            _refuse_an_agent(question, session)
        gone = await _engine_gone(store, question.office_id, session.engine_id)
        if gone is not None:
            raise StoreConflict(
                f"question {question_id} belongs to session {question.session_id}, whose engine "
                f"{session.engine_id} is not running ({gone}): the answer could not reach the "
                "agent and was not recorded"
            )
    return await store.answer_question(question_id, answer_text(question, text, option))


#: commands that type into a session (cancel types its profile's interrupt keys): refused for
#: a session whose engine is gone
INPUT_COMMANDS = frozenset({"send_prompt", "send_text", "send_keys", "cancel"})


async def check_input_reaches(store: Store, command_type: str, session_id: str | None) -> None:
    """StoreConflict when `command_type` would type into a session whose engine is gone (it
    would sit in the queue until the engine is taken for dead, then fail)."""
    if command_type not in INPUT_COMMANDS or not session_id:
        return
    try:
        session = await store.get_session(session_id)
    except NotFound:
        return  # the claim reports an unknown session
    gone = await _engine_gone(store, session.office_id, session.engine_id)
    if gone is not None:
        raise StoreConflict(
            f"session {session_id}'s engine {session.engine_id} is not running ({gone}): "
            f"the {command_type} command was not queued"
        )


async def _engine_gone(store: Store, office_id: str, engine_id: str | None) -> str | None:
    """Why the engine running a session is gone (`engine_gone`), or None."""
    if not engine_id:
        return None
    rows = await store.list_engines(office_id)
    return engine_gone(engine_id, next((r for r in rows if r.engine_id == engine_id), None))


def engine_gone(engine_id: str, row: EngineHeartbeat | None) -> str | None:
    """Why engine `engine_id` (heartbeat row `row`, None when it has none) is not running, or
    None: a process of this machine that has exited, or whose pid is another process now, is
    known at once (semo/engine/liveness.py); otherwise its heartbeat decides (stopped, or
    it ran out). The one judgement of `semo answer`, prompts, and the listings."""
    from semo.engine.liveness import local_engine_gone

    local = local_engine_gone(engine_id, row)
    if local is not None:
        return local
    if row is not None and not row.alive:
        return "stopped" if row.status == "stopped" else "its heartbeat ran out"
    return None


#: the state a listing shows for a live session whose engine is not running
LOST = "lost"


async def lost_sessions(
    store: Store, office_id: str, sessions: Iterable[AgentSession]
) -> dict[str, str]:
    """Why each of `sessions` that has not ended is lost, by session id: why its engine is not
    running (`engine_gone`); the others are left out. The store still says what the session
    last was; nothing is written."""
    live = [s for s in sessions if s.status != "terminated" and s.engine_id]
    if not live:
        return {}
    rows = {row.engine_id: row for row in await store.list_engines(office_id)}
    gone: dict[str, str | None] = {}
    lost: dict[str, str] = {}
    for session in live:
        engine_id = session.engine_id or ""
        if engine_id not in gone:
            gone[engine_id] = engine_gone(engine_id, rows.get(engine_id))
        why = gone[engine_id]
        if why is not None:
            lost[session.session_id] = why
    return lost


async def end_session(store: Store, session_id: str, reason: str) -> AgentSession:
    """Record a session as terminated with `reason`, for one whose engine is gone for good (a
    live engine's sessions are ended with a `terminate` command): its pending questions are
    cancelled, and commands still queued for it fail at their claim. StoreConflict when it has
    ended already (the store keeps its first end reason), NotFound when there is no such
    session."""
    return await store.set_session_status(session_id, "terminated", reason=reason)


async def wait_for_result(
    store: Store, office_id: str, command_id: str, timeout: float
) -> AgentCommandResult | None:
    """The command's result row, waiting up to `timeout` seconds (None when it did not come)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = await store.get_result(command_id)
        if result is not None:
            return result
        left = deadline - loop.time()
        if left <= 0:
            return None
        await store.wait_for_change(office_id, min(left, 1.0))
