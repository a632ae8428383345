"""The question inbox: pending ASK_USER questions of every agent, answered from the keyboard.

The oldest pending question is selected and shown in full below the list: its whole text and
every option on a line of its own, so a 4-option choice fits at 80x24.

Keys while the panel has focus: up/down pick a question; 1-9 answer a choice (or confirm)
question with that option; y/n answer a confirm question; Enter on a text question opens the
answer line (Enter sends it, Escape closes it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from console.focus import focus_now
from console.panel_text import NO_QUESTIONS, question_detail_parts, question_line_parts

if TYPE_CHECKING:
    from engine.store.models import UserQuestion


class QuestionsPanel(Vertical, can_focus=False):
    KEY_HINTS: ClassVar[list[tuple[str, str, float]]] = [
        ("1-9", "answer", 0.5),
        ("Enter", "type answer", 2.5),
    ]
    BORDER_TITLE = "Questions"
    BINDINGS: ClassVar[list[BindingType]] = [
        *(Binding(str(n), f"pick({n})", show=False) for n in range(1, 10)),
        Binding("y", "confirm('yes')", show=False),
        Binding("n", "confirm('no')", show=False),
        Binding("escape", "close_answer", show=False),
    ]

    @dataclass
    class Answered(Message):
        """The operator answered: exactly one of text / option is set."""

        question_id: str
        text: str | None = None
        option: int | None = None

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.questions: list[UserQuestion] = []
        self.agent_roles: dict[str, str] = {}

    def compose(self) -> ComposeResult:
        yield OptionList(id="question-list")
        yield Static(NO_QUESTIONS, id="question-detail", classes="empty")
        yield Input(placeholder="your answer, Enter to send", id="answer-input")

    @property
    def selected(self) -> UserQuestion | None:
        index = self.query_one(OptionList).highlighted
        if index is None or index >= len(self.questions):
            return None
        return self.questions[index]

    def show(self, questions: list[UserQuestion], agent_roles: dict[str, str]) -> None:
        questions = sorted(questions, key=lambda q: q.created_at)  # the oldest first
        if [q.id for q in questions] == [q.id for q in self.questions]:
            return
        keep = self.selected.id if self.selected else None
        self.questions, self.agent_roles = questions, agent_roles
        options = self.query_one(OptionList)
        options.clear_options()
        options.add_options(
            Option(
                Text.assemble(*question_line_parts(agent_roles.get(q.agent_id, "?"), q.question))
            )
            for q in questions
        )
        ids = [q.id for q in questions]
        if questions:
            options.highlighted = ids.index(keep) if keep in ids else 0
        self.border_subtitle = f"{len(questions)} pending" if questions else ""
        self._describe()

    @on(OptionList.OptionHighlighted)
    def _describe(self) -> None:
        detail = self.query_one("#question-detail", Static)
        question = self.selected
        if question is None:
            detail.update(NO_QUESTIONS)
            return
        role = self.agent_roles.get(question.agent_id, "?")
        parts = question_detail_parts(
            role, question.question, question.question_type, list(question.options)
        )
        text = Text.assemble(*parts)
        detail.update(text)

    @on(OptionList.OptionSelected)
    def _open_input(self) -> None:
        question = self.selected
        if question is not None and question.question_type == "text":
            field = self.query_one("#answer-input", Input)
            field.add_class("visible")
            focus_now(field)

    @on(Input.Submitted, "#answer-input")
    def _send_text(self, event: Input.Submitted) -> None:
        question = self.selected
        if question is not None and event.value.strip():
            self.post_message(self.Answered(question.id, text=event.value))
        event.input.value = ""
        event.input.remove_class("visible")
        focus_now(self.query_one(OptionList))

    def action_close_answer(self) -> None:
        field = self.query_one("#answer-input", Input)
        if not field.has_class("visible"):
            raise SkipAction()  # Escape is the screen's then
        field.value = ""
        field.remove_class("visible")
        focus_now(self.query_one(OptionList))

    def action_pick(self, number: int) -> None:
        question = self.selected
        if question is None or question.question_type == "text":
            return
        options = question.options or ["yes", "no"]
        if 1 <= number <= len(options):
            self.post_message(self.Answered(question.id, option=number))

    def action_confirm(self, answer: str) -> None:
        question = self.selected
        if question is not None and question.question_type == "confirm":
            self.post_message(self.Answered(question.id, text=answer))
