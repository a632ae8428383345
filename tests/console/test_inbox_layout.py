"""The sidebar at 80x24 over a real engine (scripted agents in real PTYs, the sqlite store):
the question inbox and the commands panel (audit15 findings 2, 4 and 10).

- A long question (341 characters, 4 options, 6 sessions): every option is on screen inside
  the inbox, the whole text is in it and scrolls (the border says so; PgDn/End/Home on the
  inbox scroll it), the commands panel below keeps its border; a digit answers.
- 2 to 5 pending questions with 6 sessions: every panel inside the sidebar, the commands panel
  keeps its border and a row, the selected question's options all shown, at each count.
- The commands panel shows its newest row on top as rows come in (the cursor follows the
  newest unless the operator moved it), and at 80 columns its rows drop the time's seconds and
  a detail that does not fit before cutting a word.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from textual.app import App, ComposeResult
from textual.containers import VerticalScroll
from textual.pilot import Pilot
from textual.widget import Widget

from semo.console.app import SemoApp
from semo.console.panel_text import CommandRow, command_parts, inbox_rows
from semo.console.screens.main import MainScreen
from semo.console.widgets.commands_panel import CommandsPanel
from semo.console.widgets.questions_panel import QuestionsPanel
from tests.console.console_snapshot_app import LONG
from tests.support.console_app import runtime_dir_fixture, waiter
from tests.support.console_inbox import asked, inbox_app
from tests.support.script_agent import logged_prompts

TIMEOUT = 30.0


runtime_dir = runtime_dir_fixture("semo-inbox-")


wait_for = waiter(TIMEOUT)


def inside(inner: Widget, outer: Widget) -> bool:
    return outer.region.contains_region(inner.region)


def assert_clean(app: SemoApp, panel: QuestionsPanel) -> None:
    """The sidebar's panels one below the other inside it, none cut; every option of the
    selected question on screen, a line each."""
    sidebar = app.screen.query_one("#sidebar")
    panels = list(sidebar.children)
    for widget in panels:
        assert inside(widget, sidebar), (widget.id, widget.region, sidebar.region)
    for upper, lower in itertools.pairwise(panels):
        assert upper.region.bottom <= lower.region.y, (upper.id, lower.id)
    commands = app.screen.query_one(CommandsPanel)
    assert commands.region.height >= 3  # its border and a row
    question = panel.selected
    assert question is not None
    detail = panel.query_one("#question-detail")
    assert inside(detail, panel) and detail.region.height == len(question.options)
    assert str(detail.render()).splitlines() == [
        f"{n} {option}" for n, option in enumerate(question.options, 1)
    ]
    assert panel.region.bottom <= commands.region.y


@contextlib.asynccontextmanager
async def inbox_opened(
    folder: Path, runtime_dir: Path, count: int
) -> AsyncIterator[tuple[SemoApp, Pilot[None], QuestionsPanel]]:
    """The console at 80x24 over inbox_app(`count`) asking: `count` questions in the inbox,
    F4 pressed (the inbox focused)."""
    app = inbox_app(folder, runtime_dir, count)
    async with app.run_test(size=(80, 24)) as pilot:
        panel = await asked(app, count)
        await pilot.press("f4")
        yield app, pilot, panel


def answered_with(folder: Path, role: str) -> list[str]:
    return [p for p in logged_prompts(folder / f"{role}.log") if "Answer to your" in p]


async def test_a_long_question_shows_every_option_and_scrolls_its_text(
    tmp_path: Path, runtime_dir: Path
) -> None:
    async with inbox_opened(tmp_path, runtime_dir, 1) as (app, pilot, panel):
        await pilot.pause()
        assert app.focused is not None and app.focused.id == "question-list"
        assert len(str(LONG["question"])) == 341
        assert_clean(app, panel)

        # the whole text is in the inbox; it does not fit, so it scrolls and the border says so
        body = str(panel.query_one("#question-body").render()).replace("\n", " ")
        assert " ".join(f"FE asks: {LONG['question']}".split()) == " ".join(body.split())
        text = panel.query_one("#question-text", VerticalScroll)
        assert inside(text, panel) and text.region.height >= 1 and text.show_vertical_scrollbar
        assert text.max_scroll_y > 0 and text.scroll_y == 0
        assert "PgDn: more" in str(panel.border_subtitle)
        await pilot.press("pagedown")
        await pilot.pause()
        assert text.scroll_y > 0
        await pilot.press("end")
        await pilot.pause()
        assert text.scroll_y == text.max_scroll_y
        assert "PgUp: back" in str(panel.border_subtitle)
        await pilot.press("home")
        await pilot.pause()
        assert text.scroll_y == 0
        assert_clean(app, panel)  # scrolling moved nothing else

        await pilot.press("3")
        await wait_for(lambda: answered_with(tmp_path, "FE"), "FE receiving its answer")
        assert answered_with(tmp_path, "FE")[0].endswith(
            ": mysql (options were: postgres, sqlite, mysql, none: keep them in memory)"
        )
        await wait_for(lambda: not panel.questions, "the inbox empty")


async def test_two_to_five_pending_questions_keep_every_panel_whole(
    tmp_path: Path, runtime_dir: Path
) -> None:
    async with inbox_opened(tmp_path, runtime_dir, 5) as (app, pilot, panel):
        commands = app.screen.query_one(CommandsPanel)
        for count in (5, 4, 3, 2):
            await wait_for(lambda c=count: len(panel.questions) == c, f"{count} questions")
            await pilot.pause()
            assert_clean(app, panel)
            assert str(panel.border_subtitle).startswith(f"{count} pending")
            assert commands.cursor_row == 0 and commands.scroll_y == 0  # the newest, in view
            await pilot.press("down", "up")  # the oldest (FE's long one) selected again
            await pilot.press("1")
            await wait_for(lambda c=count: len(panel.questions) == c - 1, "an answer")
        await pilot.pause()
        assert_clean(app, panel)
        screen = app.screen
        assert isinstance(screen, MainScreen)
        newest = commands.rows_shown[0]
        assert newest.what.endswith("got answer")  # the last answer, on top and in view
        assert commands.cursor_row == 0 and commands.scroll_y == 0
        row_text = str(commands.get_row_at(0)[0])
        assert f" {newest.what} " in f"{row_text} ", row_text  # not cut


T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def row(key: str, minutes: int, what: str = "send_prompt", status: str = "pending") -> CommandRow:
    return CommandRow(key, T0 + timedelta(minutes=minutes), what, status)


class PanelApp(App[None]):
    def compose(self) -> ComposeResult:
        yield CommandsPanel(id="commands")


async def test_the_newest_command_stays_in_view_unless_the_operator_moved() -> None:
    app = PanelApp()
    async with app.run_test(size=(40, 6)) as pilot:  # four rows in view
        panel = app.query_one(CommandsPanel)
        rows = [row(f"r{n}", n) for n in range(10, 0, -1)]
        panel.show(rows)
        await pilot.pause()
        for n in range(11, 16):  # newer rows come in on top, one at a time
            rows = [row(f"r{n}", n), *rows]
            panel.show(rows)
            await pilot.pause()
            assert panel.cursor_row == 0 and panel.scroll_y == 0
            assert panel.coordinate_to_cell_key(panel.cursor_coordinate).row_key.value == f"r{n}"

        panel.focus()
        await pilot.press("down", "down")  # the operator looks at an older one
        rows = [row("r16", 16), *rows]
        panel.show(rows)
        await pilot.pause()
        assert panel.coordinate_to_cell_key(panel.cursor_coordinate).row_key.value == "r13"
        await pilot.press("up", "up", "up")  # back on the newest: it follows again
        rows = [row("r17", 17), *rows]
        panel.show(rows)
        await pilot.pause()
        assert panel.cursor_row == 0 and panel.scroll_y == 0
        assert panel.coordinate_to_cell_key(panel.cursor_coordinate).row_key.value == "r17"


def text_of(parts: list[tuple[str, str]]) -> str:
    return "".join(text for text, _style in parts)


def test_narrow_commands_drop_columns_before_cutting_words() -> None:
    width = 29  # the commands panel's text at 80 columns
    done = CommandRow("a", T0, "send_prompt", "completed", "ok")
    answer = CommandRow("b", T0, "FE got answer", "", "postgres")
    long = CommandRow("c", T0, "FE asked you", "", str(LONG["question"]))
    local = T0.astimezone()
    assert text_of(command_parts(done, width, "%H:%M:%S")) == (
        f"{local:%H:%M} send_prompt completed"  # no room for "ok": left out, not cut
    )
    assert text_of(command_parts(answer, width, "%H:%M:%S")) == (
        f"{local:%H:%M} FE got answer postgres"
    )
    shown = text_of(command_parts(long, width, "%H:%M:%S"))
    assert shown.startswith(f"{local:%H:%M} FE asked you Which") and shown.endswith("…")
    assert len(shown) == width
    wide = text_of(command_parts(done, 40, "%H:%M:%S"))
    assert wide == f"{local:%H:%M:%S} send_prompt completed ok"
    # too narrow for what and status with a time: the time goes, then what is cut
    assert text_of(command_parts(done, 21, "%H:%M:%S")) == "send_prompt completed"
    assert len(text_of(command_parts(done, 15, "%H:%M:%S"))) <= 15
    for width in range(6, 60):
        for command in (done, answer, long):
            assert len(text_of(command_parts(command, width, "%H:%M:%S"))) <= width


def test_inbox_rows_keep_the_options_whole() -> None:
    assert inbox_rows(20, 1, 5, 4) == (1, 5)  # all fits
    assert inbox_rows(20, 6, 5, 4) == (4, 5)  # the list shows four at most
    assert inbox_rows(8, 1, 12, 4) == (1, 3)  # the text scrolls in what is left
    assert inbox_rows(8, 5, 2, 4) == (2, 2)  # the list gives way before the text
    assert inbox_rows(8, 5, 12, 4) == (1, 3)
    assert inbox_rows(3, 1, 12, 4) == (1, 1)  # no room at all: still a row of text
