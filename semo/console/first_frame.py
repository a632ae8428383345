"""The console's first frame, painted in plain ANSI from the engine's snapshot.

How it works: docs/CONSOLE.md, "The first frame".
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from math import ceil
from typing import Any

from semo.console.attention import attention, attention_order, header_title, shown_state
from semo.console.panel_text import (
    NO_QUESTIONS,
    Part,
    SessionRow,
    command_parts,
    command_row,
    fit_parts,
    inbox_rows,
    main_screen_hints,
    opening_selection,
    pane_title,
    question_answer_parts,
    question_line_parts,
    question_text_parts,
    session_columns,
    session_header,
    session_names,
    session_order,
    session_parts,
    snapshot_step_rows,
    with_agent_name,
)
from semo.engine.plain_text import plain
from semo.engine.terminal.width import char_width

# the default theme's colours (textual-dark) where the widgets' CSS uses them
BACKGROUND = "121212"
FOREGROUND = "e0e0e0"
PANEL = "24292f"
BORDER = "3c4146"
TEXT_ACCENT = "ffc473"
ACCENT = "ffa62b"
MUTED = "9e9e9e"
#: what undoes the frame's modes, and Textual's should it have begun to set them (the console
#: stopped before the app's own clean-up could run): mouse, focus and paste reports off
LEAVE_FIRST_FRAME = (
    "\x1b[0m\x1b[?1000l\x1b[?1003l\x1b[?1015l\x1b[?1006l\x1b[?1004l\x1b[?2004l\x1b[?25h\x1b[?1049l"
)
_NAMED = {"black": 0, "red": 1, "green": 2, "yellow": 3, "brown": 3, "blue": 4, "magenta": 5}
_NAMED |= {"cyan": 6, "white": 7}
#: CommandsPanel's min-height (semo/console/app.tcss): what the inbox leaves below it
COMMANDS_MIN_HEIGHT = 3
#: the question text's scrollbar (#question-text's scrollbar-size-vertical) and its glyphs
TEXT_SCROLLBAR = 1
#: the inbox list's scrollbar (OptionList keeps Textual's default, 2 columns)
LIST_SCROLLBAR = 2
SCROLLBAR = {False: "#004578 on #2b2b2b", True: "on #004578"}
_VERTICAL_BARS = "▁▂▃▄▅▆▇ "
_FLAG_SGR = ((1, "1"), (2, "3"), (4, "4"), (8, "9"), (16, "7"), (32, "5"), (64, "2"))


@dataclass(frozen=True)
class Box:
    x: int
    y: int
    width: int
    height: int


def selected_session(snapshot: dict[str, Any]) -> list[str]:
    """The session whose screen the first frame shows (as a list, for `Preconnect`'s pick):
    the one a console selects when it opens (panel_text.opening_selection)."""
    order, states = _order(snapshot)
    selected = opening_selection(order, states, _asker(snapshot))
    return [selected] if selected is not None else []


def _states(snapshot: dict[str, Any]) -> dict[str, str]:
    """Each session's state as the list shows it (a stale one: "stale")."""
    return {
        s["session_id"]: shown_state(str(s.get("state") or ""), stale=s.get("stale") is True)
        for s in _session_rows(snapshot)
    }


def _order(snapshot: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """The session list's order (those that need the operator first) and the states."""
    states = _states(snapshot)
    return attention_order(session_order(_live(snapshot)), states, "attention"), states


def _questions(snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    """The pending questions, the oldest first (the inbox's order)."""
    questions = [q for q in snapshot.get("questions") or [] if isinstance(q, dict)]
    return sorted(questions, key=lambda q: str(q.get("created_at")))


def _asker(snapshot: dict[str, Any]) -> str | None:
    """The session of the oldest pending question: the inbox selects it, the pane shows it."""
    questions = _questions(snapshot)
    return str(questions[0].get("session_id")) if questions else None


def paint(
    snapshot: dict[str, Any],
    screens: dict[str, dict[str, Any]],
    size: tuple[int, int],
    detach_key: str,
    time_format: str = "%H:%M:%S",
) -> str:
    """The whole frame for a terminal of `size` (columns, rows): enter the alternate screen,
    hide the cursor, draw every cell. `screens`: the attach's first frame of the sessions
    `listed_sessions` named (a session without one: an empty pane, no last line)."""
    cols, rows = size
    out = _Canvas(cols, rows)
    body_height = rows - 2
    sidebar = min(max(int(cols * 0.36), 32), 72)
    live = _live(snapshot)
    order, states = _order(snapshot)
    roles = dict(live)
    names = session_names((sid, roles[sid]) for sid in session_order(live))
    sessions = {s["session_id"]: s for s in _session_rows(snapshot)}
    selected = opening_selection(order, states, _asker(snapshot))
    questions = _questions(snapshot)

    office = plain(str(snapshot.get("name") or "?"), one_line=True)
    subtitle = f"{office} · {snapshot.get('backend') or '?'} · {snapshot.get('connection') or '?'}"
    title = header_title("semo", attention(len(questions), states.values()))
    out.header(f"{title} — {plain(subtitle, one_line=True)} · 1 pane")

    # the sidebar: sessions (as tall as its rows, at most 45 %), questions, commands
    # a DataTable of auto height: its header, a line per session and one blank line
    session_box = Box(0, 1, sidebar, min(max(len(order) + 4, 4), int(body_height * 0.45)))
    pool = snapshot.get("pool") or {}
    pooled = pool.get("sessions") or {}
    width = sidebar - 3
    columns = session_columns(width)
    lines: list[list[Part]] = [[(session_header(columns, width), "bold")]]
    for session_id in order:
        info = pooled.get(session_id) or {}
        task = str(info.get("task_id") or "")
        row = SessionRow(
            session_id=session_id,
            name=names[session_id],
            role=roles[session_id],
            state=states[session_id],
            age_s=info.get("age_s"),
            job=task.removeprefix("job-")[:6] if task else None,
            last_line=str(sessions[session_id].get("last_line") or ""),
        )
        lines.append(session_parts(row, columns, width))
    down = pool.get("down") or []
    pool_text = f"{pool.get('total', 0)}/{pool.get('max_sessions', 0)}" if pool else ""
    pool_text += f" · {', '.join(map(str, down))} down" if down else ""
    out.box(session_box, "Sessions", pool_text, lines, TEXT_ACCENT, focused=True)

    agents = snapshot.get("agents") or {}
    agent_roles = {str(a.get("id")): role for role, a in agents.items() if isinstance(a, dict)}
    # the inbox as QuestionsPanel._fit lays it out: the room the sidebar leaves it (the
    # commands panel below keeping its minimum, 3), split by panel_text.inbox_rows
    room = body_height - 2 - session_box.height - COMMANDS_MIN_HEIGHT
    inner = sidebar - 2
    question_lines: list[list[Part]] = []
    more = False
    if questions:
        first = questions[0]
        role = agent_roles.get(str(first.get("agent_id")), "?")
        kind = str(first.get("question_type") or "")
        text = question_text_parts(role, str(first.get("question") or ""), kind)
        answer = _wrap(
            question_answer_parts(
                str(first.get("question_type") or ""),
                [str(option) for option in first.get("options") or []],
            ),
            inner,
        )
        needed = len(_wrap(text, inner))
        list_rows, text_rows = inbox_rows(room, len(questions), needed, len(answer))
        # more questions than rows: the list's scrollbar (OptionList's, 2 columns) beside them
        list_bar = _scrollbar(list_rows, len(questions)) if len(questions) > list_rows else []
        list_width = inner - (LIST_SCROLLBAR if list_bar else 0)
        for index, question in enumerate(questions[:list_rows]):
            role = agent_roles.get(str(question.get("agent_id")), "?")
            line = _ellipsis(
                question_line_parts(
                    role,
                    str(question.get("question") or ""),
                    str(question.get("question_type") or ""),
                ),
                list_width,
            )
            if list_bar:
                glyph, thumb = list_bar[index]
                line = [*_padded(line, list_width), (glyph * LIST_SCROLLBAR, SCROLLBAR[thumb])]
            question_lines.append(line)
        if text_rows < needed:  # the text scrolls: a scrollbar beside it, at its top
            more = True
            shown = _wrap(text, inner - TEXT_SCROLLBAR)
            bar = _scrollbar(text_rows, len(shown))
            width = inner - TEXT_SCROLLBAR
            for text_row, (glyph, thumb) in zip(shown, bar, strict=False):
                question_lines.append([*_padded(text_row, width), (glyph, SCROLLBAR[thumb])])
        else:
            question_lines += _wrap(text, inner)
        question_lines += answer
    else:
        question_lines.append([(NO_QUESTIONS, "dim")])
    question_box = Box(
        0, session_box.y + session_box.height, sidebar, max(len(question_lines) + 2, 5)
    )
    pending = f"{len(questions)} pending" if questions else ""
    pending += " · PgDn: more" if more else ""
    out.box(question_box, "Questions", pending, question_lines, TEXT_ACCENT)

    top = question_box.y + question_box.height
    command_box = Box(0, top, sidebar, max(rows - 1 - top, 3))
    results = snapshot.get("results") or {}
    commands = [
        command_row(
            str(command.get("id")),
            _when(command.get("created_at")),
            str(command.get("command_type") or ""),
            str(command.get("status") or ""),
            str(results.get(command.get("id"), "")),
            command.get("payload"),
        )
        for command in snapshot.get("commands") or []
    ]
    commands += snapshot_step_rows(snapshot.get("steps") or [])
    commands.sort(key=lambda c: c.at, reverse=True)
    command_lines = [command_parts(c, width, time_format) for c in commands[:20]]
    out.box(command_box, "Commands", "", command_lines, TEXT_ACCENT)

    # the selected session's pane
    pane = Box(sidebar, 1, cols - sidebar, body_height)
    title = ""
    if selected is not None:
        shown_row = sessions[selected]
        agent = (snapshot.get("agents") or {}).get(roles[selected]) or {}
        title = pane_title(
            roles[selected],
            with_agent_name(names[selected], roles[selected], str(agent.get("name") or "")),
            states.get(selected, ""),
            int(shown_row.get("queued") or 0),
        )
    out.box(pane, title, "", [], FOREGROUND)
    if selected in screens:
        out.screen(Box(pane.x + 1, pane.y + 1, pane.width - 2, pane.height - 2), screens[selected])

    out.key_bar(fit_parts(main_screen_hints(detach_key), cols - 2))
    return out.text()


def _runs(text: str, flat: list[Any]) -> list[Part]:
    """A styled row's text cut at its runs; a run's style is its id after a NUL."""
    parts: list[Part] = []
    pos = 0
    for i in range(0, len(flat) - 2, 3):
        start, end, style_id = int(flat[i]), int(flat[i + 1]), str(flat[i + 2])
        if start > pos:
            parts.append((text[pos:start], ""))
        parts.append((text[max(start, pos) : end], f"\x00{style_id}"))
        pos = max(end, pos)
    parts.append((text[pos:], ""))
    return parts


def _session_rows(snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    """The snapshot's live sessions (a row without an id is left out)."""
    return [
        s
        for s in snapshot.get("sessions") or []
        if isinstance(s, dict) and isinstance(s.get("session_id"), str) and not s.get("ended")
    ]


def _live(snapshot: dict[str, Any]) -> list[tuple[str, str]]:
    return [(s["session_id"], str(s.get("role") or "")) for s in _session_rows(snapshot)]


def _when(value: object) -> datetime:
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return datetime.min.replace(tzinfo=datetime.now().astimezone().tzinfo)


def _split_lines(parts: list[Part]) -> list[list[Part]]:
    lines: list[list[Part]] = [[]]
    for text, style in parts:
        pieces = text.split("\n")
        for index, piece in enumerate(pieces):
            if index:
                lines.append([])
            if piece:
                lines[-1].append((piece, style))
    return lines


_WORD = re.compile(r"\s*\S+\s*")


def _wrap(parts: list[Part], width: int) -> list[list[Part]]:
    """`parts` as a Static `width` columns wide shows them: each line cut where Rich's
    divide_line cuts it (Textual's Content wraps with it): a word, with the blanks before
    it, goes to the next row when it does not fit without its trailing blanks; a word wider
    than a row is folded."""
    width = max(width, 1)
    rows: list[list[Part]] = []
    for line in map(_expand_tabs, _split_lines(parts)):
        text = "".join(piece for piece, _style in line)
        breaks: list[int] = []
        used = 0
        for match in _WORD.finditer(text):
            start, word = match.start(), match.group()
            size = _cells(word.rstrip())
            if size <= width - used:
                used += _cells(word)
            elif size > width:  # folded: each row as many characters as fit
                pieces = _fold(word, width)
                for piece in pieces:
                    if start:
                        breaks.append(start)
                    start += len(piece)
                used = _cells(pieces[-1])
            elif used and start:
                breaks.append(start)
                used = _cells(word)
        rows += _cut(line, breaks)
    return rows


def _expand_tabs(line: list[Part]) -> list[Part]:
    """Tabs as blanks to the next multiple of 8 columns, as Textual expands them before
    wrapping: columns are cells, or characters on a line without a style (str.expandtabs)."""
    expanded: list[Part] = []
    column = 0
    styled = any(style for text, style in line if text)
    for text, style in line:
        pieces = []
        for char in text:
            if char == "\t":
                pieces.append(" " * (8 - column % 8))
                column += 8 - column % 8
            else:
                pieces.append(char)
                column += max(char_width(char), 0) if styled else 1
        expanded.append(("".join(pieces), style))
    return expanded


def _fold(word: str, width: int) -> list[str]:
    pieces: list[str] = [""]
    used = 0
    for char in word:
        size = max(char_width(char), 0)
        if used + size > width and pieces[-1]:
            pieces.append("")
            used = 0
        pieces[-1] += char
        used += size
    return pieces


def _cut(line: list[Part], breaks: list[int]) -> list[list[Part]]:
    """`line` cut at the character offsets `breaks` (a row but the last loses its trailing
    blanks, as Textual's rows do)."""
    rows: list[list[Part]] = [[]]
    position = 0
    edges = [*breaks, -1]
    for text, style in line:
        while text:
            room = edges[0] - position if edges[0] >= 0 else len(text)
            if room <= 0:
                edges.pop(0)
                rows.append([])
                continue
            piece, text = text[:room], text[room:]
            rows[-1].append((piece, style))
            position += len(piece)
    while edges[0] >= 0:  # breaks at the very end (none in practice)
        edges.pop(0)
        rows.append([])
    for row in rows[:-1]:
        while row and not row[-1][0].rstrip():
            row.pop()
        if row:
            row[-1] = (row[-1][0].rstrip(), row[-1][1])
    return rows


def _ellipsis(parts: list[Part], width: int) -> list[Part]:
    """`parts` cut to `width` cells, the last cell an ellipsis when something was cut (as
    the inbox's list, text-overflow: ellipsis, shows a row that is too long)."""
    if sum(_cells(_safe(text)) for text, _style in parts) <= width:
        return parts
    return [*_padded(parts, width - 1), ("…", parts[-1][1] if parts else "")]


def _padded(parts: list[Part], width: int) -> list[Part]:
    """`parts` cut or padded to exactly `width` cells."""
    kept: list[Part] = []
    room = width
    for text, style in parts:
        text = _clip(_safe(text), room)
        room -= _cells(text)
        if text:
            kept.append((text, style))
    return [*kept, (" " * room, "")] if room > 0 else kept


def _scrollbar(size: int, virtual: int) -> list[tuple[str, bool]]:
    """A vertical scrollbar of `size` rows over `virtual` rows, scrolled to the top, as
    Textual's ScrollBarRender draws it: (glyph, on the thumb) per row."""
    bars = len(_VERTICAL_BARS)
    if not (size and virtual and size != virtual):
        return [(" ", False)] * size
    thumb = max(1, size / (virtual / size))
    end = ceil(thumb * bars)
    end_index, end_bar = divmod(end, bars)
    rows = [(" ", index < end_index) for index in range(size)]
    if end_index < size and _VERTICAL_BARS[bars - 1 - end_bar] != " ":
        rows[end_index] = (_VERTICAL_BARS[bars - 1 - end_bar], True)
    return rows


def _cells(text: str) -> int:
    return len(text) if text.isascii() else sum(max(char_width(c), 0) for c in text)


def _clip(text: str, width: int) -> str:
    """`text` cut to `width` cells (a wide character that would straddle the edge left out)."""
    if _cells(text) <= width:
        return text
    kept, used = [], 0
    for char in text:
        size = max(char_width(char), 0)
        if used + size > width:
            break
        kept.append(char)
        used += size
    return "".join(kept)


def _safe(text: str) -> str:
    return plain(text, one_line=True)


def _colour(name: str, background: bool) -> str:
    if name == "default":
        return f"{48 if background else 38};2;{_rgb(BACKGROUND if background else FOREGROUND)}"
    base = 40 if background else 30
    if name in _NAMED:
        return str(base + _NAMED[name])
    if name.startswith("bright") and name[6:] in _NAMED:
        return str(base + 60 + _NAMED[name[6:]])
    if len(name) == 6:
        try:
            int(name, 16)
        except ValueError:
            return _colour("default", background)
        return f"{48 if background else 38};2;{_rgb(name)}"
    return _colour("default", background)


def _rgb(hex_colour: str) -> str:
    return ";".join(str(int(hex_colour[i : i + 2], 16)) for i in (0, 2, 4))


def _style_sgr(style: str) -> str:
    """A Rich style string of the panels' vocabulary as SGR parameters."""
    codes = []
    background = False  # after "on": the background's colour
    for word in style.split():
        if word == "on":
            background = True
        elif word == "bold":
            codes.append("1")
        elif word == "dim":
            codes.append("2")
        elif word.startswith("#") and len(word) == 7:
            codes.append(f"{48 if background else 38};2;{_rgb(word[1:])}")
        elif word in _NAMED:
            codes.append(str((40 if background else 30) + _NAMED[word]))
    return ";".join(codes)


class _Canvas:
    """The frame as escape sequences, every region drawn at its absolute position."""

    def __init__(self, cols: int, rows: int) -> None:
        self.cols, self.rows = cols, rows
        base = f"\x1b[0;38;2;{_rgb(FOREGROUND)};48;2;{_rgb(BACKGROUND)}m"
        self.base = base
        # alternate screen, no cursor, the whole screen in the app's background
        self.out = ["\x1b[?1049h\x1b[?25l", base, "\x1b[2J"]

    def text(self) -> str:
        return "".join(self.out) + "\x1b[0m"

    def at(self, x: int, y: int) -> None:
        self.out.append(f"\x1b[{y + 1};{x + 1}H")

    def write(
        self,
        parts: list[Part],
        width: int,
        base: str | None = None,
        opener: Callable[[str], str] | None = None,
    ) -> None:
        """`parts` clipped and padded to `width` cells; `opener` gives the escape sequence
        that starts a part's style ("" for none; default: the panels' style words)."""
        base = base or self.base
        if opener is None:
            opener = lambda style: f"{base}\x1b[{sgr}m" if (sgr := _style_sgr(style)) else ""  # noqa: E731
        used = 0
        for text, style in parts:
            text = _clip(_safe(text), width - used)
            if not text:
                continue
            start = opener(style)
            self.out.append(f"{start}{text}{base}" if start else text)
            used += _cells(text)
        if used < width:
            self.out.append(" " * (width - used))

    def header(self, title: str) -> None:
        header = f"\x1b[0;38;2;{_rgb(FOREGROUND)};48;2;{_rgb(PANEL)}m"
        self.at(0, 0)
        # Textual's Header: the icon 8 cells on the left, 10 kept free on the right, the title
        # centred between them
        title = _clip(title, self.cols - 18)
        line = " *".ljust(8 + (self.cols - 18 - _cells(title)) // 2) + title
        self.out.append(header + line + " " * max(self.cols - _cells(line), 0) + self.base)

    def box(
        self,
        box: Box,
        title: str,
        subtitle: str,
        lines: list[list[Part]],
        title_colour: str,
        *,
        focused: bool = False,
    ) -> None:
        if box.width < 4 or box.height < 2 or box.y + box.height > self.rows:
            return
        border = f"\x1b[38;2;{_rgb(ACCENT if focused else BORDER)}m"
        inner = box.width - 2
        title = _clip(_safe(title), max(inner - 4, 0))
        top = f"─ {title} " if title else ""
        self.at(box.x, box.y)
        self.out.append(f"{border}╭{top[:2]}\x1b[38;2;{_rgb(title_colour)}m{top[2:]}{border}")
        self.out.append("─" * (inner - _cells(top)) + "╮" + self.base)
        for index in range(box.height - 2):
            self.at(box.x, box.y + 1 + index)
            self.out.append(f"{border}│{self.base}")
            self.write(lines[index] if index < len(lines) else [], inner)
            self.at(box.x + box.width - 1, box.y + 1 + index)
            self.out.append(f"{border}│{self.base}")
        subtitle = _clip(_safe(subtitle), max(inner - 4, 0))
        bottom = f" {subtitle} ─" if subtitle else ""
        self.at(box.x, box.y + box.height - 1)
        self.out.append(f"{border}╰" + "─" * (inner - _cells(bottom)))
        self.out.append(f"\x1b[38;2;{_rgb(MUTED)}m{bottom[:-1]}{border}{bottom[-1:]}╯{self.base}")

    def screen(self, box: Box, frame: dict[str, Any]) -> None:
        """The attach's first frame: rows as text with style runs (semo/engine/control/wire.py)."""
        styles = frame.get("styles") or {}
        rows = frame.get("rows") or {}
        for y in range(box.height):
            value = rows.get(str(y), "")
            self.at(box.x, box.y + y)
            if isinstance(value, str):
                self.write([(value, "")], box.width)
                continue
            try:
                parts = _runs(str(value[0]), list(value[1]))
            except (ValueError, TypeError, IndexError):  # not a row: its text, if it has one
                parts = [(str(value[0]) if isinstance(value, list) and value else "", "")]
            self._styled_row(parts, styles, box.width)

    def _styled_row(self, parts: list[Part], styles: dict[str, Any], width: int) -> None:
        def opener(style: str) -> str:
            definition = styles.get(style[1:]) if style else None
            if not definition:
                return ""
            fg, bg, flags = str(definition[0]), str(definition[1]), int(definition[2])
            codes = [_colour(fg, False), _colour(bg, True)]
            codes += [code for bit, code in _FLAG_SGR if flags & bit]
            return f"\x1b[0;{';'.join(codes)}m"

        self.write(parts, width, opener=opener)

    def key_bar(self, parts: list[Part]) -> None:
        bar = f"\x1b[0;38;2;{_rgb(FOREGROUND)};48;2;{_rgb(PANEL)}m"
        self.at(0, self.rows - 1)
        self.out.append(bar + " ")
        self.write(parts, self.cols - 1, bar)


def terminal_size() -> tuple[int, int] | None:
    """The terminal's size, or None when stdin or stdout is no terminal (nothing is painted
    then)."""
    try:
        if not (os.isatty(0) and os.isatty(1)):
            return None
        size = os.get_terminal_size(1)
    except OSError:
        return None
    return (size.columns, size.lines) if size.columns >= 40 and size.lines >= 10 else None
