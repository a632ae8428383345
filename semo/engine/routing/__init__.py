"""Routing: what the engine does with remote commands and the agents' protocol messages.

`semo.engine.routing.dispatcher` claims `agent_commands` rows of an office and runs each against a
session of this engine, one `agent_command_results` row per command.
"""

from semo.engine.routing.dispatcher import (
    CommandDispatcher,
    CommandFailed,
    DispatcherStats,
    TypeStats,
)

__all__ = ["CommandDispatcher", "CommandFailed", "DispatcherStats", "TypeStats"]
