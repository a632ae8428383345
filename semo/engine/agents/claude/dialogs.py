"""Claude Code dialogs that skip the PermissionRequest hook, read off the screen.

How it works: docs/ROUTING.md, "Dialogs on screen".
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from semo.engine.approval_policy import Answer, PermissionRequest, bounded, plain

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
_DASHED = re.compile(r"^\s*╌{10,}\s*$")  # the lines around the command in a dialog
_RUNNING = re.compile(r"^\s*⎿\s+\$ (\S.*?)\s*$")  # the command above auto mode's notice
_AMEND = re.compile(r"Tab to amend")
#: the longest reason typed into "No, and tell Claude what to do differently"
REASON_CHARS = 500


@dataclass(frozen=True)
class ScreenDialog:
    """A dialog read off the screen: what it says, and the keys that answer it."""

    summary: str
    options: tuple[str, ...]  # the option rows, as shown (empty: none numbered or marked)
    highlighted: int  # index into options of the ❯ row (-1: none)
    enter_allows: bool  # "Enter to stay in auto mode": Enter goes on
    #: the Bash command the dialog is about, read off the screen (None: not read, or another
    #: tool); what rules and "allow for this session" match
    request: PermissionRequest | None = None
    amend: bool = False  # "Tab to amend": its No takes a message for the model

    @property
    def leads_on(self) -> bool:
        """Auto mode's notice: Enter stays in auto mode, where "proceed?" asks next."""
        return self.enter_allows

    def picks(self) -> str:
        """What "allow" chooses in the dialog, in its own words."""
        if self.enter_allows:
            return "Enter"
        yes = self._yes()
        return self.options[yes] if yes >= 0 and self.highlighted >= 0 else "Esc (no Yes to pick)"

    def denies(self) -> str:
        """What "deny" does in the dialog, in its own words."""
        if self.amend and self._no() >= 0 and self.highlighted >= 0:
            return f"{self.options[self._no()]}, and the reason"
        return "Esc"

    def _yes(self) -> int:
        return next((i for i, o in enumerate(self.options) if re.match(r"Yes\b", o)), -1)

    def _no(self) -> int:
        return next((i for i, o in enumerate(self.options) if re.match(r"No\b", o)), -1)

    def keys(self, answer: Answer) -> str:
        """The key spec (semo.engine.terminal.keys) that gives ``answer``; a deny's reason
        is typed into the dialog's No ("tell Claude what to do differently") where it has one:
        the model reads it as the tool's refusal."""
        if answer.decision == "deny":
            target = self._no()
            if not (self.amend and answer.reason and target >= 0 and self.highlighted >= 0):
                return "<Esc>"
            step = "<Down>" if target > self.highlighted else "<Up>"
            return (
                step * abs(target - self.highlighted)
                + "<Tab><Sleep:300>"
                + typed(answer.reason)
                + "<Sleep:200><Enter>"
            )
        if self.enter_allows:
            return "<Enter>"
        target = self._yes()
        if target < 0 or self.highlighted < 0:
            return "<Esc>"  # no Yes to pick: never a guess that might allow something else
        step = "<Down>" if target > self.highlighted else "<Up>"
        return step * abs(target - self.highlighted) + "<Enter>"


def typed(text: str) -> str:
    """``text`` as a key spec that types it literally: one line, no controls, ``<`` escaped."""
    line = plain(text, one_line=True)[:REASON_CHARS]
    return line.replace("<", "<lt>")


def _request(context: list[str]) -> PermissionRequest | None:
    """The Bash command of a dialog, from the rows above its question (None: not read).

    "Do you want to proceed?" shows "Bash command", then the command between two dashed
    lines (a wrapped command's rows joined by newlines); auto mode's notice follows the
    transcript's "⎿  $ command" row."""
    starts = [i for i, row in enumerate(context) if row.strip() == "Bash command"]
    if starts:
        dashed = [i for i in range(starts[-1], len(context)) if _DASHED.match(context[i])]
        if len(dashed) < 2:
            return None
        lines = [row.strip() for row in context[dashed[0] + 1 : dashed[1]]]
        command = "\n".join(line for line in lines if line)
    else:
        running = [i for i, row in enumerate(context) if _RUNNING.match(row)]
        after = context[running[-1] + 1 :] if running else []
        if not running or any(row.strip() and not _RULE.match(row) for row in after):
            return None  # none, or a wrapped one: only a whole command is matched
        found = _RUNNING.match(context[running[-1]])
        if found is None:  # matched above: never, but the type cannot say so
            return None
        command = found.group(1)
    if not command or "…" in command:
        return None  # cut short on the screen: nothing to match
    return PermissionRequest(tool="Bash", subject=command, summary=f"Bash: {bounded(command)}")


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
    # auto mode's notice has no box of its own around the command: the transcript above it
    request = _request(rows[head:start] if head < start else rows[max(start - 25, 0) : start])
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
    # the notice shows no command of its own: the one it is about, read above it, goes first
    about = [request.summary] if request is not None and not context else []
    words = " · ".join([*about, *context, *body[:3]])
    dialog = ScreenDialog(
        summary="",
        options=tuple(options),
        highlighted=highlighted,
        enter_allows=any(_ENTER_ON.search(r) for r in rows[start:]),
        request=request,
        amend=any(_AMEND.search(r) for r in rows[start:]),
    )
    # what each answer picks: the operator decides without the agent's pane in front of them
    picks = dialog.picks()
    denies = dialog.denies()
    if dialog.enter_allows and request is not None:  # the decision goes on to "proceed?"
        picks, denies = f"{picks}, then Yes", f"{picks}, then No and the reason"
    summary = (
        f"Claude Code's dialog: {bounded(words)} "
        f"[allow: {bounded(picks, 120)}; deny: {bounded(denies, 120)}]"
    )
    return dataclasses.replace(dialog, summary=summary)
