"""Claude Code dialogs that skip the PermissionRequest hook, read off the screen.

How it works: docs/ROUTING.md, "Dialogs on screen".
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from semo.engine.approval_policy import Answer, bounded

__all__ = ["ScreenDialog", "read_dialog"]

#: the first line of a dialog that waits for a person (screen.py's _DIALOG says when)
_OPENERS = re.compile(
    r"Do you want to (proceed|make this edit|create|allow|run)"
    r"|Auto mode can't check actions in this session"
    r"|Auto mode lets Claude handle permission prompts"
)
_ENTER_ON = re.compile(r"Enter to stay in auto mode")
_OPTION = re.compile(r"^\s*(❯)?\s*(?:\d+\.\s+)?(\S.*?)\s*$")
_FOOTER = re.compile(r"Esc to cancel|Enter to stay in auto mode|Enter to confirm")
_RULE = re.compile(r"^[─╌━\s]+$")
_SOLID = re.compile(r"^\s*─{10,}\s*$")  # the line a dialog's box starts with


@dataclass(frozen=True)
class ScreenDialog:
    """A dialog read off the screen: what it says, and the keys that answer it."""

    summary: str
    options: tuple[str, ...]  # the option rows, as shown (empty: none numbered or marked)
    highlighted: int  # index into options of the ❯ row (-1: none)
    enter_allows: bool  # "Enter to stay in auto mode": Enter goes on

    def picks(self) -> str:
        """What "allow" chooses in the dialog, in its own words."""
        if self.enter_allows:
            return "Enter"
        yes = self._yes()
        return self.options[yes] if yes >= 0 and self.highlighted >= 0 else "Esc (no Yes to pick)"

    def _yes(self) -> int:
        return next((i for i, o in enumerate(self.options) if re.match(r"Yes\b", o)), -1)

    def keys(self, answer: Answer) -> str:
        """The key spec (semo.engine.terminal.keys) that gives ``answer``."""
        if answer.decision == "deny":
            return "<Esc>"
        if self.enter_allows:
            return "<Enter>"
        target = self._yes()
        if target < 0 or self.highlighted < 0:
            return "<Esc>"  # no Yes to pick: never a guess that might allow something else
        step = "<Down>" if target > self.highlighted else "<Up>"
        return step * abs(target - self.highlighted) + "<Enter>"


def read_dialog(rows: list[str]) -> ScreenDialog | None:
    """The dialog on the screen's rows (the last one that opens, down to its footer)."""
    start = None
    for index in range(len(rows) - 1, max(len(rows) - 30, -1), -1):
        if _OPENERS.search(rows[index]):
            start = index
            break
    if start is None:
        return None
    # what the dialog is about: the rows above it up to its box's top line (the tool and
    # the command, between dashed lines)
    head = start
    while head > 0 and not _SOLID.match(rows[head - 1]) and start - head < 12:
        head -= 1
    context = [r.strip() for r in rows[head:start] if r.strip() and not _RULE.match(r)]
    body: list[str] = []
    options: list[str] = []
    highlighted = -1
    for row in rows[start:]:
        if _FOOTER.search(row):
            body.append(row.strip())
            break
        match = _OPTION.match(row)
        if match is None or _RULE.match(row):
            continue
        text = match.group(2)
        if match.group(1) or re.match(r"^\s+(?:\d+\.\s+)?(Yes|No)\b", row):
            if match.group(1):
                highlighted = len(options)
            options.append(text)
        else:
            body.append(text)
    words = " · ".join([*context, *body[:3]])
    dialog = ScreenDialog(
        summary="",
        options=tuple(options),
        highlighted=highlighted,
        enter_allows=any(_ENTER_ON.search(r) for r in rows[start:]),
    )
    # what each answer picks: the operator decides without the agent's pane in front of them
    picks = dialog.picks()
    summary = f"Claude Code's dialog: {bounded(words)} [allow: {bounded(picks, 120)}; deny: Esc]"
    return dataclasses.replace(dialog, summary=summary)
