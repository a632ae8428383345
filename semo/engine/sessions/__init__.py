"""Agent sessions and what each one stands on.

`semo.engine.sessions.worktrees` gives every task its own git worktree under
``{workspace_root}/agent/{role}/{task_id}`` (seed 004); `semo.engine.sessions.persona` writes the
agent's persona and the protocol into that worktree's ``.claude/CLAUDE.md``;
`semo.engine.sessions.claude_config` pre-accepts Claude Code's onboarding and the worktree's trust
dialog in the user's ``~/.claude.json``; `semo.engine.sessions.breaker` is the per-role circuit
breaker that keeps crashed sessions from restarting in a storm.
"""
