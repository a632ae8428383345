"""What the console's panels say, as (text, style) parts, without Textual or Rich.

The widgets turn the parts into Rich `Text` (console/widgets/); the first frame, painted before
Textual has loaded (console/first_frame.py), turns the same parts into ANSI. One place decides
what a session row, a question or the key bar reads, so the two frames cannot drift apart.
A style is a Rich style string from a small vocabulary: "bold", "dim", colour names, and
"#rrggbb".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from console.widgets.badges import STATE_STYLES, clip, duration, state_word
from engine.control.views import last_line
from engine.plain_text import plain

Part = tuple[str, str]

ROLE = 8
NAME = 3
STATE = 9
AGE = 3
JOB = 8


# -- sessions -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionRow:
    session_id: str
    role: str
    state: str
    name: str = ""
    age_s: float | None = None
    job: str | None = None
    last_line: str = ""


def session_order(sessions: Iterable[tuple[str, str]]) -> list[str]:
    """Session ids as the list shows them, from (session id, role) pairs: by role, the order
    they came in within a role. The first is the one a console selects when it opens."""
    return [sid for sid, _role in sorted(sessions, key=lambda item: item[1])]


def opening_selection(order: list[str], states: dict[str, str]) -> str | None:
    """The session a console selects when it opens (or when its selected session ends): the
    first in `order` that asks the operator something, else the first."""
    asking = [sid for sid in order if states.get(sid) == "waiting_input"]
    return (asking or order or [None])[0]


def session_names(sessions: Iterable[tuple[str, str]]) -> dict[str, str]:
    """A short name per session, in list order: #1, #2... among the sessions of its role."""
    names: dict[str, str] = {}
    count: dict[str, int] = {}
    for session_id, role in sessions:
        count[role] = count.get(role, 0) + 1
        names[session_id] = f"#{count[role]}"
    return names


def screen_last_line(screen: object) -> str:
    """`last_line` of a session's screen (a terminal screen, or anything with `display`)."""
    rows = screen.text_rows() if hasattr(screen, "text_rows") else getattr(screen, "display", [])
    return last_line(list(rows))


def pane_title(role: str, name: str, state: str, queued: int) -> str:
    queued_text = f" · {queued} queued" if queued else ""
    return f"{role} {name} · {state_word(state)}{queued_text}"


def session_columns(width: int) -> tuple[str, ...]:
    """The columns that fit `width` (last line first left out, then job, then name)."""
    shown = ["role", "state", "age"]
    if width >= ROLE + STATE + AGE + NAME + 4:
        shown.insert(1, "name")
    if width >= ROLE + NAME + STATE + AGE + JOB + 5:
        shown.append("job")
    if width >= ROLE + NAME + STATE + AGE + JOB + 6 + 12:
        shown.append("last")
    return tuple(shown)


def session_header(columns: tuple[str, ...], width: int) -> str:
    widths = {"role": ROLE, "name": NAME, "state": STATE, "age": AGE, "job": JOB}
    parts = []
    for column in columns:
        label = "last line" if column == "last" else column
        parts.append(label.rjust(AGE) if column == "age" else label.ljust(widths.get(column, 0)))
    return clip(" ".join(parts).rstrip(), width)


def session_parts(row: SessionRow, columns: tuple[str, ...], width: int) -> list[Part]:
    parts: list[Part] = []
    used = 0
    for column in columns:
        if used:
            parts.append((" ", ""))
            used += 1
        if column == "role":
            parts.append((clip(row.role, ROLE).ljust(ROLE), "bold"))
            used += ROLE
        elif column == "name":
            parts.append((clip(row.name, NAME).ljust(NAME), "dim"))
            used += NAME
        elif column == "state":
            style = STATE_STYLES.get(row.state, ("", ""))[1]
            parts.append((clip(state_word(row.state), STATE).ljust(STATE), style))
            used += STATE
        elif column == "age":
            age = duration(row.age_s) if row.age_s is not None else ""
            parts.append((age.rjust(AGE), ""))
            used += AGE
        elif column == "job":
            parts.append((clip(row.job or "-", JOB).ljust(JOB), "dim"))
            used += JOB
        elif column == "last":
            parts.append((clip(row.last_line, width - used), ""))
            used = width
    return parts


# -- commands ---------------------------------------------------------------------------------

STATUS_STYLES = {
    "pending": "yellow",
    "processing": "cyan",
    "completed": "green",
    "failed": "red",
    "done": "green",
}


@dataclass(frozen=True)
class CommandRow:
    key: str
    at: datetime
    what: str
    status: str
    detail: str = ""


