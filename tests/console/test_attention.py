"""Attention first (issue 25, 2): one count of what needs the operator in the header of every
view (zoom and the jobs view included) and in the terminal's title; F7 goes to the next thing
that needs the operator; the sessions that need the operator are listed first (`sort`).

The rules (console/attention.py) as plain functions, then the console over a real engine with
scripted agents in PTYs at 80x24, 120x40 and 200x60."""

from __future__ import annotations

from pathlib import Path

import pytest

from semo.console.app import SemoApp
from semo.console.attention import (
    JOB_FAILED,
    STALE,
    Attention,
    attention,
    attention_order,
    header_title,
    next_need,
    shown_state,
    terminal_title,
)
from semo.console.panel_text import (
    CommandRow,
    command_parts,
    opening_selection,
    session_names,
)
from semo.console.widgets.commands_panel import CommandsPanel
from semo.console.widgets.questions_panel import QuestionsPanel
from semo.console.widgets.session_list import SessionList
from semo.engine.in_process import InProcessEngine
from tests.console.console_snapshot_app import (
    console_engine,
    office_scripts,
    settle_with_questions,
)
from tests.support.console_app import at_three_sizes, runtime_dir_fixture, waiter

runtime_dir = runtime_dir_fixture("semo-att-")
wait_for = waiter(30.0)


def test_what_counts_and_how_it_reads() -> None:
    assert shown_state("executing", stale=True) == STALE
    assert shown_state("ready", stale=True) == "ready"  # silent while idle is not stale
    assert shown_state("ready", failed=True) == JOB_FAILED
    assert shown_state("waiting_input", failed=True, stale=True) == "waiting_input"
    found = attention(2, ["waiting_input", "waiting_input", JOB_FAILED, "error", STALE, "ready"])
    # the askers count by their inbox items, not a second time as sessions
    assert found == Attention(asks=2, failed_jobs=1, errors=1, stale=1) and found.total == 5
    assert header_title("semo", found) == (
        "semo · 5 need you: 2 asking · 1 job failed · 1 in error · 1 stale"
    )
    assert header_title("semo", Attention()) == "semo"
    assert terminal_title("demo", Attention(asks=1)) == "semo: 1 needs you · demo"
    assert terminal_title(None, Attention(asks=2)) == "semo: 2 need you"
    assert terminal_title("demo", Attention()) == "semo · demo"


def test_the_order_and_the_attention_key() -> None:
    order = ["a", "b", "c", "d"]  # by role
    states = {"a": "ready", "b": STALE, "c": "waiting_input", "d": JOB_FAILED}
    assert attention_order(order, states, "attention") == ["c", "d", "b", "a"]
    assert attention_order(order, states, "role") == order
    assert next_need(order, states, "a") == "b"
    assert next_need(order, states, "d") == "b"  # round
    assert next_need(order, {"a": "ready"}, "a") is None


def test_a_console_opens_on_the_asker_then_a_need_then_the_agent_at_work() -> None:
    order = ["be", "fe", "qa"]  # by role: BE first
    working = {"be": "ready", "fe": "executing", "qa": "ready"}  # the demo: FE has the job
    assert opening_selection(order, working) == "fe"
    assert opening_selection(order, working | {"qa": "waiting_input"}) == "qa"
    assert opening_selection(order, working | {"qa": "waiting_input"}, asker="be") == "be"
    assert opening_selection(order, dict.fromkeys(order, "ready")) == "be"
    assert opening_selection([], {}) is None


def test_session_numbers_are_stable() -> None:
    first = session_names([("s1", "FE"), ("s2", "FE"), ("s3", "BE")])
    assert first == {"s1": "#1", "s2": "#2", "s3": "#1"}
    # FE #1 ends: #2 stays #2, a new FE session takes the free #1
    later = session_names([("s2", "FE"), ("s3", "BE"), ("s4", "FE")], first)
    assert later == {"s2": "#2", "s3": "#1", "s4": "#1"}


@at_three_sizes
async def test_the_count_is_in_every_view_and_the_terminal_title(
    tmp_path: Path, runtime_dir: Path, size: tuple[int, int]
) -> None:
    app = SemoApp(InProcessEngine(console_engine(tmp_path, runtime_dir)))
    async with app.run_test(size=size) as pilot:
        await settle_with_questions(app)
        main = app.screen
        header = "semo · 2 need you: 2 asking"
        assert main.title == header
        assert app.terminal_title == "semo: 2 need you · console-test"
        await pilot.press("escape")  # to the session list
        await pilot.press("f3")  # zoomed: the header stays
        assert main.maximized is not None
        assert main.query_one("Header").display and main.title == header
        await pilot.press(str(main.prefix), "z", str(main.prefix), "j")  # the jobs view
        await wait_for(lambda: app.screen is not main, "the jobs view")
        assert app.screen.title == "semo · jobs · 2 need you: 2 asking"
        await pilot.press("escape")
        await wait_for(lambda: app.screen is main, "the main screen")
        # F7: to the inbox; an answer there takes the count down at once
        main.query_one(SessionList).focus()
        await pilot.press("f7")
        panel = main.query_one(QuestionsPanel)
        assert app.focused is panel.query_one("#question-list")
        question = panel.selected
        assert question is not None and main.selected == question.session_id
        await pilot.press("1" if question.question_type == "choice" else "enter")
        if question.question_type == "text":
            await pilot.press(*"/x", "enter")
        await pilot.pause()
        assert main.title == "semo · 1 needs you: 1 asking"
        assert app.terminal_title == "semo: 1 needs you · console-test"


