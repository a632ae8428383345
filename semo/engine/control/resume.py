"""Agents' conversations outlive a killed engine (Claude Code's today: its adapter resumes).

How it works: docs/CONSOLE.md, "Resuming Claude Code conversations".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from semo.engine.agents import registry
from semo.engine.control.paths import OfficePaths, private_dir
from semo.engine.control.served import EngineParts
from semo.engine.events import RoutingStep
from semo.engine.fsutil import atomic_write
from semo.engine.protocol.state import AgentState, StateChange
from semo.engine.sessions.pool import warm_place, warm_task_id
from semo.engine.store.base import StoreError
from semo.engine.store.models import JobEntry, new_id, now

if TYPE_CHECKING:
    from semo.engine.sessions.agent_session import AgentSession, SessionEvent
    from semo.engine.store.models import Agent


class ResumingEngine(EngineParts, Protocol):
    """What resuming reads and calls of the engine it runs in (engine.Engine has it)."""

    @property
    def office_id(self) -> str: ...
    def sessions(self) -> list[AgentSession]: ...
    def agent_launch_env(self, agent: Agent) -> dict[str, str]: ...


log = logging.getLogger("semo.resume")

#: seconds a resumed session gets to reach its prompt (without a pool: the pool's ready_timeout)
READY_TIMEOUT = 60.0
#: an entry's conversation id; files of an older semo name it by Claude Code
ID_KEYS = ("conversation_id", "claude_session_id")


#: grants kept per recorded conversation, and the longest tool name among them
MAX_GRANTS = 500
MAX_TOOL = 128


def conversation_of(entry: Mapping[str, Any]) -> object:
    """The (unchecked) conversation id a recorded entry names."""
    return next((entry[key] for key in ID_KEYS if entry.get(key) is not None), None)


def conversations_path(paths: OfficePaths) -> Path:
    return paths.log.with_name(paths.log.name.replace("engine-", "resume-", 1)).with_suffix(".json")


def load(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}


def grants_of(entry: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The "allow for this session" grants of a recorded conversation: (tool, input) pairs;
    anything else in the file is left out."""
    found = entry.get("grants")
    if not isinstance(found, list):
        return []
    pairs = [
        (pair[0], pair[1])
        for pair in found
        if isinstance(pair, list)
        and len(pair) == 2
        and all(isinstance(part, str) for part in pair)
        and 0 < len(pair[0]) <= MAX_TOOL
    ]
    return pairs[:MAX_GRANTS]


def save(path: Path, entries: dict[str, dict[str, Any]]) -> None:
    private_dir(path.parent)
    atomic_write(path, json.dumps(entries, indent=1), mode=0o600)


class ConversationKeeper:
    """Keeps the file current from the engine's session events."""

    def __init__(self, engine: ResumingEngine, path: Path) -> None:
        self.engine = engine
        self.path = path
        self.entries = load(path)
        #: session id -> its grants ("allow for this session"), as the approvals told them
        self.grants: dict[str, list[tuple[str, str]]] = {}

    def granted(self, session_id: str, grants: list[tuple[str, str]]) -> None:
        """The grants of a live session changed (`Approvals.on_grant`): recorded with it."""
        self.grants[session_id] = grants[:MAX_GRANTS]
        entry = self.entries.get(session_id)
        if entry is not None:
            entry["grants"] = [list(pair) for pair in self.grants[session_id]]
            self._save()

    def start(self) -> None:
        if getattr(self.engine, "conversations", self) is not self:
            return  # the engine keeps its own (it made it while it started)
        assert self.engine.manager is not None
        self.engine.manager.add_listener(self._on_event)

    def _on_event(self, session: AgentSession, event: SessionEvent) -> None:
        sid = session.session_id
        if isinstance(event, StateChange) and event.state == AgentState.TERMINATED:
            self.grants.pop(sid, None)
            if self.entries.pop(sid, None) is not None:
                self._save()
            return
        conversation = session.conversation_id
        if conversation is None or session.ended:
            return
        known = self.entries.get(sid)
        if known is not None and conversation_of(known) == conversation:
            return
        self.entries[sid] = {
            "conversation_id": conversation,
            "profile": session.profile.name,
            "role": session.role,
            "agent_id": session.agent_id,
            "folder": str(session.cwd) if session.cwd else None,
            "engine_id": self.engine.engine_id,
            "grants": [list(pair) for pair in self.grants.get(sid, [])],
        }
        self._save()

    def _save(self) -> None:
        try:
            save(self.path, self.entries)
        except OSError as error:
            log.warning("cannot record agent conversations in %s: %s", self.path, error)