def command_parts(row: CommandRow, width: int, time_format: str) -> list[Part]:
    """Time, what, status and a short detail, composed to `width`."""
    parts: list[Part] = [(row.at.astimezone().strftime(time_format) + " ", "dim")]
    rest = width - 9
    what = clip(row.what, min(max(rest - 8, 6), 22))
    parts.append((what + " ", ""))
    rest -= len(what) + 1
    if row.status:
        status = clip(row.status, max(rest, 0))
        parts.append((status, STATUS_STYLES.get(row.status, "")))
        rest -= len(status)
    if row.detail and rest > 4:
        parts.append((" " + clip(row.detail, rest - 1), "dim"))
    return parts


# -- questions --------------------------------------------------------------------------------

NO_QUESTIONS = "no pending questions"


def question_line_parts(role: str, question: str) -> list[Part]:
    """A question in the inbox's list."""
    return [(f"{plain(role, one_line=True)} ", "bold"), (plain(question), "")]


def question_detail_parts(
    role: str, question: str, question_type: str, options: list[str]
) -> list[Part]:
    """The selected question in full below the list: its text, then how to answer."""
    parts: list[Part] = [(f"{plain(role, one_line=True)} asks: ", "bold"), (plain(question), "")]
    parts.append(("\n", ""))
    if question_type == "text":
        parts.append(("Enter: type the answer", "dim"))
    elif question_type == "confirm":
        parts += [("y", "bold"), (" yes   ", ""), ("n", "bold"), (" no", "")]
    else:
        for number, option in enumerate(options, 1):
            parts += [(f"{number} ", "bold"), (plain(option, one_line=True) + "\n", "")]
        if parts and parts[-1][0].endswith("\n"):
            parts[-1] = (parts[-1][0][:-1], parts[-1][1])
    return parts


# -- the key bar ------------------------------------------------------------------------------

#: lower first: what stays when the width runs out
PRIORITY = {
    "detach": 0,
    "keys_help": 1,
    "command_palette": 2,
    "back": 2,
    "pick": 3,
    "questions": 3,
    "create_job": 3,
    "cancel_job": 4,
    "cycle_layout": 4,
    "prompt": 5,
    "jobs": 6,
    "cancel": 7,
    "zoom": 8,
}
PANE_KEYS = [  # (key after the prefix, what, priority)
    ("d", "detach", 0),
    ("?", "keys", 1),
    ("z", "zoom", 2),
    ("n/p", "next/prev", 3),
    ("q", "questions", 4),
    (":", "palette", 5),
    ("[", "scroll", 6),
    ("o", "out", 7),
    ("j", "jobs", 8),
]
SCROLL_KEYS = [
    ("arrows PgUp PgDn Home End", "move", 1),
    ("q", "live view", 0),
]
KEY_STYLE = "bold #ffa62b"
DETACH_KEY = "ctrl+q"
#: the main screen's keys the key bar shows (the screen's bindings are made from these):
#: key, action, description
MAIN_KEYS = [
    ("f1", "keys_help", "Keys"),
    ("f2", "cycle_layout", "Layout"),
    ("f3", "zoom", "Zoom"),
    ("f4", "questions", "Questions"),
    ("f5", "jobs", "Jobs"),
    ("f6", "prompt", "Prompt"),
    ("f8", "cancel", "Cancel"),
]
SESSION_LIST_HINTS = [("Enter", "type in pane", 2.5)]


class Hint(NamedTuple):
    key: str
    what: str
    priority: float


def key_display(key: str) -> str:
    """A key as the bar shows it: F1, ^q."""
    if key.startswith("f") and key[1:].isdigit():
        return key.upper()
    return "^" + key.removeprefix("ctrl+") if key.startswith("ctrl+") else key


def fit_parts(hints: list[Hint], width: int, lead: str = "") -> list[Part]:
    """As many hints as fit in `width` cells, the most important first, in their order."""
    lead = lead.rstrip()
    used = len(lead)
    kept: set[int] = set()
    for index in sorted(range(len(hints)), key=lambda i: (hints[i].priority, i)):
        size = len(hints[index].key) + 1 + len(hints[index].what) + (1 if used else 0)
        if used + size <= width:
            kept.add(index)
            used += size
    parts: list[Part] = [(lead, "bold")] if lead else []
    for index, hint in enumerate(hints):
        if index in kept:
            if parts:
                parts.append((" ", ""))
            parts += [(hint.key, KEY_STYLE), (" " + hint.what, "")]
    return parts


def main_screen_hints(detach_key: str = DETACH_KEY) -> list[Hint]:
    """The key bar of the main screen with the session list focused (what a console opens on)."""
    hints = [Hint(*hint) for hint in SESSION_LIST_HINTS]
    app_keys = [(detach_key, "detach", "Detach"), ("ctrl+p", "command_palette", "Palette")]
    for key, action, what in [*MAIN_KEYS, *app_keys]:
        hints.append(Hint(key_display(key), what, PRIORITY.get(action, 5) + len(hints) / 100))
    return hints
