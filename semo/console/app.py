"""The operator console: one Textual app on an engine, usually one that runs elsewhere.

How it works: docs/CONSOLE.md, "The app".
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, ClassVar

from textual import events, work
from textual.app import App, ScreenStackError, SystemCommand
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets._toast import ToastRack

from semo.console import widths as _widths  # Rich measures with the terminal model's table
from semo.console.attention import Attention, header_title, terminal_title
from semo.console.colours import Colours, theme_for
from semo.console.commands import SemoCommands
from semo.console.desktop_notify import DesktopNotifier
from semo.console.keys import prefix_key
from semo.console.panel_text import DETACH_KEY
from semo.console.screens.main import MainScreen
from semo.engine.heap import thaw_heap
from semo.engine.plain_text import plain

del _widths

if TYPE_CHECKING:
    from semo.engine.interface import EngineInterface


#: the longest keys and clicks wait for the main screen after a painted first frame
HOLD_INPUT_SECONDS = 5.0


class SemoApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "semo"
    COMMANDS = App.COMMANDS | {SemoCommands}
    ESCAPE_TO_MINIMIZE = False  # Escape in a zoomed pane is the agent's
    # not priority (Textual's are): a focused pane sends ctrl+q and ctrl+p to its agent
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(DETACH_KEY, "detach", "Detach"),
        Binding("ctrl+p", "command_palette", "Palette", show=False),
        Binding("ctrl+r", "restart_engine", "Restart engine", show=False),
    ]

    def __init__(
        self,
        engine: EngineInterface,
        *,
        demo_task: bool = False,
        start_engine: bool = True,
        restart: Callable[[], object] | None = None,
        report_death: Callable[[str, str], object] | None = None,
        prefix: str = "ctrl+]",
        hold_input: bool = False,
        sort: str = "attention",
        colours: Colours = "auto",
    ):
        """`prefix`: the pane's prefix chord as semo.toml's `[console] prefix` writes it.
        `hold_input`: keys, clicks and pastes wait until the main screen shows the office (the
        launcher painted the office before the app ran: the operator may act on it already).
        `colours`: "16" for the ANSI theme, "auto" to choose it on a 16-colour terminal.
        `report_death(engine_id, reason)`: tells the office's remote sinks that the engine died
        (semo/console/death_report.py)."""
        super().__init__()
        self._held_input: list[events.InputEvent] | None = [] if hold_input else None
        self.prefix = prefix_key(prefix)
        self.engine = engine
        self.demo_task = demo_task
        self.start_engine = start_engine
        self._restart = restart
        self._report_death = report_death
        self._restarting = False
        self.sort = sort
        #: what needs the operator (semo.console.attention), as the main screen counted it last
        self.attention = Attention()
        #: the terminal's title as the console set it last ("" before the first count)
        self.terminal_title = ""
        #: why the console ended: "detached", "SIGTERM", "SIGHUP"...
        self.exit_reason = "detached"
        #: desktop notifications on this terminal (OSC 9 / 777, semo.engine.notify's console sink)
        self.desktop = DesktopNotifier(self)
        self.colours = colours

    def on_mount(self) -> None:
        detected = None if self.is_headless else self.console.color_system
        theme = theme_for(self.colours, detected)
        if theme is not None:
            self.theme = theme
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
                loop.add_signal_handler(signum, self._signalled, signum)
        self.engine.on_gone(self._engine_gone)
        self.engine.on_office(self._office_changed)
        self.push_screen(
            MainScreen(self.engine, demo_task=self.demo_task, prefix=self.prefix, sort=self.sort)
        )
        if self._held_input is not None:  # whatever happens to the engine, input is not lost
            self.set_timer(HOLD_INPUT_SECONDS, self.release_input)

    async def on_event(self, event: events.Event) -> None:
        if (
            self._held_input is not None
            and isinstance(event, events.InputEvent)
            and not event.is_forwarded
        ):
            self._held_input.append(event)  # a click on the painted frame: once it is real
            return
        await super().on_event(event)

    def release_input(self) -> None:
        """What was typed or clicked while the office was only painted, in order, now that
        the main screen shows it (or could not: its engine did not answer)."""
        held, self._held_input = self._held_input, None
        for event in held or ():
            self.post_message(event)

    # -- what needs the operator ------------------------------------------------------------

    def set_attention(self, found: Attention, office: str | None) -> None:
        """The count of what needs the operator: every view's header and the terminal title
        (xterm's OSC 2; the title the terminal had comes back when the console ends)."""
        self.attention = found
        for screen in self.screen_stack:
            base = getattr(screen, "base_title", None)
            if base is not None:
                screen.title = header_title(base, found)
        title = terminal_title(plain(office, one_line=True) if office else None, found)
        if title != self.terminal_title:
            if not self.terminal_title:
                self.write_terminal("\x1b[22;0t")  # keep the terminal's own title
            self.terminal_title = title
            self.write_terminal(f"\x1b]2;{title}\x07")

    def write_terminal(self, sequence: str) -> bool:
        """Write control sequences to the operator's terminal (the title, a desktop
        notification); False when there is none, or it hung up."""
        driver = self._driver
        if driver is None or self.is_headless or not self.terminal_alive():
            return False
        with contextlib.suppress(Exception):
            driver.write(sequence)
            driver.flush()
        return True

    def terminal_alive(self) -> bool:
        """False once the terminal hung up (SIGHUP, or Textual's writer thread died on EIO): a
        write then would wait for ever in the writer's full queue and the console never ends."""
        if self.exit_reason == "SIGHUP":
            return False
        writer = getattr(self._driver, "_writer_thread", None)
        return writer is None or writer.is_alive()

    def _refresh_notifications(self) -> None:
        """Toasts collapsed to one: the newest is shown; the others wait under it (each still
        goes when its time is up), so a burst of messages never stacks over the panes."""
        try:
            rack = self.screen.get_child_by_type(ToastRack)
        except (NoMatches, ScreenStackError):
            return
        self.call_later(self._show_newest, rack)

    def _show_newest(self, rack: ToastRack) -> None:
        newest = list(self._notifications)[-1:]
        keep = {rack._toast_id(notification) for notification in newest}
        for holder in list(rack.children):  # also those still being mounted
            if holder.id not in keep:
                holder.remove()
        # textual's ToastRack.show takes its Notifications; it only iterates them
        rack.show(newest)  # type: ignore[arg-type]

    def format_title(self, title: str, sub_title: str) -> Content:
        """The header: the attention count in red (it is what needs the operator)."""
        head, count, rest = title.partition(" · " + self.attention.count_text())
        if not self.attention.total or not count:
            return super().format_title(title, sub_title)
        styled = Content.assemble(head, " · ", (count.removeprefix(" · "), "bold red"), rest)
        if sub_title:
            styled = Content.assemble(styled, (" — ", "dim"), (sub_title, "dim"))
        return styled

    async def on_unmount(self) -> None:
        if self.terminal_title:
            self.write_terminal("\x1b[23;0t")
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
                loop.remove_signal_handler(signum)
        if self.start_engine:  # an in-process engine stops; a remote one is only detached from
            await self.engine.stop("console closed")
        thaw_heap()

    # -- leaving ---------------------------------------------------------------------------------

    def _signalled(self, signum: int) -> None:
        self.exit_reason = signal.Signals(signum).name
        self.exit()

    def action_detach(self) -> None:
        self.exit_reason = "detached"
        self.exit()

    # -- the engine going away and coming back -------------------------------------------------

    def _main(self) -> MainScreen | None:
        for screen in self.screen_stack:
            if isinstance(screen, MainScreen):
                return screen
        return None

    def _engine_gone(self, reason: str) -> None:
        if reason == "detached" or not self.is_running:
            return
        main = self._main()
        if main is not None:
            main.sub_title = "engine gone: ctrl+r starts it again"
        if not reason.startswith("the engine stopped"):  # no goodbye: it died
            self._engine_died(reason)
        self.notify(
            f"{plain(reason)}. Nothing typed or answered now reaches an agent. "
            'ctrl+r (or the palette\'s "Start the engine again") starts it again.',
            title="Engine gone",
            severity="error",
            timeout=3600,
            markup=False,
        )

    def _engine_died(self, reason: str) -> None:
        """The terminal's desktop notification for the engine's death (once: the next
        engine's report of it is not shown again)."""
        engine_id = self.engine.engine_id or ""
        office = self.engine.office.name if self.engine.office is not None else ""
        self.desktop.show(
            "engine_died",
            f"semo {office}: engine {engine_id} died",
            f"semo {office}: engine {engine_id} died ({reason}); ctrl+r starts it again",
            engine_id,
        )
        if self._report_death is not None and engine_id:
            self._report_death(engine_id, reason)

    def _office_changed(self) -> None:
        main = self._main()
        if main is None or not main.started:
            return
        live = {s.session_id for s in self.engine.sessions() if not s.ended}
        if live != set(main.panes):
            main.sync_panes()

    def action_restart_engine(self) -> None:
        if self.engine.gone is None or self._restarting:
            return
        if self._restart is None:
            self.notify("start the engine again with `semo engine`", severity="warning")
            return
        self._restarting = True
        self.notify("starting the engine again…", title="Engine")
        self._restart_worker()

    @work(group="restart", exclusive=True)
    async def _restart_worker(self) -> None:
        assert self._restart is not None
        try:
            await asyncio.to_thread(self._restart)
            await self.engine.start()
        except Exception as error:
            message = plain(f"the engine did not start: {error}")
            self.notify(message, severity="error", markup=False)
            return
        finally:
            self._restarting = False
        self.clear_notifications()
        main = self._main()
        if main is not None:
            main.sync_panes()
            main.refresh_panels()
            main.refresh_from_store()
        self.notify("the engine runs again", title="Engine")

    # -- stopping the office -------------------------------------------------------------------

    def action_stop_office(self) -> None:
        from semo.console.confirm import Confirm

        question = (
            "Stop the office's engine? Every agent session ends (shutdown_grace, then killed); "
            "other consoles show that the engine is gone. `semo console` (or ctrl+r here) "
            "starts it again."
        )
        self.push_screen(Confirm(question, "Stop the office"), callback=self._stop_confirmed)

    async def _stop_confirmed(self, confirmed: bool | None) -> None:
        if not confirmed:
            return
        try:
            await self.engine.stop_office()
        except Exception as error:
            self.notify(plain(str(error)), title="Not stopped", severity="error", markup=False)
            return
        self.notify("the engine is stopping", title="Engine")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """In a pane ctrl+q and ctrl+p are the agent's: the footer hides them then."""
        from semo.console.widgets.terminal_pane import TerminalPane

        # False: hidden from the footer (and not run: the pane has the key anyway)
        return not (
            action in ("detach", "command_palette") and isinstance(self.focused, TerminalPane)
        )

    def action_command_palette(self) -> None:
        from semo.console.palette import SemoPalette

        # textual types is_open's app as App[object], and App is invariant in its result type
        if self.use_command_palette and not SemoPalette.is_open(self):  # type: ignore[arg-type]
            self.push_screen(SemoPalette(id="--command-palette"))

    def action_show_help_panel(self) -> None:
        main = self._main()
        if main is not None:
            main.action_keys_help()

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        # semo's own entries come from SemoCommands; Quit (detach is the way out), Textual's
        # keys panel (resizes the panes: semo's keys help replaces it) and maximize are left out
        for command in super().get_system_commands(screen):
            if command.title in ("Theme", "Screenshot"):
                yield command
        if self.engine.gone is not None:
            yield SystemCommand(
                "Start the engine again", "the engine is gone (ctrl+r)", self.action_restart_engine
            )
