"""An office's folder and semo.toml for tests that run real `semo` processes."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from tests.support.git_repo import make_repo

if TYPE_CHECKING:
    from tests.support.scripted_api import ScriptedMessagesAPI


@contextmanager
def kept_temp_dir(prefix: str) -> Iterator[Path]:
    """A fresh folder under the system temp folder (short: sockets live under it), removed
    after unless SEMO_TEST_KEEP is set (to read an office's logs after a failure)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        if not os.environ.get("SEMO_TEST_KEEP"):
            shutil.rmtree(path, ignore_errors=True)


def engine_pool_toml(
    *, command_timeout: int, shutdown_grace: int, max_sessions: int, warm_roles: Sequence[str]
) -> str:
    """The `[engine]` and `[pool]` sections of a test office's semo.toml."""
    return f"""
[engine]
command_timeout = {command_timeout}
shutdown_grace = {shutdown_grace}

[pool]
max_sessions = {max_sessions}
warm_roles = {json.dumps(list(warm_roles))}
"""


def write_claude_office(
    folder: Path,
    name: str,
    store: str,
    apis: Mapping[str, ScriptedMessagesAPI],
    *,
    max_sessions: int,
    commands: Mapping[str, str] | None = None,
) -> None:
    """`folder/repo` (a git repository) and `folder/semo.toml`: office `name` with the
    `store` section, one warm Claude Code agent a role of `apis`, talking to that scripted
    API (its command `commands[role]`, or the default)."""
    make_repo(folder / "repo", {"README.md": "# the office's product\n"})
    agents = "".join(
        f"""
[[agents]]
role = "{role}"
name = "{role} agent"
prompt = "You are the {role} engineer."
"""
        + (f"command = [{json.dumps(commands[role])}]\n" if role in (commands or {}) else "")
        + f"""env = {{ ANTHROPIC_BASE_URL = "{api.base_url}" }}
cols = 100
rows = 30
"""
        for role, api in apis.items()
    )
    pool = engine_pool_toml(
        command_timeout=60, shutdown_grace=2, max_sessions=max_sessions, warm_roles=list(apis)
    )
    (folder / "semo.toml").write_text(
        f"""
[office]
name = "{name}"
repository = "repo"
workspace_root = "ws"

{store}
{pool}{agents}"""
    )
