"""What the console's panels say, as (text, style) parts, without Textual or Rich.

The widgets turn the parts into Rich `Text` (semo/console/widgets/); the first frame, painted before
Textual has loaded (semo/console/first_frame.py), turns the same parts into ANSI. One place decides
what a session row, a question or the key bar reads, so the two frames cannot drift apart.
A style is a Rich style string from a small vocabulary: "bold", "dim", colour names, and
"#rrggbb".
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from semo.console.attention import needs_operator
from semo.console.widgets.badges import STATE_STYLES, clip, duration, state_word
from semo.engine.control.views import last_line
from semo.engine.plain_text import plain

Part = tuple[str, str]

ROLE = 8
NAME = 3
STATE = 9
AGE = 3
JOB = 8


UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)
#: how many characters of an id the console shows (and the CLI accepts as a prefix)
SHORT_ID = 8


def short_ids(text: str) -> str:
    """`text` with every UUID cut to its first SHORT_ID characters: what the console shows
    of an id (an error from the store names rows by their full id)."""
    return UUID.sub(lambda match: match.group()[:SHORT_ID], text)


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


def opening_selection(
    order: list[str], states: dict[str, str], asker: str | None = None
) -> str | None:
    """The session a console selects when it opens (or when its selected session ends): the
    one that asked the inbox's oldest question (`asker`, the inbox drives the pane), else the
    first in `order` that needs the operator, else the first at work (the demo's FE with its
    job, not BE idle first by role), else the first."""
    if asker in order:
        return asker
    needing = [sid for sid in order if needs_operator(states.get(sid, ""))]
    working = [sid for sid in order if states.get(sid) == "executing"]
    first = needing or working or order
    return first[0] if first else None


def session_names(
    sessions: Iterable[tuple[str, str]], known: dict[str, str] | None = None
) -> dict[str, str]:
    """A short name per session, in role order: #1, #2... among the sessions of its role. A
    session in `known` keeps its name (a name never changes while the session lives); a new
    one takes the lowest number its role has free."""
    names: dict[str, str] = {}
    pairs = list(sessions)
    taken: dict[str, set[str]] = {}
    for session_id, role in pairs:
        if known and session_id in known:
            names[session_id] = known[session_id]
            taken.setdefault(role, set()).add(known[session_id])
    for session_id, role in pairs:
        if session_id not in names:
            used = taken.setdefault(role, set())
            number = next(n for n in range(1, len(pairs) + 2) if f"#{n}" not in used)
            names[session_id] = f"#{number}"
            used.add(names[session_id])
    return names


def screen_last_line(screen: object) -> str:
    """`last_line` of a session's screen (a terminal screen, or anything with `display`)."""
    rows = screen.text_rows() if hasattr(screen, "text_rows") else getattr(screen, "display", [])
    return last_line(list(rows))


def asked_line(question: str) -> str:
    """An asking session's last line in the list: its question, on one line."""
    return "asks: " + plain(" ".join(question.split()), one_line=True)


def with_agent_name(number: str, role: str, agent_name: str | None) -> str:
    """A session's name as the operator reads it: `#1`, or `#1 Ada` when its agent has a name
    of its own in semo.toml (not only its role)."""
    own = plain(agent_name or "", one_line=True).strip()
    return f"{number} {own}" if own and own != role else number


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
    "failed": "bold red",
    "done": "green",
    "cancelled": "yellow",
    "needs_review": "yellow",
}


@dataclass(frozen=True)
class CommandRow:
    key: str
    at: datetime
    what: str
    status: str
    detail: str = ""


