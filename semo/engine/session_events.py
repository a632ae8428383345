"""A session's own events (observer output, PTY chunks) as events on the engine's bus."""

from __future__ import annotations

from semo.engine.events import (
    AgentMessage,
    Event,
    MalformedAgentMessage,
    SessionOutput,
    SessionSignal,
    SessionStatusChanged,
)
from semo.engine.protocol.monitor import Signal
from semo.engine.protocol.observer import MalformedMessage, MessageFound
from semo.engine.protocol.state import StateChange
from semo.engine.sessions.agent_session import AgentSession, OutputChunk, SessionEvent


def bus_event(office_id: str, session: AgentSession, event: SessionEvent) -> Event | None:
    """The bus event for `event`, or None for what only the session itself cares about."""
    sid = session.session_id
    if isinstance(event, StateChange):
        return SessionStatusChanged(
            office_id=office_id,
            session_id=sid,
            agent_id=session.agent_id,
            role=session.role,
            status=event.state.value,
            previous=event.previous.value,
            source=event.source,
            reason=event.reason,
        )
    if isinstance(event, OutputChunk):
        return SessionOutput(office_id=office_id, session_id=sid, data=event.data, seq=event.seq)
    if isinstance(event, MessageFound):
        message = event.message
        return AgentMessage(
            office_id=office_id,
            session_id=sid,
            agent_id=session.agent_id,
            message_kind=message.kind,
            summary=message.model_dump_json()[:500],
        )
    if isinstance(event, MalformedMessage):
        return MalformedAgentMessage(
            office_id=office_id, session_id=sid, error=event.error.for_agent()
        )
    if isinstance(event, Signal):
        return SessionSignal(
            office_id=office_id,
            session_id=sid,
            signal_kind=event.kind,
            pattern=event.pattern,
            source=event.source,
            text=event.text,
        )
    return None
