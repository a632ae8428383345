"""Agent profiles: how to talk to a kind of CLI (deliver a prompt, cancel a turn, know it is ready).

``claude``: Claude Code. States come from its hooks; a prompt goes in as a bracketed paste (the
CLI enables mode 2004) followed by Enter, and counts as delivered only when the
UserPromptSubmit hook reports it (one retry). Cancel is Esc: Ctrl+C twice quits the CLI.

``generic``: any other interactive program. Readiness is a prompt pattern on the cursor row;
a prompt is typed (pasted when the program enabled bracketed paste) and Enter pressed; delivery
counts as confirmed when the program answers with output. Cancel is Ctrl+C.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from semo.engine.protocol.monitor import DEFAULT_PROMPT_PATTERN

ProfileName = Literal["claude", "generic"]

PASTE_START = "\x1b[200~"
PASTE_END = "\x1b[201~"
#: C0 controls but tab and newline, DEL, and C1 controls: what could act as a key or start an
#: escape sequence in the agent's terminal input (ESC starts the paste-end marker).
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@dataclass(frozen=True)
class AgentProfile:
    name: ProfileName
    #: keys (semo.engine.terminal.keys spec) that interrupt the running turn
    cancel_keys: str
    #: the session's hooks report states (Claude Code) instead of the screen alone
    uses_hooks: bool
    #: seconds to wait for the agent to confirm a submitted prompt before the one retry
    confirm_timeout: float = 5.0
    prompt_pattern: str = DEFAULT_PROMPT_PATTERN
    #: the program reads what is typed as a prompt for a model, so semo's feedback on a refused
    #: protocol message may be typed into it; a shell would run that text as a command
    reads_prompts: bool = True


CLAUDE = AgentProfile("claude", cancel_keys="<Esc>", uses_hooks=True)
GENERIC = AgentProfile(
    "generic", cancel_keys="<C-c>", uses_hooks=False, confirm_timeout=3.0, reads_prompts=False
)


def profile_named(
    name: str, *, prompt_pattern: str | None = None, reads_prompts: bool | None = None
) -> AgentProfile:
    """The profile `name`; `reads_prompts` None keeps its default (claude yes, generic no)."""
    if name == "claude":
        return CLAUDE if reads_prompts is None else replace(CLAUDE, reads_prompts=reads_prompts)
    if name == "generic":
        if prompt_pattern is None and reads_prompts is None:
            return GENERIC
        return replace(
            GENERIC,
            prompt_pattern=prompt_pattern or GENERIC.prompt_pattern,
            reads_prompts=bool(reads_prompts),
        )
    raise ValueError(f"unknown agent profile {name!r} (known: claude, generic)")


def profile_for_command(command: Sequence[str]) -> AgentProfile:
    """`claude` when the command runs Claude Code, else `generic`."""
    return CLAUDE if command and os.path.basename(command[0]) == "claude" else GENERIC


def sanitize_input(text: str) -> str:
    """`text` as it may be typed into an agent: line ends made `\\n`, every other control
    character (C0 but tab and newline, DEL, C1) removed. Removing single characters cannot
    create a new control character, so the result is a fixed point: no ESC, hence no paste-end
    marker and no key sequence, whatever was nested in `text`."""
    return _CONTROLS.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))


def paste(text: str, *, bracketed: bool) -> str:
    """`text` as the terminal would send a paste, after `sanitize_input` (every prompt, answer,
    task and result goes through here on its way to the PTY): wrapped in 2004 brackets when the
    program asked for them. Without brackets a newline or a tab would act as a key (submit the
    prompt early, complete a word), so lines are joined by spaces and tabs become spaces."""
    clean = sanitize_input(text)
    if not bracketed:
        return " ".join(clean.replace("\t", " ").split("\n"))
    return f"{PASTE_START}{clean}{PASTE_END}"
