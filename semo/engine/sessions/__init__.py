"""Agent sessions and what each one stands on.

`semo.engine.sessions.worktrees` gives every task its own git worktree under
``{workspace_root}/agent/{role}/{task_id}`` (seed 004); the session's adapter (`semo.engine.agents`)
prepares it for its CLI (persona, hooks, trust); `semo.engine.sessions.breaker` is the per-role
circuit breaker that keeps crashed sessions from restarting in a storm.
"""
