"""An isolated, offline environment for running the real Claude Code CLI.

    with ScriptedMessagesAPI(replies=["Hi."]) as api:
        env = claude_env(workdir, home, api)      # also writes home/.claude.json
        argv = claude_argv()
        # run `env -i K=V ... <argv>` with cwd=workdir (in tmux, a pty, ...)

``claude_env`` returns the *complete* environment (run the CLI with ``env -i`` or
``subprocess(env=...)``), so nothing from the developer's shell — an ``ANTHROPIC_API_KEY``,
``CLAUDE_CONFIG_DIR``, ``TMUX`` — leaks into the run.

What makes the first screen the prompt, with no dialog (checked against 2.1.328):

* ``hasCompletedOnboarding`` skips the theme picker / login / terms walk-through;
* ``projects[<workdir>].hasTrustDialogAccepted`` skips "Do you trust the files in this folder?";
* ``ANTHROPIC_AUTH_TOKEN`` (sent as ``Authorization: Bearer``) instead of ``ANTHROPIC_API_KEY``
  avoids "Detected a custom API key in your environment. Use it?";
* ``DISABLE_AUTOUPDATER`` / ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC`` / ``DISABLE_TELEMETRY`` /
  ``CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL`` keep it off the network (without the
  last one it tries to install the official plugin marketplace on first start).

With ``quiet=True`` (the default) three more keys make the first screen settle at once and
identical on every run for a given workdir path:

* ``lastClawdEntranceVersion``: skips the ~1.3 s mascot entrance animation of a version's first
  start;
* ``hasSeenAutoDefaultNotice``: drops the 5-line "Auto mode is now Claude Code's default
  permission mode" notice;
* ``lastReleaseNotesSeen``: no "Updated: N features, ..." release-notes box (a fresh config
  shows none either, but an older value would).
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.support.scripted_api import ScriptedMessagesAPI

__all__ = [
    "DUMMY_AUTH_TOKEN",
    "claude_argv",
    "claude_config",
    "claude_env",
    "installed_claude_version",
    "prepare_claude_home",
]

#: Sent as ``Authorization: Bearer ...``; the stand-in accepts anything (and never records it).
DUMMY_AUTH_TOKEN = "semo-test-token-not-a-secret"

#: Pinned in scripts/lib/ensure.sh; used when ``claude --version`` cannot be read.
PINNED_VERSION = "2.1.328"


def claude_argv() -> list[str]:
    """The command line (no flags are needed: dialogs are pre-answered in ``.claude.json``)."""
    return ["claude"]


@functools.cache
def installed_claude_version() -> str:
    """``x.y.z`` of the ``claude`` on PATH (``claude --version`` answers offline, in ~20 ms)."""
    try:
        out = subprocess.run(
            [*claude_argv(), "--version"], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return PINNED_VERSION
    m = re.match(r"\s*(\d+\.\d+\.\d+)", out)
    return m.group(1) if m else PINNED_VERSION


def claude_config(workdir: Path, *, quiet: bool = True) -> dict[str, Any]:
    """The ``~/.claude.json`` content for a run in ``workdir``."""
    config: dict[str, Any] = {
        "hasCompletedOnboarding": True,
        "projects": {str(workdir): {"hasTrustDialogAccepted": True}},
    }
    if quiet:
        version = installed_claude_version()
        config.update(
            {
                "lastClawdEntranceVersion": version,
                "hasSeenAutoDefaultNotice": True,
                "lastReleaseNotesSeen": version,
            }
        )
    return config


def prepare_claude_home(home: Path, workdir: Path, *, quiet: bool = True) -> Path:
    """Write ``home/.claude.json`` (creating ``home``); return its path.

    The trust entry is keyed by the resolved ``workdir`` — the path the CLI sees as its cwd.
    """
    home.mkdir(parents=True, exist_ok=True)
    path = home / ".claude.json"
    config = claude_config(Path(os.path.realpath(workdir)), quiet=quiet)
    path.write_text(json.dumps(config, indent=2) + "\n")
    return path


def claude_env(
    workdir: Path,
    home: Path,
    api: ScriptedMessagesAPI,
    term: str = "xterm-256color",
    *,
    quiet: bool = True,
) -> dict[str, str]:
    """Prepare ``home`` for ``workdir`` and return the complete environment for ``claude``."""
    prepare_claude_home(home, workdir, quiet=quiet)
    return {
        "HOME": str(home),
        "PATH": os.environ.get("PATH") or "/usr/local/bin:/usr/bin:/bin",
        "TERM": term,
        "ANTHROPIC_BASE_URL": api.base_url,
        "ANTHROPIC_AUTH_TOKEN": DUMMY_AUTH_TOKEN,
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
    }
