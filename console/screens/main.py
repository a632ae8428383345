"""The one screen: agent panes on the left, pool / questions / commands on the right.

Keys (also in the footer and the command palette): F2 cycles the pane layout (1, 2, 4, 6
visible), F3 zooms the selected pane, F4 goes to the question inbox, F6 sends a prompt to the
selected session, F8 cancels its turn. These work from inside a pane too; every other key in a
pane goes to the agent, and ctrl+] leaves it.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Horizontal, Vertical
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widgets import Footer, Header, Input

from console.widgets.commands_panel import CommandsPanel
from console.widgets.pool_panel import PoolPanel
from console.widgets.questions_panel import QuestionsPanel
from console.widgets.terminal_pane import TerminalPane
from engine.demo.office import DEMO_TASK
from engine.engine import Engine
from engine.events import Event, JobEvent, RoutingStep, SessionStatusChanged
from engine.heap import freeze_startup_heap
from engine.plain_text import plain
from engine.sessions.agent_session import AgentSession
from engine.store.models import Job

log = logging.getLogger("semo.console")

LAYOUTS = (1, 2, 4, 6)
REFRESH_SECONDS = 0.5
STORE_REFRESH_SECONDS = 1.0
NOTIFY_CHARS = 300  # a toast shows the start of an agent's text; the inbox shows all of it


class MainScreen(Screen[None]):
    AUTO_FOCUS = "#question-list"  # keyboard first: the inbox, until the operator picks a pane
    # priority: these work from inside a pane too (the only keys a pane does not get, with ctrl+])
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f2", "cycle_layout", "Layout", priority=True),
        Binding("f3", "zoom", "Zoom", priority=True),
        Binding("f4", "questions", "Questions", priority=True),
        Binding("f6", "prompt", "Prompt", priority=True),
        Binding("f8", "cancel", "Cancel turn", priority=True),
    ]

    def __init__(self, engine: Engine, *, demo_task: bool = False) -> None:
        super().__init__()
        self.engine = engine
        self.demo_task = demo_task
        self.panes: dict[str, TerminalPane] = {}
        self.layout_size = 4
        self.zoomed: str | None = None
        self.selected: str | None = None
        self._results: dict[str, str] = {}
        self.started = False  # the engine is running and the panes are shown

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="body"):
            yield Grid(id="panes", classes="layout-4")
            with Vertical(id="sidebar"):
                yield PoolPanel(id="pool")
                yield QuestionsPanel(id="questions")
                yield CommandsPanel(id="commands")
        yield Input(placeholder="prompt for the selected agent; Enter sends", id="prompt-input")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#prompt-input").display = False
        self.query_one("#panes").loading = True
        self.title = "semo"
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
        characters made visible (engine.plain_text), at most NOTIFY_CHARS characters."""
        if len(message) > NOTIFY_CHARS:
            message = message[: NOTIFY_CHARS - 1] + "…"
        self.notify(
            plain(message),
            title=plain(title, one_line=True),
            severity=severity,
            timeout=timeout,
            markup=False,
        )

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
                return
        self.query_one("#panes").loading = False
        self.sync_panes()
        self.set_interval(REFRESH_SECONDS, self.refresh_panels)
        self.set_interval(STORE_REFRESH_SECONDS, self.refresh_from_store)
        self.listen_to_bus()
        self.refresh_panels()
        self.refresh_from_store()
        self.started = True
        freeze_startup_heap()
        if self.demo_task:
            self.run_demo_job()

    @work(group="demo")
    async def run_demo_job(self) -> None:
        engine = self.engine
        fe = engine.agents.get("FE")
        if fe is None or engine.jobs is None:
            return
        job = await engine.store.create_job(
            Job(office_id=engine.office_id, agent_id=fe.id, task=DEMO_TASK)
        )
        self.tell(f"demo: FE got a job: {DEMO_TASK}")
        await engine.jobs.execute_job(job.id)

    @work(group="bus")
    async def listen_to_bus(self) -> None:
        with self.engine.bus.subscribe() as events:
            async for event in events:
                self.on_engine_event(event)

    def on_engine_event(self, event: Event) -> None:
        if isinstance(event, SessionStatusChanged):
            if event.status == "terminated" or event.session_id not in self.panes:
                self.sync_panes()
            elif pane := self.panes.get(event.session_id):
                pane.set_title(self._title(event.session_id))
        elif isinstance(event, RoutingStep) and event.step == "question_asked":
            self.app.bell()
            role = self._role(event.agent_id)
            self.tell(f"{role} asks: {event.detail}", title="Question", timeout=8)
            self.refresh_from_store()
        elif isinstance(event, JobEvent) and event.step in ("done", "failed"):
            severity = "information" if event.step == "done" else "error"
            self.tell(f"job {event.step}: {event.detail}", title="Job", severity=severity)

    # -- panes ----------------------------------------------------------------------------------

    def sync_panes(self) -> None:
        """One pane per live session, in role order; hidden beyond the layout's size."""
        sessions = {s.session_id: s for s in self.engine.sessions() if not s.ended}
        grid = self.query_one("#panes", Grid)
        for session_id in list(self.panes):
            if session_id not in sessions:
                self.panes.pop(session_id).remove()
        for session_id, session in sorted(sessions.items(), key=lambda i: i[1].role):
            if session_id not in self.panes:
                pane = TerminalPane(session.terminal, title=self._title(session_id))
                pane.session_id = session_id  # type: ignore[attr-defined]
                self.panes[session_id] = pane
                grid.mount(pane)
        self._apply_layout()

    def _apply_layout(self) -> None:
        grid = self.query_one("#panes", Grid)
        visible = [self.zoomed] if self.zoomed else list(self.panes)[: self.layout_size]
        # the smallest layout that holds the visible panes: 2 sessions fill the grid, not half
        size = next(n for n in LAYOUTS if n >= min(max(len(visible), 1), self.layout_size))
        for layout in LAYOUTS:
            grid.set_class(layout == size, f"layout-{layout}")
        for session_id, pane in self.panes.items():
            pane.display = session_id in visible
            shown = getattr(pane.source, "set_visible", None)
            if shown is not None:  # an attached engine sends no frames for hidden panes
                shown(session_id in visible)

    def _title(self, session_id: str) -> str:
        session = self.engine.manager.sessions.get(session_id) if self.engine.manager else None
        if session is None:
            return session_id[:8]
        queued = f" · {session.queued} queued" if session.queued else ""
        return f"{session.role} · {session.state.value}{queued}"

    def on_descendant_focus(self, event: object) -> None:
        widget = getattr(event, "widget", None)
        if isinstance(widget, TerminalPane):
            self.selected = getattr(widget, "session_id", None)

    def _selected_session(self) -> AgentSession | None:
        manager = self.engine.manager
        if manager is None:
            return None
        session_id = self.selected or next(iter(self.panes), None)
        return manager.sessions.get(session_id or "")

    # -- panels ---------------------------------------------------------------------------------

    def refresh_panels(self) -> None:
        pool = self.engine.pool
        self.query_one(PoolPanel).show(pool.status() if pool else None)
        office = self.engine.office
        if office is not None:
            self.sub_title = plain(
                f"{office.name} · {self.engine.store.backend} · {self.engine.connection_state()}",
                one_line=True,
            )
        for session_id, pane in self.panes.items():
            pane.set_title(self._title(session_id))

    @work(exclusive=True, group="store")
    async def refresh_from_store(self) -> None:
        try:
            questions = await self.engine.pending_questions()
            commands = await self.engine.recent_commands(20)
            for command in commands:
                if command.status in ("completed", "failed") and command.id not in self._results:
                    result = await self.engine.store.get_result(command.id)
                    if result is not None:
                        text = result.error if not result.success else "ok"
                        self._results[command.id] = (text or "")[:60]
        except Exception as error:  # a store that is down must not take the console with it
            self.sub_title = plain(f"store unavailable: {error}", one_line=True)
            return
        roles = {agent.id: role for role, agent in self.engine.agents.items()}
        self.query_one(QuestionsPanel).show(questions, roles)
        self.query_one(CommandsPanel).show(commands, self._results)

    def _role(self, agent_id: str | None) -> str:
        for role, agent in self.engine.agents.items():
            if agent.id == agent_id:
                return role
        return "?"

    # -- actions --------------------------------------------------------------------------------

    @on(QuestionsPanel.Answered)
    async def answer(self, message: QuestionsPanel.Answered) -> None:
        try:
            question = await self.engine.answer(
                message.question_id, text=message.text, option=message.option
            )
        except Exception as error:
            self.tell(str(error), title="Not answered", severity="error")
            return
        self.tell(f"answered: {question.answer}", title="Question")
        self.refresh_from_store()

    def action_cycle_layout(self) -> None:
        index = LAYOUTS.index(self.layout_size)
        self.layout_size = LAYOUTS[(index + 1) % len(LAYOUTS)]
        self.zoomed = None
        self._apply_layout()
        self.tell(f"layout: {self.layout_size} pane(s)")

    def action_zoom(self) -> None:
        session = self._selected_session()
        if self.zoomed or session is None:
            self.zoomed = None
        else:
            self.zoomed = session.session_id
        self._apply_layout()
        if self.zoomed:
            self.panes[self.zoomed].focus()

    def action_questions(self) -> None:
        self.query_one("#question-list").focus()

    def action_prompt(self) -> None:
        field = self.query_one("#prompt-input", Input)
        field.display = True
        field.focus()

    @on(Input.Submitted, "#prompt-input")
    def _send_prompt(self, event: Input.Submitted) -> None:
        session = self._selected_session()
        if session is not None and event.value.strip():
            try:
                self.engine.send_prompt(session.session_id, event.value)
            except Exception as error:  # e.g. the engine is gone: nothing was sent
                self.tell(str(error), title="Prompt not sent", severity="error")
            else:
                self.tell(f"prompt queued for {session.role}")
        event.input.value = ""
        event.input.display = False

    async def action_cancel(self) -> None:
        session = self._selected_session()
        if session is not None:
            with contextlib.suppress(Exception):
                await self.engine.cancel(session.session_id)

    async def new_session(self, role: str) -> None:
        try:
            await self.engine.new_session(role)
        except Exception as error:
            self.tell(str(error), title=f"No {role} session", severity="error")
            return
        self.sync_panes()

    async def terminate_selected(self) -> None:
        session = self._selected_session()
        if session is not None:
            try:
                await self.engine.terminate(session.session_id)
            except Exception as error:
                self.tell(str(error), title="Not terminated", severity="error")
            self.sync_panes()

    async def start_recording(self) -> None:
        session = self._selected_session()
        if session is not None:
            try:  # the in-process engine answers at once, an attached one (engine.control) later
                path = self.engine.start_recording(session.session_id)
                if inspect.isawaitable(path):
                    path = await path
            except Exception as error:
                self.tell(str(error), title="Not recording", severity="error")
                return
            self.tell(f"recording {session.role} to {path}")

    async def stop_recording(self) -> None:
        session = self._selected_session()
        if session is not None:
            try:
                done = self.engine.stop_recording(session.session_id)
                if inspect.isawaitable(done):
                    await done
            except Exception as error:
                self.tell(str(error), title="Recording", severity="error")
                return
            self.tell(f"recording of {session.role} stopped")
