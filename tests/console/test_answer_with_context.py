"""Answer with context (issue 25, 1): the question under the inbox's cursor drives the pane, an
answer moves the inbox to the next question at once, and a digit typed twice never answers the
same question twice. Real engine, scripted agents in PTYs, the sqlite store, at 80x24, 120x40
and 200x60."""

from __future__ import annotations

from pathlib import Path

from textual import events

from semo.console.app import SemoApp
from semo.console.panel_text import UUID
from semo.console.widgets.questions_panel import QuestionsPanel
from semo.engine.in_process import InProcessEngine
from tests.console.console_snapshot_app import console_engine, settle_with_questions
from tests.support.console_app import at_three_sizes, runtime_dir_fixture, waiter
from tests.support.script_agent import logged_prompts

runtime_dir = runtime_dir_fixture("semo-ctx-")
wait_for = waiter(15.0)


def answers(folder: Path, role: str) -> list[str]:
    return [p for p in logged_prompts(folder / f"{role}.log") if "Answer to your question" in p]


@at_three_sizes
async def test_the_inbox_cursor_drives_the_pane_and_a_double_digit_answers_once(
    tmp_path: Path, runtime_dir: Path, size: tuple[int, int]
) -> None:
    engine = console_engine(tmp_path, runtime_dir)
    app = SemoApp(InProcessEngine(engine))
    async with app.run_test(size=size) as pilot:
        await settle_with_questions(app)
        screen = app.screen
        panel = screen.query_one(QuestionsPanel)
        listing = panel.query_one("#question-list")
        roles = [panel.agent_roles[q.agent_id] for q in panel.questions]
        assert sorted(roles) == ["BE", "FE"]
        # the inbox's selected question is the pane: move the cursor, the pane follows
        for index, question in enumerate(panel.questions):
            listing.highlighted = index  # type: ignore[attr-defined]
            await pilot.pause()
            assert screen.selected == question.session_id, roles[index]
            assert screen.panes[question.session_id].display
        fe = next(q for q in panel.questions if panel.agent_roles[q.agent_id] == "FE")
        be = next(q for q in panel.questions if q is not fe)
        listing.highlighted = panel.questions.index(fe)  # type: ignore[attr-defined]
        await pilot.pause()
        # two digits in one read: the first answers FE's choice question, the second finds
        # BE's text question (a digit does not answer text): nothing answered twice
        for _ in range(2):
            app.post_message(events.Key("1", "1"))
        await pilot.pause()
        assert panel.selected is not None and panel.selected.id == be.id  # moved at once
        assert screen.selected == be.session_id  # and the pane with it
        await wait_for(lambda: answers(tmp_path, "FE"), "FE receiving its answer")
        await wait_for(lambda: len(panel.questions) == 1 and not panel.sent, "the store agrees")
        assert len(answers(tmp_path, "FE")) == 1
        stored = {q.id: q for q in await engine.store.list_questions(engine.office_id, status=None)}
        assert stored[fe.id].answer == "pg" and stored[be.id].status == "pending"
        shown = [f"{n.title} {n.message}" for n in app._notifications]
        assert not any(UUID.search(text) for text in shown), shown
        assert not any(n.title == "Not answered" for n in app._notifications), shown


async def test_a_refused_answer_names_the_question_and_brings_it_back(
    tmp_path: Path, runtime_dir: Path
) -> None:
    # answered elsewhere meanwhile (another console, `semo answer`): the console's answer is
    # refused; the message says whose question, without a bare id, and the inbox agrees
    engine = console_engine(tmp_path, runtime_dir)
    app = SemoApp(InProcessEngine(engine))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle_with_questions(app)
        panel = app.screen.query_one(QuestionsPanel)
        fe = next(q for q in panel.questions if panel.agent_roles[q.agent_id] == "FE")
        panel.query_one("#question-list").highlighted = panel.questions.index(fe)  # type: ignore[attr-defined]
        await engine.store.answer_question(fe.id, "lite")  # behind the console's back
        await pilot.press("2")
        await wait_for(
            lambda: any(n.title == "Not answered" for n in app._notifications), "the refusal"
        )
        refusal = next(n for n in app._notifications if n.title == "Not answered")
        assert refusal.message.startswith("FE: Which DB?"), refusal.message
        assert fe.id[:8] in refusal.message and not UUID.search(refusal.message)
        await wait_for(lambda: fe.id not in panel.sent, "the question forgotten")
        assert fe.id not in [q.id for q in panel.questions]