@dataclass
class Resumed:
    """A conversation started again: the dead engine's session it continues, and questions
    asked again for it."""

    old_id: str
    session: AgentSession
    asked_again: list[str]
    #: what the operator allowed "for this session" in the old one (kept by the new one)
    grants: list[tuple[str, str]] = field(default_factory=list)

    def note(self) -> str:
        if not self.asked_again:
            return ""
        asked = "; ".join(f'"{q[:200]}"' for q in self.asked_again[-3:])
        return (
            f"Your question(s) {asked} got no answer before the restart; they are asked again, "
            "and the answer will be typed here."
        )


async def resume_conversations(
    engine: ResumingEngine, keeper: ConversationKeeper, jobs: Mapping[str, str] | None = None
) -> list[Resumed]:
    """Start the conversations a killed engine left again, each with its CLI's resume, and wait
    until each is ready or has failed (concurrently). `jobs`: old session id -> the job it
    ran (a failed resume is written on its timeline)."""
    if getattr(engine, "conversations", keeper) is not keeper:
        return []  # the engine resumed its conversations itself while it started
    manager = engine.manager
    if manager is None:
        return []
    live = {s.session_id for s in engine.sessions()}
    left = {sid: e for sid, e in keeper.entries.items() if sid not in live}
    for old_id in left:
        keeper.entries.pop(old_id, None)
    keeper._save()
    tried = await asyncio.gather(
        *(
            _resume_one(engine, old_id, entry, (jobs or {}).get(old_id))
            for old_id, entry in left.items()
        )
    )
    return [r for r in tried if r is not None]


async def _resume_one(
    engine: ResumingEngine, old_id: str, entry: dict[str, Any], job_id: str | None
) -> Resumed | None:
    manager = engine.manager
    assert manager is not None
    agent = engine.agents.get(str(entry.get("role")))
    folder = Path(str(entry.get("folder") or ""))
    conversation = conversation_of(entry)
    if agent is None or agent.id != entry.get("agent_id"):
        log.info("not resuming session %s: its agent is no longer configured", old_id)
        return None
    try:  # the CLI that recorded it (an older semo's entries name none: Claude Code's)
        adapter = registry.adapter(str(entry.get("profile") or registry.UNNAMED_RECORDS))
    except ValueError as error:
        log.warning("not resuming session %s: %s", old_id, error)
        return None
    if not adapter.valid_conversation_id(conversation):
        log.warning(
            "not resuming session %s: %r is not a %s conversation id",
            old_id,
            conversation,
            adapter.name,
        )
        return None
    if not entry.get("folder") or not await asyncio.to_thread(folder.is_dir):
        log.info("not resuming session %s: its folder %s is gone", old_id, folder)
        return None
    env = engine.agent_launch_env(agent)
    conversation = str(conversation)
    why = await asyncio.to_thread(adapter.missing_conversation, folder, env, conversation)
    if why is not None:
        await _failed(engine, old_id, agent, job_id, why)
        return None
    argv = adapter.resume_command(agent.command, conversation)
    session: AgentSession | None = None
    timeout = engine.pool.ready_timeout if engine.pool is not None else READY_TIMEOUT
    try:
        session = await manager.create(
            agent.model_copy(update={"command": argv}), working_dir=folder
        )
        await session.wait_ready(timeout)
    except Exception as error:
        status = session.exit_status if session is not None else None
        why = status.describe() if status is not None else (str(error) or type(error).__name__)
        if session is not None:
            with contextlib.suppress(Exception):
                await manager.terminate(session.session_id, reason=f"resume failed: {why}")
        await _failed(engine, old_id, agent, job_id, f"the resumed CLI did not get ready: {why}")
        return None
    log.info(
        "resumed %s's %s conversation %s as session %s (was %s)",
        agent.role,
        adapter.name,
        conversation,
        session.session_id,
        old_id,
    )
    await _adopt(engine, session, agent, folder)
    asked = await _ask_again(engine, old_id, session)
    return Resumed(old_id, session, asked, grants_of(entry))