@pytest.mark.parametrize("sort", ["attention", "role"])
async def test_sessions_that_need_the_operator_are_listed_first(
    tmp_path: Path, runtime_dir: Path, sort: str
) -> None:
    # six agents: BE, DB, DOCS, FE, OPS, QA by role; FE asks
    engine = console_engine(tmp_path, runtime_dir, scripts=office_scripts(6), max_sessions=6)
    app = SemoApp(InProcessEngine(engine), sort=sort)
    async with app.run_test(size=(80, 24)):
        await wait_for(lambda: getattr(app.screen, "started", False), "the engine")
        await wait_for(lambda: len(engine.sessions()) == 6, "six sessions")
        fe = next(s for s in engine.sessions() if s.role == "FE")
        await wait_for(lambda: fe.state.value == "ready", "FE ready")
        engine.send_prompt(fe.session_id, "go")
        listing = app.screen.query_one(SessionList)
        await wait_for(
            lambda: any(r.state == "waiting_input" for r in listing.rows_shown), "FE asking"
        )
        roles = [row.role for row in listing.rows_shown]
        if sort == "attention":
            assert roles == ["FE", "BE", "DB", "DOCS", "OPS", "QA"]
            assert listing.get_row_at(0)[0].plain.startswith("FE")  # on screen at 80x24
        else:
            assert roles == ["BE", "DB", "DOCS", "FE", "OPS", "QA"]


async def test_a_stale_agent_is_shown_counted_and_logged(
    tmp_path: Path, runtime_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # FE works on "go" for 8 s without a word (stale after 1 s), then answers: stale while
    # silent, and no longer once it prints
    scripts = {"FE": [{"match": "go", "text": "fe: done", "delay": 8}], "BE": []}
    engine = console_engine(tmp_path, runtime_dir, scripts=scripts, stale_after=1.0)
    app = SemoApp(InProcessEngine(engine))
    caplog.set_level("WARNING")
    async with app.run_test(size=(80, 24)):
        await wait_for(lambda: getattr(app.screen, "started", False), "the engine")
        fe = next(s for s in engine.sessions() if s.role == "FE")
        await wait_for(lambda: fe.state.value == "ready", "FE ready")
        engine.send_prompt(fe.session_id, "go")
        listing = app.screen.query_one(SessionList)
        await wait_for(lambda: any(r.state == STALE for r in listing.rows_shown), "FE stale")
        assert listing.rows_shown[0].role == "FE"  # first in the list
        assert app.screen.title == "semo · 1 needs you: 1 stale"
        assert app.terminal_title == "semo: 1 needs you · console-test"
        assert "stale" in str(app.screen.panes[fe.session_id].border_title)
        assert any("is stale" in r.getMessage() and "FE" in r.getMessage() for r in caplog.records)
        await wait_for(lambda: all(r.state != STALE for r in listing.rows_shown), "not stale")
        assert app.screen.title == "semo"


@at_three_sizes
async def test_a_failed_job_is_red_with_its_role_id_and_reason_and_marks_its_session(
    tmp_path: Path, runtime_dir: Path, size: tuple[int, int]
) -> None:
    scripts = {"FE": [{"match": "login", "text": "fatal: the build broke"}], "BE": []}
    engine = console_engine(tmp_path, runtime_dir, scripts=scripts)
    app = SemoApp(InProcessEngine(engine))
    async with app.run_test(size=size) as pilot:
        await wait_for(lambda: getattr(app.screen, "started", False), "the engine")
        main = app.screen
        job = await engine.create_job("FE", "build the login page")
        commands = main.query_one(CommandsPanel)
        short = job.id[:8]

        def job_row() -> CommandRow | None:
            return next((r for r in commands.rows_shown if r.what == f"FE job {short}"), None)

        await wait_for(lambda: (row := job_row()) is not None and row.status == "failed", "row")
        row = job_row()
        assert row is not None and "error" in row.detail  # the policy's reason
        # the command completed, but the panel says what became of the job, in red
        assert not any(r.what == "run_job" for r in commands.rows_shown)
        assert command_parts(row, 40, "%H:%M")[2:4] == [(" ", ""), ("failed", "bold red")]
        fe = next(s for s in engine.sessions() if s.role == "FE")
        listing = main.query_one(SessionList)
        await wait_for(lambda: main.failed.get(fe.session_id), "FE marked")
        await wait_for(lambda: fe.state.value == "ready", "FE back to ready")
        await pilot.pause()
        assert [r.state for r in listing.rows_shown if r.role == "FE"] == [JOB_FAILED]
        assert listing.rows_shown[0].role == "FE" and "1 job failed" in main.title
        # F7 goes to it and the mark is gone: the operator has seen it
        main.query_one(SessionList).focus()
        await pilot.press("f7")
        assert main.selected == fe.session_id and fe.session_id not in main.failed
        await pilot.pause()
        assert [r.state for r in listing.rows_shown if r.role == "FE"] == ["ready"]
        assert main.title == "semo"
