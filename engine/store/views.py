"""Rows as `semo sessions` and `semo engines` print them (engine/store/cli.py)."""

from __future__ import annotations

from engine.store.models import AgentSession, EngineHeartbeat


class SessionView(AgentSession):
    """A session row with its agent's role and name (None when the agent row is gone)."""

    role: str | None = None
    name: str | None = None


class EngineView(EngineHeartbeat):
    """An engine's heartbeat row with its state for people: alive, stopped or dead."""

    state: str
