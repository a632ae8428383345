"""The jobs view (F5, or the prefix then j): the office's jobs and the selected one's timeline.

Each job shows its state, role, the task's first line and age; the timeline comes from
semo.engine.store.job_ops. It reloads on the engine's
job events, changing only the cells that changed (the cursor stays), and the ages tick: once a
second the age cells whose text changed (the session list's granularity: <1m, 5m, 3h, 2d) are
repainted, nothing else. Keys: c create a job (role and task), x cancel the selected one (asks
first), Escape back to the sessions."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.suggester import SuggestFromList
from textual.widgets import DataTable, Header, Input, Label, Static

from semo.console.attention import Attention, header_title
from semo.console.confirm import Confirm
from semo.console.job_text import job_label, job_row, task_room, timeline_lines
from semo.console.job_work_text import review_lines
from semo.console.screens.job_diff import JobDiffScreen
from semo.console.shell import job_worktree, open_shell
from semo.console.text import content, rich_text
from semo.console.widgets.cells import set_cell
from semo.console.widgets.key_bar import KeyBar
from semo.engine.events import Event, JobEvent
from semo.engine.office.job_ops import JobView
from semo.engine.plain_text import plain

if TYPE_CHECKING:
    from semo.engine.interface import EngineInterface

COLUMNS = ("state", "role", "task", "age")
AGE_WIDTH = 3  # <1m, 59m, 23h


class CreateJob(ModalScreen[tuple[str, str] | None]):
    """The role and the task of a new job, in that order; Enter in the task creates it."""

    DEFAULT_CSS = """
    CreateJob { align: center middle; }
    CreateJob > Vertical {
        width: 70; max-width: 100%; height: auto;
        border: round $accent; background: $surface; padding: 0 1;
    }
    CreateJob Label { margin: 1 0 0 0; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close")]

    def __init__(self, roles: list[str]) -> None:
        super().__init__()
        self.roles = roles

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(content("Create a job"))
            yield Label("Role", id="job-role-label")
            yield Input(
                placeholder=", ".join(self.roles) or "no agents configured",
                id="job-role",
                suggester=SuggestFromList(self.roles, case_sensitive=False),
            )
            yield Label("Task (Enter creates the job)", id="job-task-label")
            yield Input(placeholder="what the agent should do", id="job-task")
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one("#job-role", Input).focus()  # the fields in the order they are shown

    def role(self) -> str | None:
        """The role typed, as configured (`fe` is FE); None when no agent has it."""
        typed = self.query_one("#job-role", Input).value.strip()
        return next((role for role in self.roles if role.casefold() == typed.casefold()), None)

    @on(Input.Submitted, "#job-role")
    def _role_done(self) -> None:
        if self.role() is None:
            self._say_which_roles()
        else:
            self.query_one("#job-task", Input).focus()

    def _say_which_roles(self) -> None:
        typed = self.query_one("#job-role", Input).value.strip()
        why = f"no agent has the role {typed!r}" if typed else "a job needs a role"
        roles = ", ".join(self.roles) or "none"
        self.notify(f"{why} (roles: {roles})", severity="warning", markup=False)
        self.query_one("#job-role", Input).focus()

    @on(Input.Submitted, "#job-task")
    def _task_done(self) -> None:
        role = self.role()
        task = self.query_one("#job-task", Input).value
        if role is None:
            self._say_which_roles()
        elif not task.strip():
            self.notify("a job needs a task", severity="warning", markup=False)
        else:
            self.dismiss((role, task))

    def action_close(self) -> None:
        self.dismiss(None)


class JobsScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
        Binding("c", "create_job", "Create job"),
        Binding("x", "cancel_job", "Cancel job"),
        Binding("d", "diff", "Diff"),
        Binding("s", "shell", "Shell", show=False),
        Binding("r", "reload", "Reload", show=False),
    ]
    DEFAULT_CSS = """
    JobsScreen #jobs-body { height: 1fr; }
    JobsScreen #job-list { width: 40%; min-width: 30; max-width: 48; height: 1fr; }
    JobsScreen #job-list { overflow-x: hidden; }
    JobsScreen #job-timeline-box { width: 1fr; height: 1fr; border-left: solid $accent; }
    """

    def __init__(self, engine: EngineInterface, then: str | None = None) -> None:
        """`then`: an action run once the jobs are shown (create_job, cancel_job)."""
        super().__init__()
        self.engine = engine
        self.then = then
        self.selected: str | None = None
        self.timeline_text = ""
        self.jobs: list[JobView] = []
        self._rows: dict[str, tuple[str, ...]] = {}  # what each row shows now
        self.rebuilds = 0
        """How often the list was built from scratch (jobs came or went)."""

    def compose(self) -> ComposeResult:
        yield Header(icon="*")
        with Horizontal(id="jobs-body"):
            yield DataTable(id="job-list", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="job-timeline-box"):
                yield Static(id="job-timeline", markup=False)
        yield KeyBar()

    base_title = "semo · jobs"

    def on_mount(self) -> None:
        self.title = header_title(self.base_title, getattr(self.app, "attention", Attention()))
        table = self.query_one("#job-list", DataTable)
        for column in COLUMNS:
            table.add_column(column, key=column, width=AGE_WIDTH if column == "age" else None)
        self.listen()
        self.reload()
        self.set_interval(1.0, self.tick_ages)
        table.focus()

    @work(group="jobs-bus")
    async def listen(self) -> None:
        with self.engine.bus.subscribe(kinds=["job"]) as events_:
            async for event in events_:
                self.on_job_event(event)

    def on_job_event(self, event: Event) -> None:
        if isinstance(event, JobEvent):
            self.reload()

    def _error(self, what: str, error: Exception) -> None:
        self.notify(plain(f"{what}: {error}"), severity="error", markup=False)

    @work(exclusive=True, group="jobs-load")
    async def reload(self) -> None:
        try:
            jobs = await self.engine.list_jobs()
        except Exception as error:
            self._error("the jobs could not be read", error)
            return
        jobs.reverse()  # the newest first
        self.show_jobs(jobs)
        await self.show_timeline()
        if self.then is not None:
            action, self.then = self.then, None
            getattr(self, f"action_{action}")()

    def show_jobs(self, jobs: list[JobView], now: datetime | None = None) -> None:
        """The list: rebuilt when jobs came or went, else only the changed cells."""
        table = self.query_one("#job-list", DataTable)
        ids = [job.id for job in jobs]
        rows = self._rows_of(jobs, now)
        if ids != [job.id for job in self.jobs]:
            self.rebuilds += 1
            table.clear()
            for job in jobs:
                table.add_row(
                    *(rich_text(cell, one_line=True) for cell in rows[job.id]), key=job.id
                )
        else:
            for job_id, row in rows.items():
                self._set_cells(job_id, row)
        self.jobs, self._rows = jobs, rows
        if self.selected not in ids:
            self.selected = ids[0] if ids else None
        if self.selected is not None and table.cursor_row != ids.index(self.selected):
            table.move_cursor(row=ids.index(self.selected))

    def _set_cells(self, job_id: str, row: tuple[str, ...]) -> None:
        table = self.query_one("#job-list", DataTable)
        old = self._rows.get(job_id, ())
        for index, (column, cell) in enumerate(zip(COLUMNS, row, strict=True)):
            if index >= len(old) or old[index] != cell:
                set_cell(table, job_id, column, rich_text(cell, one_line=True))
        self._rows[job_id] = row

    def tick_ages(self, now: datetime | None = None) -> None:
        """The age cells whose text changed since they were drawn, and only them."""
        for job_id, row in self._rows_of(self.jobs, now).items():
            self._set_cells(job_id, row)

    def _rows_of(self, jobs: list[JobView], now: datetime | None) -> dict[str, tuple[str, ...]]:
        """What each job's row shows, its task cut to the room the list has."""
        asking = self._asking()
        width = self.query_one("#job-list", DataTable).size.width or 48
        states = ["asks you" if j.session_id in asking else j.status for j in jobs]
        room = task_room(width - 1, states, [j.role or "?" for j in jobs], AGE_WIDTH)
        return {j.id: job_row(j, now, j.session_id in asking, room) for j in jobs}

    def on_resize(self) -> None:
        self.tick_ages()  # the task column fits the new width

    def _asking(self) -> set[str]:
        """The sessions waiting for the operator (their running jobs read `asks you`)."""
        return {s.session_id for s in self.engine.sessions() if s.state == "waiting_input"}

    async def show_timeline(self) -> None:
        box = self.query_one("#job-timeline", Static)
        if self.selected is None:
            self.timeline_text = "no jobs yet: c creates one"
        else:
            try:
                timeline = await self.engine.job_timeline(self.selected)
            except Exception as error:
                self._error("the job could not be read", error)
                return
            agents = {agent.id: agent for agent in self.engine.agents.values()}
            lines = timeline_lines(timeline, agents)
            work = await self._work_lines(timeline.job)
            self.timeline_text = "\n".join([*lines[:2], *work, *lines[2:]])
        box.update(content(self.timeline_text))

    async def _work_lines(self, job: JobView) -> list[str]:
        """The job's branch, commits and diffstat (none before it has a branch)."""
        if not job.branch:
            return []
        try:
            review = await self.engine.job_review(job.id)
        except Exception as error:
            return [f"branch: {job.branch} (its work could not be read: {error})"]
        return review_lines(review)

    def _selected_job(self) -> JobView | None:
        job = next((j for j in self.jobs if j.id == self.selected), None)
        if job is None:
            self.notify("no job selected", severity="warning")
        return job

    def action_diff(self) -> None:
        job = self._selected_job()
        if job is not None:
            self._show_diff(job)

    @work(exclusive=True, group="jobs-diff")
    async def _show_diff(self, job: JobView) -> None:
        if not job.branch:
            self.notify(plain(f"job {job.id[:8]} has no branch yet: no diff"), markup=False)
            return
        try:
            diff = await self.engine.job_diff(job.id)
        except Exception as error:
            self._error("the job's diff could not be read", error)
            return
        self.app.push_screen(JobDiffScreen(f"job {job_label(job.id)}", diff.files))

    @on(DataTable.RowSelected, "#job-list")
    def _to_pane(self, event: DataTable.RowSelected) -> None:
        """Enter on a job: its agent's pane, focused."""
        job = next((j for j in self.jobs if j.id == event.row_key.value), None)
        session_id = job.session_id if job is not None else None
        running = {s.session_id for s in self.engine.sessions() if not s.ended}
        if session_id is None or session_id not in running:
            self.notify("the job's session is not running", severity="warning")
            return
        self.dismiss()
        main = self.app.screen
        if hasattr(main, "select"):
            main.select(session_id, focus_pane=True)

    def action_shell(self) -> None:
        job = self._selected_job()
        if job is None:
            return
        folder = job_worktree(job)
        if folder is None:
            self.notify(
                plain(f"job {job.id[:8]} has no worktree yet"), severity="warning", markup=False
            )
            return
        try:
            done = open_shell(self.app, folder)
        except OSError as error:
            self._error("no shell", error)
            return
        self.notify(plain(done), markup=False)

    @on(DataTable.RowHighlighted, "#job-list")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value
        if key is not None and key != self.selected:
            self.selected = str(key)
            self._show_selected()

    @work(exclusive=True, group="jobs-timeline")
    async def _show_selected(self) -> None:
        await self.show_timeline()

    def action_back(self) -> None:
        self.dismiss()

    def action_reload(self) -> None:
        self.reload()

    def action_create_job(self) -> None:
        roles = sorted(self.engine.agents)
        self.app.push_screen(CreateJob(roles), callback=self._create)

    def _create(self, request: tuple[str, str] | None) -> None:
        if request is not None:
            self._create_worker(*request)

    @work(group="jobs-change")
    async def _create_worker(self, role: str, task: str) -> None:
        try:
            job = await self.engine.create_job(role, task)
        except Exception as error:
            self._error("the job was not created", error)
            return
        self.selected = job.id
        self.notify(plain(f"job {job.id[:8]} created for {role}"), markup=False)
        self.reload()

    def action_cancel_job(self) -> None:
        job_id = self.selected
        if job_id is None:
            self.notify("no job selected", severity="warning")
            return
        job = next((j for j in self.jobs if j.id == job_id), None)
        if job is not None and job.status in ("done", "failed"):
            self.notify(plain(f"job {job_id[:8]} is {job.status}: nothing to cancel"), markup=False)
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._cancel_worker(job_id)

        self.app.push_screen(
            Confirm(f"Cancel job {job_id[:8]}? Its agent is stopped.", "Cancel job"),
            callback=confirmed,
        )

    @work(group="jobs-change")
    async def _cancel_worker(self, job_id: str) -> None:
        try:
            await self.engine.cancel_job(job_id, "cancelled in the console")
        except Exception as error:
            self._error("the job was not cancelled", error)
            return
        self.notify(plain(f"job {job_id[:8]}: cancel requested"), markup=False)
        self.reload()