def command_row(
    command_id: str,
    at: datetime,
    command_type: str,
    status: str,
    outcome: str,
    payload: object = None,
    job_roles: dict[str, str] | None = None,
) -> CommandRow:
    """A command as the commands panel shows it. A run_job command is its job: "FE job
    1a2b3c4d" (the role when the console knows it), the job's status rather than the
    command's (a job that failed is a command that completed), and why it failed."""
    if command_type != "run_job":
        return CommandRow(command_id, at, command_type, status, outcome)
    job_id = str(payload.get("job_id") or "") if isinstance(payload, dict) else ""
    role = (job_roles or {}).get(job_id, "")
    what = plain(f"{role} job {job_id[:SHORT_ID]}".strip(), one_line=True)
    word, _, reason = outcome.partition(": ")
    if status == "completed" and word in ("done", "failed", "cancelled", "needs_review"):
        return CommandRow(command_id, at, what, word, reason)
    return CommandRow(command_id, at, what, status, outcome)


#: how the commands panel names a routing step (semo.engine.events.RoutingStep.step)
ROUTING_WORDS = {
    "question_asked": "asked you",
    "question_answered": "got answer",
    "permission_asked": "asks permission",
    "permission_decided": "permission",
    "invoked": "invokes",
    "invocation_sent": "got task",
    "result_created": "result",
    "result_delivered": "got result",
    "invoke_refused": "refused",
    "result_refused": "refused",
    "malformed": "malformed",
    "store_refused": "not stored",
    "over_budget": "over budget",
}


def step_what(role: str, step: str) -> str:
    """ "FE asked you": a routing step as the commands panel names it."""
    return f"{role} {ROUTING_WORDS.get(step, step.replace('_', ' '))}"


def snapshot_step_rows(steps: Iterable[object]) -> list[CommandRow]:
    """The office snapshot's routing steps (semo.engine.control.views.step_view) as the commands
    panel's rows, newest first: what a console that attaches shows of the steps it did not
    see. A step with a missing or wrong field is left out."""
    rows: list[CommandRow] = []
    for step in steps:
        if not isinstance(step, dict):
            continue
        try:
            at = datetime.fromisoformat(str(step["at"]))
            what = step_what(plain(str(step["role"]), one_line=True), str(step["step"]))
            key, detail = str(step["key"]), plain(str(step.get("detail") or ""), one_line=True)
        except (KeyError, TypeError, ValueError):
            continue
        rows.append(CommandRow(key, at, what, "", detail))
    return sorted(rows, key=lambda row: row.at, reverse=True)


#: below this width the time shows hours and minutes only (the sidebar at 80 columns)
FULL_TIME_WIDTH = 36
#: a detail this short is a word (an answer, "ok"): left out whole rather than cut
SHORT_DETAIL = 16


def command_parts(row: CommandRow, width: int, time_format: str) -> list[Part]:
    """Time, what, status and a short detail, composed to `width`. What gives way first: the
    time's seconds (narrow panels), a detail that does not fit (a short one is left out, a long
    one is cut), then the time; `what` and the status are cut only when they alone do not
    fit."""
    time = row.at.astimezone().strftime(time_format)
    if width < FULL_TIME_WIDTH:
        time = time[:5]
    what = plain(row.what, one_line=True)
    status = plain(row.status, one_line=True)
    core = len(what) + (1 + len(status) if status else 0)
    parts: list[Part] = []
    rest = width
    if core + len(time) + 1 <= width:
        parts.append((time + " ", "dim"))
        rest -= len(time) + 1
    shown = clip(what, max(rest - (1 + len(status) if status else 0), min(len(what), 6)))
    parts.append((shown, ""))
    rest -= len(shown)
    if status and rest > 1:
        status = clip(status, rest - 1)
        parts += [(" ", ""), (status, STATUS_STYLES.get(row.status, ""))]
        rest -= len(status) + 1
    detail = plain(row.detail, one_line=True)
    if detail and (len(detail) + 1 <= rest or (len(detail) > SHORT_DETAIL and rest > 8)):
        parts.append((" " + clip(detail, rest - 1), "dim"))
    return parts


# -- questions --------------------------------------------------------------------------------

NO_QUESTIONS = "no pending questions"


#: how the inbox marks a permission request (a question of type permission)
PERMISSION_MARK = "permission "


