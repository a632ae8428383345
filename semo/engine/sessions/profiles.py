"""Agent profiles and what goes into an agent's terminal: typed and pasted text, made safe.

A profile (`semo.engine.agents.base.AgentProfile`) says how to talk to a kind of CLI (deliver a
prompt, cancel a turn, know it is ready); each comes from its adapter (`engine.agents`).
"""

from __future__ import annotations

import re

from semo.engine.agents.base import AgentProfile
from semo.engine.agents.registry import profile_for_command, profile_named

__all__ = [
    "PASTE_END",
    "PASTE_START",
    "AgentProfile",
    "paste",
    "profile_for_command",
    "profile_named",
    "sanitize_input",
]

PASTE_START = "\x1b[200~"
PASTE_END = "\x1b[201~"
#: C0 controls but tab and newline, DEL, and C1 controls: what could act as a key or start an
#: escape sequence in the agent's terminal input (ESC starts the paste-end marker).
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


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
