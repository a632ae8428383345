"""Claude Code conversations on disk: which session ids may be resumed, and from where.

The ids come from the agents' own hook reports, so they are untrusted: only a UUID goes on a
command line (``--dangerously-...`` must never become a flag of the resumed CLI), and only when
that conversation's transcript is a regular file directly inside the session's own Claude
projects folder (``<config dir>/projects/<escaped folder>/<id>.jsonl``): an id of another
worktree's conversation, or a symlink planted there, is refused.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TypeGuard

from semo.engine.agents.claude.transcript import TranscriptScope

__all__ = ["SESSION_ID", "transcript_of", "valid_session_id"]

#: what Claude Code's session ids look like (a UUID)
SESSION_ID = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")


def valid_session_id(value: object) -> TypeGuard[str]:
    """Whether `value` is a Claude Code session id (a UUID, nothing else)."""
    return isinstance(value, str) and SESSION_ID.fullmatch(value) is not None


def transcript_of(folder: Path, env: Mapping[str, str], claude_id: str) -> Path | None:
    """The transcript of conversation `claude_id` in `folder`'s Claude projects folder (the
    one the CLI's `--resume` reads), if it is a regular file there (not a symlink); else None."""
    scope = TranscriptScope.for_session(folder, env)
    for slug in sorted(scope.slugs):
        candidates = [scope.projects / slug]
        if len(slug) > 200:  # Claude Code cuts long names and adds a hash
            with contextlib.suppress(OSError):
                candidates = sorted(scope.projects.glob(f"{glob.escape(slug[:200])}-*"))
        for project in candidates:
            path = project / f"{claude_id}.jsonl"
            try:
                if os.path.realpath(project) != os.fspath(project):
                    continue  # a symlinked project folder
                if stat.S_ISREG(os.lstat(path).st_mode):
                    return path
            except OSError:
                continue
    return None