def question_line_parts(role: str, question: str, question_type: str = "") -> list[Part]:
    """A question in the inbox's list (a permission request marked as one)."""
    mark = [(PERMISSION_MARK, "bold yellow")] if question_type == "permission" else []
    return [(f"{plain(role, one_line=True)} ", "bold"), *mark, (plain(question), "")]


def question_text_parts(role: str, question: str, question_type: str = "") -> list[Part]:
    """The selected question's text: who asks, what (it scrolls when it cannot fit)."""
    verb = "asks permission for" if question_type == "permission" else "asks"
    return [(f"{plain(role, one_line=True)} {verb}: ", "bold"), (plain(question), "")]


def question_answer_parts(question_type: str, options: list[str]) -> list[Part]:
    """How to answer the selected question: every option on a line, y/n, or Enter."""
    parts: list[Part] = []
    if question_type == "text":
        parts.append(("Enter: type the answer", "dim"))
    elif question_type == "confirm":
        parts += [("y", "bold"), (" yes   ", ""), ("n", "bold"), (" no", "")]
    elif question_type == "permission":
        for number, option in enumerate(options, 1):
            parts += [(f"{number} ", "bold"), (plain(option, one_line=True), ""), ("\n", "")]
        parts.append(("Enter: deny with a reason for the agent", "dim"))
    else:
        for number, option in enumerate(options, 1):
            if parts:
                parts.append(("\n", ""))
            parts += [(f"{number} ", "bold"), (plain(option, one_line=True), "")]
    return parts


def question_key_hints(question_type: str | None, options: int) -> list[tuple[str, str, float]]:
    """The key bar's hints for the selected question: none without one, else its own keys."""
    if question_type is None:
        return []
    typed = ("Enter", "type answer", 2.5)
    if question_type == "text":
        return [("Enter", "type answer", 0.5)]
    if question_type == "confirm":
        return [("y/n", "answer", 0.5), typed]
    numbers = "1" if options == 1 else f"1-{min(options, 9)}"
    if question_type == "permission":
        return [(numbers, "decide", 0.5), ("Enter", "deny with reason", 2.5)]
    return [(numbers, "answer", 0.5), typed]


#: the inbox lists at most this many questions at once (the list scrolls)
INBOX_LIST_ROWS = 4


def inbox_rows(room: int, listed: int, text: int, answer: int) -> tuple[int, int]:
    """Rows for the inbox's list and for the selected question's text when the inbox has
    `room` rows inside its border and needs `listed` list rows, `text` rows of question and
    `answer` rows of options: the options always whole; then the text, whole if it can be with
    the list down to one row; else the text scrolls in what is left (at least a row)."""
    listed = min(listed, INBOX_LIST_ROWS)
    if listed + text + answer <= room:
        return listed, text
    spare = max(room - answer, 0)
    list_rows = min(listed, max(1, spare - text)) if listed else 0
    return list_rows, max(spare - list_rows, 1)


# -- the key bar ------------------------------------------------------------------------------

#: lower first: what stays when the width runs out
PRIORITY = {
    "detach": 0,
    "keys_help": 1,
    "command_palette": 2,
    "back": 2,
    "pick": 3,
    "questions": 3,
    "attend": 3,
    "create_job": 3,
    "cancel_job": 4,
    "cycle_layout": 4,
    "prompt": 5,
    "jobs": 6,
    "cancel": 7,
    "zoom": 8,
    "pool": 6,
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
    ("a", "attend", 9),
]
SCROLL_KEYS = [
    ("arrows PgUp PgDn Home End", "move", 1),
    ("q", "live view", 0),
]
KEY_STYLE = "bold #ffa62b"
#: the same on a 16-colour terminal, where #ffa62b comes out bright red (semo.console.colours)
KEY_STYLE_16 = "bold yellow"
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
    ("f7", "attend", "Next need"),
    ("f8", "cancel", "Cancel"),
    ("f9", "pool", "Pool"),
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
