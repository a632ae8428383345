"""What preparing an agent's worktree raises for the operator (no traceback is logged)."""

from __future__ import annotations


class AgentSetupError(Exception):
    """A worktree cannot be prepared for an agent; the message is for the operator."""
