"""Claude Code's ``.claude/settings.local.json``: semo's hooks merged in, the rest kept.

Each hook runs ``<hook command> <Event>`` (the shim, `semo.engine.protocol.hook_shim`); Claude Code
runs hooks through a shell. Entries of an older semo (see
`semo.engine.protocol.hooks.is_semo_hook_command`) are replaced wherever they are, so a worktree an
older install prepared gets today's command when a session starts there.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from semo.engine import safe_json
from semo.engine.agents.gitexclude import ensure_git_exclude
from semo.engine.fsutil import read_text_in, write_text_in
from semo.engine.protocol.hooks import (
    HOOK_EVENTS,
    MAX_JSON_DEPTH,
    hook_command_line,
    is_semo_hook_command,
)

__all__ = [
    "HOOK_EVENTS",
    "HOOK_TIMEOUT_SECONDS",
    "SETTINGS_RELPATH",
    "HookSettingsError",
    "install_hooks",
    "merge_hook_settings",
]

#: Where the hooks go, relative to the worktree (Claude Code's per-user, uncommitted settings).
SETTINGS_RELPATH = Path(".claude") / "settings.local.json"

#: Seconds Claude Code lets one of our hooks run before killing it (the shim gives up after 2).
HOOK_TIMEOUT_SECONDS = 10

#: Largest settings.local.json semo merges into (Claude Code's are a few KiB).
_SETTINGS_MAX_BYTES = 4 * 1024 * 1024


class HookSettingsError(Exception):
    """A settings file semo must merge into is not what Claude Code would accept."""


def _is_our_hook(hook: Any) -> bool:
    return isinstance(hook, dict) and is_semo_hook_command(hook.get("command"))


def merge_hook_settings(
    settings: Mapping[str, Any],
    command: Sequence[str],
    events: Iterable[str] = HOOK_EVENTS,
    *,
    timeout: int = HOOK_TIMEOUT_SECONDS,
    timeouts: Mapping[str, int] | None = None,
    permission_mode: str | None = None,
    source: str = "settings",
) -> dict[str, Any]:
    """Return ``settings`` with our hooks for ``events`` and everything else kept.

    Our previous entries (see :func:`is_semo_hook_command`) are removed wherever they are, and a
    matcher group holding only them goes with them; every other key, event, group and hook is
    kept in place and order. Merging the result again with the same arguments changes nothing.
    ``timeouts`` gives some events another timeout than ``timeout`` (a PermissionRequest waits
    for a person); ``permission_mode`` sets ``permissions.defaultMode`` (None: left as it is).
    Raises :class:`HookSettingsError` when the shape is not Claude Code's (``source`` names the
    file in the message).
    """
    if not isinstance(settings, Mapping):
        raise HookSettingsError(f"{source}: expected a JSON object at the top level")
    result = dict(settings)
    hooks_value = result.get("hooks", {})
    if not isinstance(hooks_value, Mapping):
        raise HookSettingsError(f'{source}: "hooks" must be a JSON object')
    hooks: dict[str, Any] = {}
    for event, groups in hooks_value.items():
        if not isinstance(groups, list):
            raise HookSettingsError(f'{source}: "hooks.{event}" must be a JSON array')
        kept = []
        for group in groups:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(inner, list):
                kept.append(group)  # not ours to judge; Claude Code will say if it is wrong
                continue
            remaining = [h for h in inner if not _is_our_hook(h)]
            if len(remaining) == len(inner):
                kept.append(group)
            elif remaining:
                kept.append({**group, "hooks": remaining})
        if kept:
            hooks[event] = kept
    for event in events:
        seconds = (timeouts or {}).get(event, timeout)
        ours = {"type": "command", "command": hook_command_line(command, event), "timeout": seconds}
        hooks.setdefault(event, []).append({"hooks": [ours]})
    result["hooks"] = hooks
    if permission_mode is not None:
        permissions = result.get("permissions", {})
        if not isinstance(permissions, Mapping):
            raise HookSettingsError(f'{source}: "permissions" must be a JSON object')
        result["permissions"] = {**permissions, "defaultMode": permission_mode}
    return result


def _read_settings(worktree: Path) -> tuple[str | None, dict[str, Any]]:
    """(text, settings) of the worktree's settings file; never through a symlink out of the
    worktree, never a FIFO (semo/engine/fsutil.py: read_text_in)."""
    path = worktree / SETTINGS_RELPATH
    try:
        text = read_text_in(worktree, SETTINGS_RELPATH)
    except (OSError, UnicodeDecodeError) as exc:
        raise HookSettingsError(f"{path}: cannot read it ({exc}); semo left it unchanged") from exc
    return text, _parse_settings(path, text)


def _parse_settings(path: Path, text: str | None) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    try:  # the worktree is the agent's: its settings file may be hostile too
        value = safe_json.loads(text, max_bytes=_SETTINGS_MAX_BYTES, max_depth=MAX_JSON_DEPTH)
    except safe_json.JSONInputError as exc:
        raise HookSettingsError(
            f"{path}: {exc}; fix or remove it, semo will not overwrite it"
        ) from None
    if not isinstance(value, dict):
        raise HookSettingsError(
            f"{path}: expected a JSON object, found {type(value).__name__}; "
            "fix or remove it, semo will not overwrite it"
        )
    return value


def install_hooks(
    worktree: Path,
    command: Sequence[str],
    *,
    events: Iterable[str] = HOOK_EVENTS,
    timeout: int = HOOK_TIMEOUT_SECONDS,
    timeouts: Mapping[str, int] | None = None,
    permission_mode: str | None = None,
    exclude_from_git: bool = True,
) -> Path:
    """Install ``<command> <Event>`` hooks in ``worktree/.claude/settings.local.json``.

    Merges with what is there (see :func:`merge_hook_settings`), writes atomically and only when
    something changed, and (``exclude_from_git``) lists the file in the repository's
    ``info/exclude`` when the worktree is in a git repository. Returns the settings path.
    Raises :class:`HookSettingsError` for an existing file that is not a JSON object of
    Claude Code's shape; the file is never overwritten then.
    """
    worktree = Path(worktree)
    path = worktree / SETTINGS_RELPATH
    before, current = _read_settings(worktree)
    merged = merge_hook_settings(
        current,
        command,
        events,
        timeout=timeout,
        timeouts=timeouts,
        permission_mode=permission_mode,
        source=str(path),
    )
    text = json.dumps(merged, indent=2, ensure_ascii=False) + "\n"
    if before != text:
        try:  # a symlink may lead elsewhere inside the worktree, never out of it
            write_text_in(worktree, SETTINGS_RELPATH, text)
        except OSError as exc:
            raise HookSettingsError(f"{path}: cannot write it: {exc}") from exc
    if exclude_from_git:
        ensure_git_exclude(worktree, SETTINGS_RELPATH)
    return path
