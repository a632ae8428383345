"""The console over a real engine: scripted agents in real PTYs, the sqlite store, Textual's
Pilot at the keyboard.

Checked: a choice question and a text question answered from the keyboard (store row answered,
the agent's next prompt is the answer); the session list lists the sessions; F2 and F3 change the
visible panes; a prompt typed in the prompt line reaches the selected agent; the start-up heap
is frozen while the console runs (engine/heap.py) and thawed when it closes.

The first two run on both implementations of the engine interface: an in-process engine and
the control client attached to its socket (tests/support/console_engines.py).
"""

from __future__ import annotations

import gc
from pathlib import Path

from textual import events

from semo.console.app import SemoApp
from semo.console.widgets.questions_panel import QuestionsPanel
from semo.console.widgets.session_list import SessionList
from semo.console.widgets.terminal_pane import TerminalPane
from semo.engine.in_process import InProcessEngine
from semo.engine.store.models import UserQuestion
from tests.console.console_snapshot_app import console_engine, settle_with_questions
from tests.support.console_app import runtime_dir_fixture, waiter
from tests.support.console_engines import console_on, engine_kind_fixture
from tests.support.script_agent import logged_prompts

TIMEOUT = 15.0


runtime_dir = runtime_dir_fixture("semo-con-")
engine_kind = engine_kind_fixture()


def prompts(folder: Path, role: str) -> list[str]:
    return logged_prompts(folder / f"{role}.log")


wait_for = waiter(TIMEOUT)


def answered(folder: Path, role: str) -> bool:
    return any("Answer to your question" in p for p in prompts(folder, role))


async def test_questions_are_answered_from_the_keyboard(
    tmp_path: Path, runtime_dir: Path, engine_kind: str
) -> None:
    engine = console_engine(tmp_path, runtime_dir, control=engine_kind == "client")
    async with console_on(engine_kind, engine) as app, app.run_test(size=(160, 48)) as pilot:
        await wait_for(lambda: getattr(app.screen, "started", False), "the engine")
        # a question left by a session of an earlier run cannot be answered: not in the inbox
        stale = UserQuestion(
            office_id=engine.office_id,
            agent_id=engine.agents["FE"].id,
            session_id="session-of-an-earlier-run",
            question="stale?",
        )
        await engine.store.create_question(stale)
        await settle_with_questions(app)
        panel = app.screen.query_one(QuestionsPanel)
        assert app.screen.query_one(SessionList).row_count == 2
        assert "stale?" not in [q.question for q in panel.questions]

        await pilot.press("f4")
        by_role = {panel.agent_roles[q.agent_id]: i for i, q in enumerate(panel.questions)}
        panel.query_one("#question-list").highlighted = by_role["FE"]  # type: ignore[attr-defined]
        await pilot.press("2")  # option 2 of the choice question
        await wait_for(lambda: answered(tmp_path, "FE"), "FE receiving its answer")
        fe_prompt = next(p for p in prompts(tmp_path, "FE") if "Answer" in p)
        assert fe_prompt.endswith(": lite (options were: pg, lite)")

        await wait_for(lambda: len(panel.questions) == 1, "one question left")
        await pilot.press("enter", *"draft", "escape")  # Escape closes the answer line only
        field = panel.query_one("#answer-input")
        assert not field.has_class("visible") and field.value == ""  # type: ignore[attr-defined]
        assert app.focused is panel.query_one("#question-list")
        await pilot.press("enter")  # the text question: opens the answer line
        await pilot.press(*"/health", "enter")
        await wait_for(lambda: answered(tmp_path, "BE"), "BE receiving its answer")
        questions = await engine.store.list_questions(engine.office_id, status=None)
        answered_ones = [q for q in questions if q.id != stale.id]
        assert sorted((q.answer or "") for q in answered_ones) == ["/health", "lite"]
        assert all(q.status == "answered" for q in answered_ones)


async def test_layout_zoom_and_prompt_line(
    tmp_path: Path, runtime_dir: Path, engine_kind: str
) -> None:
    scripts = {"FE": [{"match": "hello", "text": "hi there"}], "BE": []}
    engine = console_engine(tmp_path, runtime_dir, scripts=scripts, control=engine_kind == "client")
    async with console_on(engine_kind, engine) as app, app.run_test(size=(120, 36)) as pilot:
        await wait_for(lambda: getattr(app.screen, "started", False), "the engine")
        panes = list(app.screen.query(TerminalPane))
        assert len(panes) == 2 and [p.display for p in panes] == [True, False]  # one large pane
        fe_pane = next(p for p in panes if "FE" in str(p.border_title))
        fe_pane.focus()
        await pilot.press(TerminalPane.PREFIX_KEY, "o")  # the prefix, then o: out of the pane
        assert isinstance(app.focused, SessionList)
        await pilot.press("f3")  # zoom the selected (FE) pane: the whole terminal
        assert app.screen.maximized is fe_pane and fe_pane.has_focus
        assert [p.display for p in panes] == [p is fe_pane for p in panes]
        await pilot.press(TerminalPane.PREFIX_KEY, "z")
        assert app.screen.maximized is None
        await pilot.press(TerminalPane.PREFIX_KEY, "o", "f2")  # 1 -> 2 panes
        assert all(p.display for p in panes)
        await pilot.press("f6", *"hello", "enter")
        await wait_for(lambda: "hello" in prompts(tmp_path, "FE"), "FE receiving the prompt")
        # start-up objects kept out of the collector's passes, a moment after the first frame
        await wait_for(lambda: gc.get_freeze_count() > 0, "the start-up heap frozen")
    assert gc.get_freeze_count() == 0  # and given back when the console closes


async def test_f4_and_a_digit_typed_together_answer_the_question(
    tmp_path: Path, runtime_dir: Path
) -> None:
    # typing fast (or over SSH) puts F4 and the digit in one read: both keys are queued before
    # the console handles F4; the digit must reach the inbox F4 focused, not the widget before
    engine = console_engine(tmp_path, runtime_dir)
    app = SemoApp(InProcessEngine(engine))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle_with_questions(app)
        panel = app.screen.query_one(QuestionsPanel)
        first = panel.questions[0]
        role = panel.agent_roles[first.agent_id]
        app.screen.query_one(SessionList).focus()
        await pilot.pause()
        assert isinstance(app.focused, SessionList)
        for key, character in (("f4", None), ("1", "1")):
            app.post_message(events.Key(key, character))  # in the queue together
        await wait_for(lambda: answered(tmp_path, role), f"{role} receiving its answer")
        assert app.focused is panel.query_one("#question-list")
