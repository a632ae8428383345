"""The one screen: sessions, questions and commands on the left, the selected session large.

How it works: docs/CONSOLE.md, "The main screen".
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from datetime import UTC, datetime
from typing import TYPE_CHECKING, ClassVar

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Horizontal, Vertical
from textual.notifications import SeverityLevel
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Header, Input, OptionList

from semo.console.attention import (
    Attention,
    attention,
    attention_order,
    header_title,
    next_need,
    shown_state,
)
from semo.console.confirm import Choose, Confirm
from semo.console.focus import focus_now
from semo.console.panel_text import (
    MAIN_KEYS,
    SHORT_ID,
    CommandRow,
    SessionRow,
    asked_line,
    command_row,
    opening_selection,
    pane_title,
    screen_last_line,
    session_names,
    session_order,
    short_ids,
    snapshot_step_rows,
    step_what,
    with_agent_name,
)
from semo.console.widgets.badges import LOST, clip, state_word
from semo.console.widgets.commands_panel import CommandsPanel
from semo.console.widgets.key_bar import KeyBar
from semo.console.widgets.prefix_catcher import PrefixCatcher
from semo.console.widgets.questions_panel import QuestionList, QuestionsPanel
from semo.console.widgets.session_list import SessionList
from semo.console.widgets.terminal_pane import TerminalPane
from semo.engine.heap import freeze_startup_heap
from semo.engine.interface import EVICTED
from semo.engine.plain_text import plain

if TYPE_CHECKING:  # an attached console imports none of these before its first frame
    from semo.engine.events import Event, JobEvent, RoutingStep, SessionStatusChanged
    from semo.engine.interface import EngineInterface, SessionHandle

log = logging.getLogger("semo.console")

LAYOUTS = (1, 2, 4, 6)
REFRESH_SECONDS = 0.5
STORE_REFRESH_SECONDS = 1.0
NOTIFY_CHARS = 300  # a toast shows the start of an agent's text; the inbox shows all of it
SCREEN_KEYS = {
    "attend",
    "keys_help",
    "cycle_layout",
    "zoom",
    "questions",
    "prompt",
    "cancel",
    "next_session",
    "back",
    "prefix",
    "jobs",
    "pool",
}


class MainScreen(Screen[None]):
    AUTO_FOCUS = "#sessions"
    # zoom is the whole terminal but the header (what needs the operator) and no footer
    ALLOW_IN_MAXIMIZED_VIEW = "Header"
    # The F-keys are priority bindings: run by the app as each key arrives, so a key typed
    # right after (F4 then 1, F6 then text: one read when typing fast) goes where the F-key
    # moved the focus (focus_now). In a focused pane check_action refuses them and the pane
    # gets them, as every key but the prefix (see TerminalPane).
    BINDINGS: ClassVar[list[BindingType]] = [
        *(Binding(key, action, what, priority=True) for key, action, what in MAIN_KEYS),
        Binding("question_mark", "keys_help", "Keys", show=False),
        Binding("n", "next_session(1)", "Next", show=False),
        Binding("p", "next_session(-1)", "Previous", show=False),
        Binding("escape", "back", show=False),
        # outside a pane Tab walks the sidebar (and the prompt line), never into a pane (Enter
        # opens the selected one); in a pane the pane takes Tab, as every key
        Binding("tab", "walk(1)", "Next panel", show=False),
        Binding("shift+tab", "walk(-1)", "Previous panel", show=False),
    ]

    def __init__(
        self,
        engine: EngineInterface,
        *,
        demo_task: bool = False,
        prefix: str | None = None,
        sort: str = "attention",
    ) -> None:
        super().__init__()
        self.engine = engine
        self.demo_task = demo_task
        self.prefix = prefix or TerminalPane.PREFIX_KEY
        self.prefix_display = prefix_display(self.prefix)
        self.panes: dict[str, TerminalPane] = {}
        self.order: list[str] = []  # session ids as the list shows them
        self.names: dict[str, str] = {}
        self.layout_size = 1
        self.zoomed: str | None = None
        self.selected: str | None = None
        self._results: dict[str, str] = {}
        self._steps: deque[CommandRow] = deque(maxlen=20)
        self._commands: list[CommandRow] = []
        self.started = False  # the engine is running and the panes are shown
        self._manual = False  # the operator picked a session: questions no longer move the view
        #: sessions whose last job failed, not looked at since: session id -> what failed
        self.failed: dict[str, str] = {}
        self.sort = sort
        self.attention = Attention()
        self.base_title = "semo"
        self._job_roles: dict[str, str] = {}  # job id -> role, from the jobs' events

    def compose(self) -> ComposeResult:
        yield Header(icon="*")
        with Horizontal(id="body"):
            with Vertical(id="sidebar"):
                yield SessionList(id="sessions")
                yield QuestionsPanel(id="questions")
                yield CommandsPanel(id="commands")
            yield Grid(id="panes", classes="layout-1")
        yield Input(
            placeholder="prompt for the selected session; Enter sends, Escape closes",
            id="prompt-input",
        )
        yield KeyBar()
        yield PrefixCatcher(self.run_prefixed, id="prefix-catcher")

    def on_mount(self) -> None:
        # outside a pane the prefix works too; a priority binding, as the F-keys, so a key
        # typed right after it reaches the catcher (check_action gives it to a focused pane)
        self._bindings.bind(self.prefix, "prefix", "Prefix", show=False, priority=True)
        self.query_one("#prompt-input").display = False
        self.query_one("#panes").loading = True
        self.title = self.base_title
        self.sub_title = "starting the engine…"
        self.start_engine()

    def tell(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
    ) -> None:
        """A toast whose text may come from an agent or the store: never markup, control
        characters made visible (semo.engine.plain_text), at most NOTIFY_CHARS characters. The same
        text while it is still shown is not repeated."""
        if len(message) > NOTIFY_CHARS:
            message = message[: NOTIFY_CHARS - 1] + "…"
        message, title = plain(message), plain(title, one_line=True)
        if any(n.message == message and n.title == title for n in self.app._notifications):
            return
        self.notify(message, title=title, severity=severity, timeout=timeout, markup=False)

    # -- the engine -----------------------------------------------------------------------------

    @work(exclusive=True, group="engine")
    async def start_engine(self) -> None:
        app = self.app
        if getattr(app, "start_engine", True):
            try:
                await self.engine.start()
            except Exception as error:
                log.exception("the engine did not start")
                self.tell(f"the engine did not start: {error}", severity="error", timeout=30)
                self.sub_title = "engine failed"
                self.query_one("#panes").loading = False
                self.call_after_refresh(self._release_input)
                return
        self.query_one("#panes").loading = False
        self.sync_panes()
        self.set_interval(REFRESH_SECONDS, self._tick_panels)
        self.set_interval(STORE_REFRESH_SECONDS, self._tick_store)
        self.listen_to_bus()
        self._seed_steps()
        self.refresh_panels()
        self.refresh_from_store()
        self.started = True
        self.call_after_refresh(self._release_input)
        # after the first complete frame: a full collection takes 40-60 ms
        self.set_timer(2.0, freeze_startup_heap)
        if self.demo_task:
            self.run_demo_job()

    def _release_input(self) -> None:
        release = getattr(self.app, "release_input", None)
        if release is not None:
            release()

    @work(group="demo")
    async def run_demo_job(self) -> None:
        await self.engine.demo_job(lambda task: self.tell(f"demo: FE got a job: {task}"))

    @work(group="bus")
    async def listen_to_bus(self) -> None:
        with self.engine.bus.subscribe() as events_:
            async for event in events_:
                self.on_engine_event(event)

    def on_engine_event(self, event: Event) -> None:
        from semo.engine.events import (  # loaded by now
            JobEvent,
            RoutingStep,
            SessionSignal,
            SessionStatusChanged,
        )

        if isinstance(event, SessionStatusChanged):
            if event.status == "terminated" and str(event.reason).startswith(EVICTED):
                self._evicted(event)
            if event.status == "terminated" or event.session_id not in self.panes:
                self.sync_panes()
            elif pane := self.panes.get(event.session_id):
                pane.set_title(self._title(event.session_id))
        elif isinstance(event, RoutingStep):
            self._routing_step(event)
        elif event.kind == "notification":
            desktop = getattr(self.app, "desktop", None)
            if desktop is not None:
                desktop.show(event.notice_kind, event.headline, event.body, event.ref)
        elif isinstance(event, JobEvent):
            self._job_roles[event.job_id] = self._role(event.agent_id)
            if event.step in ("done", "failed"):
                self._job_ended(event)
        elif isinstance(event, SessionSignal) and event.signal_kind == "stale":
            role = self._role_of(event.session_id)
            log.warning("%s is stale: %s", role, event.text)
            self.refresh_panels()

    def _evicted(self, event: SessionStatusChanged) -> None:
        """The pool ended an idle session to make room (docs/CONSOLE.md, "The pool view")."""
        who = f"{event.role or '?'} {self.names.get(event.session_id, event.session_id[:6])}"
        reason = plain(str(event.reason), one_line=True)
        log.warning("%s: %s", who, reason)
        self.tell(f"{who} {reason}", title="Session evicted", severity="warning", timeout=8)

    def _job_ended(self, event: JobEvent) -> None:
        """A job's outcome: a failed one marks its session until the operator looks at it."""
        role = self._role(event.agent_id)
        what = f"{role} job {event.job_id[:SHORT_ID]}"
        if event.step == "done":
            self.tell(f"{what} done", title="Job", timeout=4)
            return
        reason = plain(str(event.detail), one_line=True)
        if event.session_id and event.session_id in self.panes:
            self.failed[event.session_id] = f"{what} failed: {reason}"
        log.warning("%s failed: %s", what, reason)
        self.tell(f"{what} failed: {reason}", title="Job failed", severity="error")
        self.refresh_panels()

    def _seed_steps(self) -> None:
        """The routing steps an attached engine saw before this console came (its office
        snapshot), once at the start: rows added later would push newer ones out. An
        in-process engine has none: its console sees every step."""
        recent = self.engine.recent_steps()
        if not recent:
            return
        known = {row.key for row in self._steps}
        rows = [*self._steps, *(r for r in snapshot_step_rows(recent) if r.key not in known)]
        rows.sort(key=lambda row: row.at, reverse=True)
        self._steps = deque(rows[: self._steps.maxlen], maxlen=self._steps.maxlen)

    def _routing_step(self, event: RoutingStep) -> None:
        role = self._role(event.agent_id)
        what = step_what(role, event.step)
        key = f"step:{event.step}:{event.ref_id or len(self._steps)}"
        if any(row.key == key for row in self._steps):
            return
        self._steps.appendleft(CommandRow(key, datetime.now(UTC), what, "", str(event.detail)))
        self._show_commands()
        if event.step in ("question_asked", "permission_asked"):
            # the pane follows the inbox's selected question (QuestionsPanel.Showing), which
            # stays the oldest: the question a digit answers is the one on screen
            self.app.bell()
            if event.step == "permission_asked":
                self.tell(f"{role} asks permission: {event.detail}", title="Permission", timeout=8)
            else:
                self.tell(f"{role} asks: {event.detail}", title="Question", timeout=8)
            self.refresh_from_store()

    # -- panes ----------------------------------------------------------------------------------

    def sync_panes(self) -> None:
        """One pane per live session, in role order; hidden beyond the layout."""
        grid = next(iter(self.query("#panes").results(Grid)), None)
        if grid is None:  # the app is closing (its engine's last events): nothing to show
            return
        sessions = {s.session_id: s for s in self.engine.sessions() if not s.ended}
        for session_id in list(self.panes):
            if session_id not in sessions:
                self.panes.pop(session_id).remove()
                if self.zoomed == session_id:
                    self.zoomed = None
                    self.minimize()
        by_role = session_order((sid, s.role) for sid, s in sessions.items())
        self.names = session_names(((sid, sessions[sid].role) for sid in by_role), self.names)
        self.failed = {sid: what for sid, what in self.failed.items() if sid in sessions}
        self.order = attention_order(by_role, self.shown_states(), self.sort)
        for session_id in self.order:
            if session_id not in self.panes:
                pane = TerminalPane(
                    sessions[session_id].terminal,
                    title=self._title(session_id),
                    prefix=self.prefix,
                    prefix_display=self.prefix_display,
                )
                pane.session_id = session_id
                self.panes[session_id] = pane
                grid.mount(pane)
        if self.selected not in sessions:
            self.selected = opening_selection(self.order, self.shown_states(), self._asker())
        self.refresh_panels()
        self._apply_layout()

    def visible_sessions(self) -> list[str]:
        if self.zoomed:
            return [self.zoomed]
        if self.selected not in self.order:
            return self.order[: self.layout_size]
        start = self.order.index(self.selected) // self.layout_size * self.layout_size
        return self.order[start : start + self.layout_size]

    def _apply_layout(self) -> None:
        grid = self.query_one("#panes", Grid)
        visible = self.visible_sessions()
        # the smallest layout that holds the visible panes: 2 sessions fill the grid, not half
        size = next(n for n in LAYOUTS if n >= min(max(len(visible), 1), self.layout_size))
        for layout in LAYOUTS:
            grid.set_class(layout == size, f"layout-{layout}")
        grid.set_class(size > 1, "grid")  # app.tcss: the selected pane's own border
        for session_id, pane in self.panes.items():
            pane.display = session_id in visible
            pane.set_class(session_id == self.selected, "selected")
            pane.source.set_visible(session_id in visible)  # no frames for hidden panes
        if size == 1:
            self.call_after_refresh(self._size_hidden_panes)

    def _size_hidden_panes(self) -> None:
        """With one large pane, every session's terminal takes its size, shown or not: a
        session picked later shows lines written at that width instead of cut ones (a terminal
        does not reflow what it already wrote)."""
        shown = [p for p in self.panes.values() if p.display and p.size.width > 0]
        if len(shown) != 1 or self.zoomed or self.engine.consoles > 1:
            return  # (another console may be using a session this one only hides)
        cols, rows = shown[0].size
        for pane in self.panes.values():
            screen = pane.source.screen
            if not pane.display and (screen.columns, screen.lines) != (cols, rows):
                with contextlib.suppress(Exception):
                    pane.source.resize(cols, rows)

    def shown_states(self) -> dict[str, str]:
        """Each live session's state as the list shows it (semo.console.attention.shown_state)."""
        states: dict[str, str] = {}
        for session_id in self.panes:
            session = self.engine.session(session_id)
            if session is not None:
                states[session_id] = shown_state(
                    self._state(session),
                    stale=session.stale is True,
                    failed=session_id in self.failed,
                )
        return states

    def _asker(self) -> str | None:
        """The session of the inbox's selected question."""
        question = self.query_one(QuestionsPanel).selected
        return question.session_id if question else None

    def seen(self, session_id: str | None) -> None:
        """The operator looked at `session_id`: its "last job failed" mark goes."""
        if session_id is not None and self.failed.pop(session_id, None) is not None:
            self.refresh_panels()

    def _title(self, session_id: str, states: dict[str, str] | None = None) -> str:
        session = self.engine.session(session_id)
        if session is None:
            return session_id[:6]
        name = self._shown_name(session_id)
        states = self.shown_states() if states is None else states
        state = states.get(session_id, self._state(session))
        return pane_title(session.role, name, state, session.queued)

    def _shown_name(self, session_id: str, default: str = "") -> str:
        """`#1`, or `#1 Ada` when the session's agent is named in semo.toml."""
        number = self.names.get(session_id, default)
        session = self.engine.session(session_id)
        if session is None:
            return number
        agent = self.engine.agents.get(session.role)
        return with_agent_name(number, session.role, agent.name if agent else None)

    def _state(self, session: SessionHandle) -> str:
        """The session's state, or "lost" while its engine is gone (the last state the console
        saw, "ready" or "asks you", would say it still runs)."""
        return LOST if self.engine.gone else session.state.value

    def _who(self, session_id: str) -> str:
        """ "FE #1": a session as the operator knows it."""
        session = self.engine.session(session_id)
        role = session.role if session else "?"
        return f"{role} {self._shown_name(session_id, session_id[:6])}"

    def select(self, session_id: str | None, *, focus_pane: bool = False) -> None:
        if session_id is None or session_id not in self.panes:
            return
        changed = session_id != self.selected
        self.selected = session_id
        self.query_one(SessionList).select(session_id)
        if changed:
            if self.zoomed:
                self.minimize()
                self.zoomed = None
            self._apply_layout()
        if focus_pane:
            focus_now(self.panes[session_id])

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        widget = event.widget
        self.set_class(isinstance(widget, TerminalPane), "-pane-focused")  # toasts: app.tcss
        if isinstance(widget, TerminalPane):
            self._manual = True
            self.select(getattr(widget, "session_id", None))
            self.seen(getattr(widget, "session_id", None))

    @on(DataTable.RowHighlighted, "#sessions")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value
        if key is None or key == self.selected:
            return  # (a move the console made itself comes back as the selected row)
        if event.cursor_row != event.data_table.cursor_row:
            return  # an echo of a move the cursor has made since: taking it would bounce back
        if event.data_table.has_focus:
            self._manual = True
            self.seen(str(key))
        self.select(str(key))

    @on(DataTable.RowSelected, "#sessions")
    def _open(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self._manual = True
            self.select(str(event.row_key.value), focus_pane=True)
            self.seen(str(event.row_key.value))

    def _selected_session(self) -> SessionHandle | None:
        return self.engine.session(self.selected or "")

    # -- the prefix chord -----------------------------------------------------------------------

    @on(TerminalPane.Prefixed)
    def _prefixed(self, message: TerminalPane.Prefixed) -> None:
        self.run_prefixed(message.key, message.pane)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """In a pane the F-keys and letters are the agent's: the footer hides them then."""
        # False: hidden from the footer (and not run: the pane has the key anyway)
        if action == "prefix" and isinstance(self.focused, PrefixCatcher):
            return False  # the prefix twice: the catcher takes the second one
        return not (isinstance(self.focused, TerminalPane) and action in SCREEN_KEYS)

    def action_prefix(self) -> None:
        """The prefix outside a pane: the next key is a command (widgets/prefix_catcher.py)."""
        self.query_one(PrefixCatcher).arm(self.focused)

    def run_prefixed(self, key: str, pane: TerminalPane | None = None) -> None:
        """What the prefix chord then `key` does (keys help: PREFIX_KEYS)."""
        if key == "d":
            self.app.action_detach()  # type: ignore[attr-defined]  # SemoApp's; the app is typed App
        elif key == "z":
            self.action_zoom()
        elif key in ("n", "p"):
            self.action_next_session(1 if key == "n" else -1)
        elif key == "q":
            self.action_questions()
        elif key == "a":
            self.action_attend()
        elif key == "j":
            self.action_jobs()
        elif key == "colon":
            self.app.action_command_palette()
        elif key == "left_square_bracket":
            target = pane or self.panes.get(self.selected or "")
            if target is not None:
                focus_now(target)
                target.scroll_mode()
        elif key == self.prefix and pane is None:  # outside a pane: into the selected one
            self.select(self.selected, focus_pane=True)
        elif key in ("o", "tab"):
            if self.zoomed:
                self.action_zoom()
            focus_now(self.query_one(SessionList))
        elif key == "question_mark":
            self.action_keys_help()
        else:
            self.tell(
                f"{self.prefix_display} then {key}: not a console key ({self.prefix_display} ? "
                "lists them)",
                severity="warning",
                timeout=3,
            )

    # -- panels ---------------------------------------------------------------------------------

    def _covered(self) -> bool:
        """Another full screen (the jobs view) hides this one. Its panels wait then: Textual
        repaints the whole top screen for any change on the screen below it."""
        top = self.app.screen
        return top is not self and not isinstance(top, ModalScreen)

    def _tick_panels(self) -> None:
        if not self._covered():
            self.refresh_panels()

    def _tick_store(self) -> None:
        if not self._covered():
            self.refresh_from_store()

    def on_screen_resume(self) -> None:
        if self.started:
            self._apply_layout()
            self.refresh_panels()
            self.refresh_from_store()

    def refresh_panels(self) -> None:
        status = self.engine.pool_status()
        pooled = status.sessions if status else {}
        rows: list[SessionRow] = []
        states = self.shown_states()
        order = attention_order([s for s in self._role_order() if s in states], states, self.sort)
        if order != self.order:  # a session needs the operator now, or no longer
            self.order = order
            self._apply_layout()
        visible = set(self.visible_sessions())
        # an asking session's row says what it asks, not the tail of its protocol block
        asked = {
            q.session_id: q.question
            for q in self.query_one(QuestionsPanel).questions
            if q.session_id is not None
        }
        for session_id in self.order:
            session = self.engine.session(session_id)
            if session is None:
                continue
            info = pooled.get(session_id)
            rows.append(
                SessionRow(
                    session_id=session_id,
                    name=self.names.get(session_id, ""),
                    role=session.role,
                    state=states.get(session_id, self._state(session)),
                    age_s=info.age_s if info else None,
                    job=info.task_id.removeprefix("job-")[:6] if info and info.task_id else None,
                    last_line=(
                        asked_line(asked[session_id])
                        if session_id in asked
                        else self._last_line(session_id, session, visible)
                    ),
                )
            )
        subtitle = ""
        if status is not None:
            down = f" · {', '.join(status.down)} down" if status.down else ""
            subtitle = f"{status.total}/{status.max_sessions}{down}"
        session_list = self.query_one(SessionList)
        session_list.show(rows, subtitle)
        if self.selected:
            session_list.select(self.selected)
        office = self.engine.office
        if office is not None:
            size = self.layout_size
            layout = "zoom" if self.zoomed else f"{size} pane{'s' if size > 1 else ''}"
            self.sub_title = plain(
                f"{office.name} · {self.engine.backend} · "
                f"{self.engine.connection_state()} · {layout}",
                one_line=True,
            )
        for session_id, pane in self.panes.items():
            pane.set_title(self._title(session_id, states))
        self._attend(states)

    def _role_order(self) -> list[str]:
        sessions = {sid: s for sid in self.panes if (s := self.engine.session(sid)) is not None}
        return session_order((sid, s.role) for sid, s in sessions.items())

    def _attend(self, states: dict[str, str] | None = None) -> None:
        """The count of what needs the operator: in this header and the app's (the title)."""
        states = self.shown_states() if states is None else states
        found = attention(self.query_one(QuestionsPanel).waiting(), states.values())
        if found != self.attention:
            self.attention = found
            office = self.engine.office
            set_attention = getattr(self.app, "set_attention", None)
            if set_attention is not None:
                set_attention(found, office.name if office is not None else None)
        self.title = header_title(self.base_title, found)

    def _last_line(self, session_id: str, session: SessionHandle, visible: set[str]) -> str:
        """From the screen the console has; for an attached engine's session whose pane is
        hidden (no frames), what the engine read."""
        remote = self.engine.last_line(session_id) if session_id not in visible else None
        if remote is not None:
            return remote
        return screen_last_line(session.terminal.screen)

    @work(exclusive=True, group="store")
    async def refresh_from_store(self) -> None:
        try:
            questions = await self.engine.pending_questions()
            commands = await self.engine.recent_commands(20)
            for command in commands:
                if command.status in ("completed", "failed") and command.id not in self._results:
                    outcome = await self.engine.command_outcome(command.id)
                    if outcome is not None:
                        self._results[command.id] = outcome
        except Exception as error:  # a store that is down must not take the console with it
            self.sub_title = plain(f"store unavailable: {error}", one_line=True)
            return
        roles = {agent.id: role for role, agent in self.engine.agents.items()}
        self.query_one(QuestionsPanel).show(questions, roles)
        self._attend()
        self._commands = [
            command_row(
                c.id,
                c.created_at,
                c.command_type,
                c.status,
                self._results.get(c.id, ""),
                c.payload,
                self._job_roles,
            )
            for c in commands
        ]
        self._show_commands()

    def _show_commands(self) -> None:
        rows = sorted([*self._commands, *self._steps], key=lambda r: r.at, reverse=True)
        self.query_one(CommandsPanel).show(rows[:20])

    def _role_of(self, session_id: str) -> str:
        session = self.engine.session(session_id)
        return f"{session.role} {self._shown_name(session_id)}".strip() if session else "?"

    def _role(self, agent_id: str | None) -> str:
        for role, agent in self.engine.agents.items():
            if agent.id == agent_id:
                return role
        return "?"

    # -- actions --------------------------------------------------------------------------------

    @on(QuestionsPanel.Showing)
    def _show_asker(self, message: QuestionsPanel.Showing) -> None:
        """The inbox's selected question drives the pane: its asker's screen, while the
        operator works in the inbox or has not picked a session himself."""
        in_inbox = self.focused is not None and self.query_one(QuestionsPanel) in (
            self.focused.ancestors_with_self
        )
        session_id = message.question.session_id
        if session_id in self.panes and (in_inbox or not self._manual):
            self.select(session_id)

    @on(QuestionsPanel.Answered)
    async def answer(self, message: QuestionsPanel.Answered) -> None:
        panel = self.query_one(QuestionsPanel)
        asked = panel.sent.get(message.question_id)
        who = panel.agent_roles.get(asked.agent_id, "?") if asked else "?"
        what = clip(plain(asked.question, one_line=True), 40) if asked else ""
        try:
            answer = await self.engine.answer(
                message.question_id, text=message.text, option=message.option
            )
        except Exception as error:
            panel.restore(message.question_id)
            self.tell(
                f"{who}: {what}\n{short_ids(str(error))}",
                title="Not answered",
                severity="error",
            )
            self.refresh_from_store()
            return
        self.tell(f"{who}: {answer}", title="Answered", timeout=3)
        self._attend()
        self.refresh_from_store()

    def action_keys_help(self) -> None:
        from semo.console.keys_help import KeysHelp

        focused = self.focused
        in_pane = isinstance(focused, TerminalPane)
        self.app.push_screen(KeysHelp(self.prefix_display, in_pane=in_pane))

    def action_back(self) -> None:
        """Escape outside a pane: close the prompt line, else back to the session list."""
        field = self.query_one("#prompt-input", Input)
        if field.display:
            self._close_prompt()
        else:
            focus_now(self.query_one(SessionList))

    def action_walk(self, step: int) -> None:
        """Tab / shift+Tab outside a pane: the next / previous widget that is not a pane."""
        chain = [w for w in self.focus_chain if not isinstance(w, TerminalPane)]
        if not chain:
            return
        index = chain.index(self.focused) if self.focused in chain else -1 if step > 0 else 0
        focus_now(chain[(index + step) % len(chain)])

    def action_cycle_layout(self) -> None:
        index = LAYOUTS.index(self.layout_size)
        self.layout_size = LAYOUTS[(index + 1) % len(LAYOUTS)]
        if self.zoomed:
            self.zoomed = None
            self.minimize()
        self._apply_layout()
        self.refresh_panels()  # the sub-title says which layout: no toast per key press

    def action_zoom(self) -> None:
        if self.zoomed:
            self.zoomed = None
            self.minimize()
            self._apply_layout()
            if self.selected in self.panes:
                focus_now(self.panes[self.selected])
        elif self.selected in self.panes:
            self.zoomed = self.selected
            self._apply_layout()
            pane = self.panes[self.selected]
            self.maximize(pane, container=False)
            focus_now(pane)
        self.refresh_panels()

    def action_next_session(self, step: int) -> None:
        if not self.order:
            return
        index = self.order.index(self.selected) if self.selected in self.order else -step
        in_pane = isinstance(self.focused, TerminalPane)
        self._manual = True
        was_zoomed = self.zoomed is not None
        self.select(self.order[(index + step) % len(self.order)], focus_pane=in_pane)
        self.seen(self.selected)
        if was_zoomed and self.selected:
            self.action_zoom()

    def action_jobs(self, then: str | None = None) -> None:
        """The jobs view; `then` runs one of its actions at once (create_job, cancel_job)."""
        from semo.console.screens.jobs import JobsScreen

        if self.zoomed:
            self.action_zoom()
        for pane in self.panes.values():  # covered: no frames for them until it closes
            pane.source.set_visible(False)
        self.app.push_screen(JobsScreen(self.engine, then))

    def action_pool(self) -> None:
        """The pool view (semo/console/screens/pool.py): its sessions, roles without one,
        breakers, requests waiting."""
        from semo.console.screens.pool import PoolScreen

        if self.zoomed:
            self.action_zoom()
        for pane in self.panes.values():  # covered: no frames for them until it closes
            shown = getattr(pane.source, "set_visible", None)
            if shown is not None:
                shown(False)
        self.app.push_screen(PoolScreen(self.engine, lambda: self.names))

    def action_attend(self) -> None:
        """F7 (the prefix then a): to the next thing that needs the operator. The inbox first
        while it holds questions (its selected question drives the pane), then each session
        whose last job failed, in error or stale, in list order, round."""
        panel = self.query_one(QuestionsPanel)
        in_inbox = self.focused is not None and panel in self.focused.ancestors_with_self
        states = self.shown_states()
        others = {sid: state for sid, state in states.items() if state != "waiting_input"}
        if panel.questions and not in_inbox:
            self.action_questions()
            return
        target = next_need(self.order, others, None if in_inbox else self.selected)
        if target is None and panel.questions:  # only questions: the next one
            listing = panel.query_one("#question-list", OptionList)
            listing.highlighted = ((listing.highlighted or 0) + 1) % len(panel.questions)
            return
        if target is None:
            self.tell("nothing needs you", timeout=3)
            return
        if self.zoomed:
            self.action_zoom()
        self._manual = True
        self.select(target)
        focus_now(self.query_one(SessionList))
        what = self.failed.get(target)
        self.seen(target)
        if what:
            self.tell(what, title="Job failed", severity="error", timeout=8)

    def action_questions(self) -> None:
        if self.zoomed:
            self.action_zoom()
        focus_now(self.query_one("#question-list"))

    def action_prompt(self) -> None:
        field = self.query_one("#prompt-input", Input)
        session = self._selected_session()
        who = (
            f"{session.role} {self._shown_name(session.session_id)}"
            if session
            else "the selected session"
        )
        field.placeholder = f"prompt for {who}; Enter sends, Escape closes"
        field.display = True
        focus_now(field)

    def _close_prompt(self) -> None:
        field = self.query_one("#prompt-input", Input)
        field.value = ""
        field.display = False
        focus_now(self.query_one(SessionList))

    @on(Input.Submitted, "#prompt-input")
    def _send_prompt(self, event: Input.Submitted) -> None:
        session = self._selected_session()
        if session is not None and event.value.strip():
            try:
                self.engine.send_prompt(session.session_id, event.value)
            except Exception as error:  # e.g. the engine is gone: nothing was sent
                self.tell(str(error), title="Prompt not sent", severity="error")
            else:
                who = f"{session.role} {self._shown_name(session.session_id)}"
                self.tell(f"prompt queued for {who}")
        self._close_prompt()

    def action_cancel(self) -> None:
        """Interrupt the selected session's turn, after a confirmation: for an agent that is
        not Claude Code it is Ctrl+C, which ends a program that does not handle it."""
        session = self._selected_session()
        if session is None:
            self.tell("no session selected", severity="warning", timeout=3)
            return
        session_id, who = session.session_id, self._who(session.session_id)
        turn = session.state.value == "executing"
        job_id = self._job_of(session_id)
        if not turn and job_id is None:
            state = state_word(self._state(session))
            self.tell(f"{who} is {state}: no turn to cancel", severity="warning", timeout=4)
            return
        keys = "Claude Code gets Esc, other agents Ctrl+C (a program that does not handle it ends)"
        if job_id is None:

            def confirmed(yes: bool | None) -> None:
                if yes:
                    self._cancel(session_id)

            self.app.push_screen(
                Confirm(f"Cancel {who}'s turn? {keys}.", "Cancel the turn"), callback=confirmed
            )
            return
        job = f"job {job_id[:SHORT_ID]}"
        choices = [("job", "j: cancel the job")]
        question = f"{who} runs {job}. Cancel the job (its work is cancelled, not retried)?"
        if turn:
            choices.insert(0, ("turn", "t: cancel the turn"))
            question = (
                f"{who} runs {job}. Cancel only the turn ({keys}; the job fails as cancelled "
                "by you, never retried as a crash), or the whole job?"
            )

        def chosen(choice: str | None) -> None:
            if choice == "turn":
                self._cancel(session_id)
            elif choice == "job":
                self._cancel_job(job_id)

        self.app.push_screen(Choose(question, choices), callback=chosen)

    def _job_of(self, session_id: str) -> str | None:
        """The job `session_id` runs (the pool's lease), if any."""
        status = self.engine.pool_status()
        info = status.sessions.get(session_id) if status else None
        task = info.task_id if info is not None else None
        return task.removeprefix("job-") if task and task.startswith("job-") else None

    @work(group="cancel")
    async def _cancel_job(self, job_id: str) -> None:
        try:
            await self.engine.cancel_job(job_id, "cancelled by the operator (F8 in the console)")
        except Exception as error:
            self.tell(short_ids(str(error)), title="Job not cancelled", severity="error")
            return
        self.tell(f"job {job_id[:SHORT_ID]}: cancel requested", timeout=4)

    @work(group="cancel")
    async def _cancel(self, session_id: str) -> None:
        session = self.engine.session(session_id)
        role = session.role if session else session_id[:6]
        try:
            await self.engine.cancel(session_id)
        except Exception as error:
            self.tell(str(error), title="Not cancelled", severity="error")
            return
        self.tell(f"cancelled {role}'s turn", timeout=4)

    async def new_session(self, role: str) -> None:
        """A session of `role` from the pool (an idle one if there is one, else a new one),
        selected."""
        self.tell(f"asking the pool for a {role} session…", timeout=3)
        try:
            session = await self.engine.new_session(role)
        except Exception as error:
            self.tell(str(error), title=f"No {role} session", severity="error")
            return
        self.sync_panes()
        self._manual = True
        self.select(session.session_id)
        self.tell(f"{role} session {self._shown_name(session.session_id)} is ready", timeout=4)

    def terminate_selected(self) -> None:
        session = self._selected_session()
        if session is None:
            self.tell("no session selected", severity="warning", timeout=3)
            return
        question = (
            f"Terminate {self._who(session.session_id)}? Its agent process ends; "
            "what it was doing is lost."
        )
        session_id = session.session_id

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._terminate(session_id)

        self.app.push_screen(Confirm(question, "Terminate"), callback=confirmed)

    @work(group="terminate")
    async def _terminate(self, session_id: str) -> None:
        try:
            await self.engine.terminate(session_id)
        except Exception as error:
            self.tell(str(error), title="Not terminated", severity="error")
        self.sync_panes()

    def answer_oldest(self) -> None:
        """The palette's "Answer the oldest question": the inbox, its oldest question selected."""
        panel = self.query_one(QuestionsPanel)
        self.action_questions()
        if panel.questions:
            panel.query_one("#question-list", QuestionList).highlighted = 0
        else:
            self.tell("no pending questions", timeout=3)

    async def start_recording(self) -> None:
        session = self._selected_session()
        if session is not None:
            try:
                path = await self.engine.start_recording(session.session_id)
            except Exception as error:
                self.tell(str(error), title="Not recording", severity="error")
                return
            self.tell(f"recording {session.role} to {path}")

    async def stop_recording(self) -> None:
        session = self._selected_session()
        if session is not None:
            try:
                await self.engine.stop_recording(session.session_id)
            except Exception as error:  # (nothing recording: the engine says so)
                self.tell(str(error), title="Not recording", severity="warning")
                return
            self.tell(f"recording of {session.role} stopped")


def prefix_display(key: str) -> str:
    """ctrl+right_square_bracket -> ctrl+]"""
    names = {
        "right_square_bracket": "]",
        "backslash": "\\",
        "circumflex_accent": "^",
        "underscore": "_",
        "at": "@",
    }
    modifier, _, base = key.rpartition("+")
    return f"{modifier}+{names.get(base, base)}" if modifier else names.get(base, base)
