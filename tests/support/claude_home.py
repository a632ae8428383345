"""An isolated, offline environment for running the real Claude Code CLI.

``prepare_claude_home(home, workdir)`` writes the ``$HOME/.claude.json`` that makes the prompt the
first screen; ``claude_env(workdir, home, api)`` returns the environment pointing the CLI at a
:class:`~tests.support.scripted_api.ScriptedMessagesAPI` on loopback.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.support.scripted_api import ScriptedMessagesAPI

__all__ = ["DUMMY_AUTH_TOKEN", "claude_argv", "claude_env", "prepare_claude_home"]

DUMMY_AUTH_TOKEN = "semo-test-token-not-a-secret"


def _claude_json(workdir: Path) -> dict[str, Any]:
    return {
        "hasCompletedOnboarding": True,
        "projects": {str(workdir): {"hasTrustDialogAccepted": True}},
    }


def prepare_claude_home(home: Path, workdir: Path) -> Path:
    """Write ``home/.claude.json`` (and ``home/.claude/``); return the ``.claude.json`` path."""
    home.mkdir(parents=True, exist_ok=True)
    (home / ".claude").mkdir(exist_ok=True)
    path = home / ".claude.json"
    path.write_text(json.dumps(_claude_json(workdir.resolve()), indent=2) + "\n")
    return path


def claude_env(
    workdir: Path, home: Path, api: ScriptedMessagesAPI, term: str = "xterm-256color"
) -> dict[str, str]:
    """The complete environment for ``claude`` (not merged with ``os.environ``)."""
    prepare_claude_home(home, workdir)
    env = {
        "HOME": str(home),
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "TERM": term,
        "LANG": "C.UTF-8",
        "ANTHROPIC_BASE_URL": api.base_url,
        "ANTHROPIC_AUTH_TOKEN": DUMMY_AUTH_TOKEN,
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    return env


def claude_argv() -> list[str]:
    return ["claude"]
