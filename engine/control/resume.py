"""Claude Code conversations outlive a killed engine.

While an engine that serves consoles runs, `ConversationKeeper` records each live Claude Code
session's own session id (from its hooks), folder, role and agent in
`$XDG_STATE_HOME/semo/resume-<office>-<hash>.json` (0600). A session that ends while the engine
runs (terminated, crashed, the engine stopped cleanly) is removed from the file: only a session
lost with its engine (SIGKILL, a crash, a power cut) is left in it.

The next engine of the office (`resume_conversations`, once it runs) starts each one again with
the CLI's own resume (`claude ... --resume <id>`) in the same folder (its worktree is still
there: the pool that made it never reaped it), and once it is ready types a note that it was
restarted, with the questions it had asked that nobody could answer before the restart.
Generic agents are not recorded: they are restarted fresh by the pool, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from engine.control.paths import OfficePaths, private_dir
from engine.fsutil import atomic_write
from engine.protocol.state import AgentState, StateChange
from engine.sessions.pool import warm_task_id

if TYPE_CHECKING:
    from engine.engine import Engine
    from engine.sessions.agent_session import AgentSession, SessionEvent
    from engine.store.models import Agent

log = logging.getLogger("semo.resume")

#: seconds a resumed session gets to reach its prompt before the note is typed
READY_TIMEOUT = 180.0
#: what Claude Code's session ids look like (a UUID). The id comes from the agent's own hook
#: reports, so it is checked before it goes on a command line: "--dangerously-..." must never
#: become a flag of the resumed CLI.
CLAUDE_SESSION_ID = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")


def valid_claude_id(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and CLAUDE_SESSION_ID.fullmatch(value) is not None


def conversations_path(paths: OfficePaths) -> Path:
    return paths.log.with_name(paths.log.name.replace("engine-", "resume-", 1)).with_suffix(".json")


def load(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}


def save(path: Path, entries: dict[str, dict[str, Any]]) -> None:
    private_dir(path.parent)
    atomic_write(path, json.dumps(entries, indent=1), mode=0o600)


class ConversationKeeper:
    """Keeps the file current from the engine's session events."""

    def __init__(self, engine: Engine, path: Path) -> None:
        self.engine = engine
        self.path = path
        self.entries = load(path)

    def start(self) -> None:
        assert self.engine.manager is not None
        self.engine.manager.add_listener(self._on_event)

    def _on_event(self, session: AgentSession, event: SessionEvent) -> None:
        sid = session.session_id
        if isinstance(event, StateChange) and event.state == AgentState.TERMINATED:
            if self.entries.pop(sid, None) is not None:
                self._save()
            return
        claude_id = session.claude_session_id
        if not valid_claude_id(claude_id) or session.ended:
            return
        known = self.entries.get(sid)
        if known is not None and known.get("claude_session_id") == claude_id:
            return
        self.entries[sid] = {
            "claude_session_id": claude_id,
            "role": session.role,
            "agent_id": session.agent_id,
            "folder": str(session.cwd) if session.cwd else None,
            "engine_id": self.engine.engine_id,
        }
        self._save()

    def _save(self) -> None:
        try:
            save(self.path, self.entries)
        except OSError as error:
            log.warning("cannot record Claude Code sessions in %s: %s", self.path, error)


async def resume_conversations(engine: Engine, keeper: ConversationKeeper) -> list[AgentSession]:
    """Start the Claude Code sessions a killed engine left again, with `--resume`."""
    manager = engine.manager
    if manager is None:
        return []
    live = {s.session_id for s in engine.sessions()}
    left = {sid: e for sid, e in keeper.entries.items() if sid not in live}
    resumed: list[AgentSession] = []
    for old_id, entry in left.items():
        keeper.entries.pop(old_id, None)
        agent = engine.agents.get(str(entry.get("role")))
        folder = Path(str(entry.get("folder") or ""))
        claude_id = entry.get("claude_session_id")
        if agent is None or agent.id != entry.get("agent_id"):
            log.info("not resuming session %s: its agent is no longer configured", old_id)
            continue
        if not valid_claude_id(claude_id):
            log.warning(
                "not resuming session %s: %r is not a Claude Code session id", old_id, claude_id
            )
            continue
        if not entry.get("folder") or not await asyncio.to_thread(folder.is_dir):
            log.info("not resuming session %s: its folder %s is gone", old_id, folder)
            continue
        argv = [*agent.command, "--resume", claude_id]
        try:
            session = await manager.create(
                agent.model_copy(update={"command": argv}), working_dir=folder
            )
        except Exception as error:
            log.warning("resuming session %s (%s) failed: %s", old_id, agent.role, error)
            continue
        log.info(
            "resumed %s's Claude Code conversation %s as session %s (was %s)",
            agent.role,
            claude_id,
            session.session_id,
            old_id,
        )
        await _adopt(engine, session, agent, folder)
        resumed.append(session)
        task = asyncio.create_task(_tell_it(engine, session, old_id), name="resume note")
        _NOTES.add(task)
        task.add_done_callback(_NOTES.discard)
    keeper._save()
    return resumed


_NOTES: set[asyncio.Task[None]] = set()


async def _adopt(engine: Engine, session: AgentSession, agent: Agent, folder: Path) -> None:
    """The resumed session joins the pool as a cold session: listed, leased, reaped when
    idle, its worktree removed then (not a warm role's worktree: that one is the pool's warm
    slot's, whichever session runs in it)."""
    pool, worktrees = engine.pool, engine.manager.worktrees if engine.manager else None
    if pool is None:
        return
    worktree = None
    if worktrees is not None:
        with contextlib.suppress(Exception):
            resolved = await asyncio.to_thread(folder.resolve)
            worktree = next((w for w in await worktrees.list() if w.path == resolved), None)
    if worktree is not None and worktree.task_id == warm_task_id(agent.role):
        worktree = None
    try:
        pool.adopt(session, agent, worktree)
    except Exception as error:  # a pool that is closing: the session stays beside it
        log.warning("resumed session %s not added to the pool: %s", session.session_id, error)


async def _tell_it(engine: Engine, session: AgentSession, old_id: str) -> None:
    """Once it is ready: that it was restarted, and what it had asked that nobody answered."""
    try:
        await session.wait_ready(READY_TIMEOUT)
    except Exception as error:
        log.warning("resumed session %s did not get ready: %s", session.session_id, error)
        return
    unanswered: list[str] = []
    with contextlib.suppress(Exception):
        cancelled = await engine.store.list_questions(
            engine.office_id, status="cancelled", session_ids=[old_id]
        )
        unanswered = [question.question for question in cancelled]
    note = (
        "[semo] The engine was restarted and this conversation resumed; what you were doing "
        "when it stopped was interrupted (a job is retried from a new session): wait for new "
        "instructions before you continue it."
    )
    if unanswered:
        asked = "; ".join(f'"{q[:200]}"' for q in unanswered[-3:])
        note += f" Your question(s) {asked} got no answer before the restart: ask again if needed."
    session.post(note)
