"""The environment an agent starts with: the engine's own, without credentials.

How it works: docs/SECURITY.md, "The agents' environment".
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping

__all__ = [
    "ENGINE_ONLY_PREFIXES",
    "KEPT_PREFIXES",
    "SCRUBBED_NAMES",
    "SCRUBBED_PREFIXES",
    "SCRUBBED_SUFFIXES",
    "agent_env_values",
    "is_credential",
    "reference",
    "scrub",
]

log = logging.getLogger("semo.sessions")

#: Never reach an agent, not even when named in `[[agents]] env`.
ENGINE_ONLY_PREFIXES = ("SEMO_", "SUPABASE_")
SCRUBBED_PREFIXES = (*ENGINE_ONLY_PREFIXES, "PG", "AWS_", "AZURE_", "GOOGLE_")
SCRUBBED_NAMES = frozenset(
    {
        "DATABASE_URL",
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "GH_ENTERPRISE_TOKEN",
        "GITHUB_ENTERPRISE_TOKEN",
        "GITLAB_TOKEN",
        "NPM_TOKEN",
        "NODE_AUTH_TOKEN",
        "OPENAI_API_KEY",
        "HF_TOKEN",
        "VAULT_TOKEN",
        "SSH_AUTH_SOCK",
    }
)
SCRUBBED_SUFFIXES = (
    "_TOKEN",
    "_SECRET",
    "_PASSWORD",
    "_PASSWD",
    "_API_KEY",
    "_SECRET_KEY",
    "_ACCESS_KEY",
    "_PRIVATE_KEY",
    "_CREDENTIALS",
    "_DATABASE_URL",
)
#: The Claude Code agent's own credentials and settings: inherited (see the module docstring).
KEPT_PREFIXES = ("ANTHROPIC_", "CLAUDE_")

_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def is_credential(name: str) -> bool:
    """Whether ``name`` is removed from what an agent inherits."""
    upper = name.upper()
    if upper.startswith(ENGINE_ONLY_PREFIXES):
        return True
    if upper.startswith(KEPT_PREFIXES):
        return False
    return (
        upper.startswith(SCRUBBED_PREFIXES)
        or upper in SCRUBBED_NAMES
        or upper.endswith(SCRUBBED_SUFFIXES)
    )


def scrub(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without credentials (:func:`is_credential`)."""
    return {k: v for k, v in env.items() if not is_credential(k)}


def reference(value: str) -> str | None:
    """The variable a ``"${NAME}"`` value refers to (the whole value), else None."""
    match = _REFERENCE.fullmatch(value)
    return match.group(1) if match else None


def agent_env_values(
    env: Mapping[str, str], source: Mapping[str, str] | None = None
) -> dict[str, str]:
    """What ``[[agents]] env`` adds: literal values as written; ``"${NAME}"`` replaced by
    ``source[NAME]`` (default: the engine's environment), left out when ``source`` has no such
    variable. Names (or references) starting with SEMO_ / SUPABASE_ are dropped."""
    source = os.environ if source is None else source
    values: dict[str, str] = {}
    for key, value in env.items():
        if key.upper().startswith(ENGINE_ONLY_PREFIXES):
            log.warning("agent env %s dropped: SEMO_* and SUPABASE_* never reach agents", key)
            continue
        name = reference(value)
        if name is None:
            values[key] = value
        elif name.upper().startswith(ENGINE_ONLY_PREFIXES):
            log.warning("agent env %s = ${%s} dropped: the engine's secrets never reach agents",
                        key, name)  # fmt: skip
        elif name in source:
            values[key] = source[name]
        else:
            log.info("agent env %s = ${%s}: the engine has no %s; not set", key, name, name)
    return values