async def _failed(
    engine: ResumingEngine, old_id: str, agent: Agent, job_id: str | None, why: str
) -> None:
    """A conversation that is not resumed: logged, a `resume_failed` step on the bus (the
    console) and on its job's timeline (written here: the job runner does not run yet)."""
    detail = (
        f"{agent.role}'s Claude Code conversation of session {old_id} not resumed: {why}; "
        "a new session takes over"
    )
    log.warning("%s", detail)
    if engine.office is None:
        return
    if job_id is not None:
        entry = JobEntry(
            job_id=job_id,
            office_id=engine.office.id,
            step="resume_failed",
            session_id=old_id,
            agent_id=agent.id,
            detail=detail,
        )
        try:
            await engine.store.add_job_entry(entry)
        except StoreError as error:
            log.warning("job %s: resume_failed not on its timeline: %s", job_id, error)
    engine.bus.publish(
        RoutingStep(
            office_id=engine.office.id,
            step="resume_failed",
            session_id=old_id,
            agent_id=agent.id,
            job_id=job_id,
            detail=detail,
        )
    )


async def _ask_again(engine: ResumingEngine, old_id: str, session: AgentSession) -> list[str]:
    """The questions of `old_id` cancelled because its session ended (with its engine), asked
    again for `session`: the operator can still answer them, and the answer reaches it."""
    ended = f"session {old_id} has ended"
    asked: list[str] = []
    try:
        cancelled = await engine.store.list_questions(
            engine.office_id, status="cancelled", session_ids=[old_id]
        )
        for question in cancelled:
            if not (question.cancel_reason or "").startswith(ended):
                continue  # cancelled by someone, not by the engine's death
            if question.question_type == "permission":
                continue  # its hook died with the CLI: the resumed one asks again if it must
            again = await engine.store.create_question(
                question.model_copy(
                    update={
                        "id": new_id(),
                        "session_id": session.session_id,
                        "status": "pending",
                        "answer": None,
                        "answered_at": None,
                        "cancel_reason": None,
                        "cancelled_at": None,
                        "answer_delivered_at": None,
                        "created_at": now(),
                    }
                )
            )
            asked.append(again.question)
            engine.bus.publish(
                RoutingStep(
                    office_id=engine.office_id,
                    step="question_asked",
                    ref_id=again.id,
                    session_id=session.session_id,
                    agent_id=session.agent_id,
                    detail=f"{again.question} (asked again after the restart)",
                )
            )
    except StoreError as error:
        log.warning("questions of session %s not asked again: %s", old_id, error)
    return asked


async def _adopt(engine: ResumingEngine, session: AgentSession, agent: Agent, folder: Path) -> None:
    """The resumed session joins the pool: the role's warm session when it runs in the role's
    warm worktree (the pool then starts no other one there), else a cold session (reaped when
    idle, its worktree removed then)."""
    pool, worktrees = engine.pool, engine.manager.worktrees if engine.manager else None
    if pool is None:
        return
    worktree = None
    if worktrees is not None:
        with contextlib.suppress(Exception):
            resolved = await asyncio.to_thread(folder.resolve)
            worktree = next((w for w in await worktrees.list() if w.path == resolved), None)
    warm = False
    if worktree is not None and worktrees is not None:
        place = warm_place(agent.office_id, worktrees.workspace_root)
        # the name of this semo, or of an older one (`warm-<role>`)
        warm = worktree.task_id in (warm_task_id(agent.role, place), warm_task_id(agent.role))
    try:
        pool.adopt(session, agent, None if warm else worktree, warm=warm)
    except Exception as error:  # a pool that is closing: the session stays beside it
        log.warning("resumed session %s not added to the pool: %s", session.session_id, error)


def tell_restarted(resumed: Resumed) -> None:
    """A resumed conversation that runs no job: that it was restarted (typed before anything
    that waited for it)."""
    note = (
        "[semo] semo was restarted (its engine stopped) and this conversation was resumed; what "
        "you were doing when it stopped was interrupted. Anything that was waiting for you (a "
        "result, an answer, an invocation) is typed here next; otherwise wait for new "
        "instructions before you continue."
    )
    if extra := resumed.note():
        note += " " + extra
    with contextlib.suppress(Exception):
        resumed.session.post(note)
