"""The question inbox: pending ASK_USER questions of every agent, answered from the keyboard.

How it works: docs/CONSOLE.md, "The question inbox panel".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.geometry import Size
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from semo.console.focus import focus_now
from semo.console.panel_text import (
    NO_QUESTIONS,
    inbox_rows,
    question_answer_parts,
    question_key_hints,
    question_line_parts,
    question_text_parts,
)
from semo.console.widgets.key_bar import KeyBar

if TYPE_CHECKING:
    from semo.engine.interface import QuestionView


class QuestionList(OptionList):
    """The inbox's list: up/down pick a question; PgUp/PgDn/Home/End scroll the selected
    question's text (the list shows a few rows at most)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("pageup", "scroll_text('page_up')", show=False),
        Binding("pagedown", "scroll_text('page_down')", show=False),
        Binding("home", "scroll_text('home')", show=False),
        Binding("end", "scroll_text('end')", show=False),
    ]

    def action_scroll_text(self, how: str) -> None:
        text = self.screen.query_one("#question-text", VerticalScroll)
        scroll = getattr(text, f"scroll_{how}")
        scroll(animate=False)


class QuestionsPanel(Vertical, can_focus=False):
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

    @dataclass
    class Showing(Message):
        """The inbox selected another question: the main screen shows its asker."""

        question: QuestionView

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.questions: list[QuestionView] = []
        self.agent_roles: dict[str, str] = {}
        self._fitted: tuple[int, int, bool] | None = None  # list rows, text rows, scrolls
        self._shown_id: str | None = None
        #: questions answered from here, hidden until the store no longer lists them
        self.sent: dict[str, QuestionView] = {}

    def compose(self) -> ComposeResult:
        yield QuestionList(id="question-list")
        with VerticalScroll(id="question-text", can_focus=False):
            yield Static(NO_QUESTIONS, id="question-body", classes="empty")
        yield Static("", id="question-detail")  # how to answer: the options, y/n, Enter
        yield Input(placeholder="your answer, Enter to send", id="answer-input")

    def on_mount(self) -> None:
        self.query_one("#question-detail").display = False
        # after each layout of the screen (a resize, the session list growing...): fit again
        self.screen.screen_layout_refresh_signal.subscribe(self, lambda _screen: self._fit())
        text = self.query_one("#question-text", VerticalScroll)
        self.watch(text, "scroll_y", lambda _y: self._say_pending(), init=False)

    @property
    def selected(self) -> QuestionView | None:
        index = self.query_one(OptionList).highlighted
        if index is None or index >= len(self.questions):
            return None
        return self.questions[index]

    @property
    def KEY_HINTS(self) -> list[tuple[str, str, float]]:
        """The selected question's keys for the key bar; none while nothing waits."""
        question = self.selected
        if question is None:
            return []
        options = len(question.options or ["yes", "no"])
        return question_key_hints(question.question_type, options)

    def show(self, questions: list[QuestionView], agent_roles: dict[str, str]) -> None:
        """The pending questions (the store's list), less those answered from here."""
        listed = {q.id for q in questions}
        self.sent = {qid: q for qid, q in self.sent.items() if qid in listed}  # others: done
        questions = sorted(
            (q for q in questions if q.id not in self.sent), key=lambda q: q.created_at
        )  # the oldest first
        self.agent_roles = agent_roles
        if [q.id for q in questions] == [q.id for q in self.questions]:
            return
        self._list(questions, self.selected.id if self.selected else None)

    def waiting(self) -> int:
        """What waits for the operator here (the attention count's share)."""
        return len(self.questions)

    def restore(self, question_id: str) -> None:
        """The engine refused the answer to `question_id`: listed again at the next `show`."""
        self.sent.pop(question_id, None)

    def _answer(
        self, question: QuestionView, *, text: str | None = None, option: int | None = None
    ) -> None:
        """Send the answer, and take the question out of the list at once: the next one is
        selected (the one after it, else the one before)."""
        self.sent[question.id] = question
        self.post_message(self.Answered(question.id, text=text, option=option))
        index = self.questions.index(question)
        rest = [q for q in self.questions if q.id != question.id]
        after = rest[min(index, len(rest) - 1)].id if rest else None
        self._list(rest, after)

    def _list(self, questions: list[QuestionView], keep: str | None) -> None:
        agent_roles = self.agent_roles
        self.questions = questions
        options = self.query_one(OptionList)
        options.clear_options()
        options.add_options(
            Option(
                Text.assemble(
                    *question_line_parts(
                        agent_roles.get(q.agent_id, "?"), q.question, q.question_type
                    )
                )
            )
            for q in questions
        )
        ids = [q.id for q in questions]
        if questions:
            options.highlighted = ids.index(keep) if keep in ids else 0
        self._describe()

    @on(OptionList.OptionHighlighted)
    def _describe(self) -> None:
        scroller = self.query_one("#question-text", VerticalScroll)
        text = self.query_one("#question-body", Static)
        detail = self.query_one("#question-detail", Static)
        question = self.selected
        text.set_class(question is None, "empty")
        detail.display = question is not None
        if question is None:
            self._shown_id = None
            text.update(NO_QUESTIONS)
        else:
            role = self.agent_roles.get(question.agent_id, "?")
            text.update(
                Text.assemble(*question_text_parts(role, question.question, question.question_type))
            )
            detail.update(
                Text.assemble(
                    *question_answer_parts(question.question_type, list(question.options))
                )
            )
            if question.id != self._shown_id:
                self._shown_id = question.id
                scroller.scroll_home(animate=False, immediate=True)
                self.post_message(self.Showing(question))
        self._fitted = None
        self._fit()
        for bar in self.screen.query(KeyBar):  # the keys follow the question shown
            bar.update_keys()

    def _fit(self) -> None:
        """The list's and the text's rows for the room the sidebar leaves the inbox: the room
        it needs if there is that much, the commands panel below keeping at least its minimum."""
        parent = self.parent
        width = self.content_region.width
        if not isinstance(parent, Widget) or not width or not parent.size.height:
            return
        room = parent.content_region.height - self.styles.gutter.height
        after = False
        for sibling in parent.children:
            if sibling is self:
                after = True
            elif sibling.display and after:  # below the inbox: its minimum height
                minimum = sibling.styles.min_height
                room -= int(minimum.resolve(parent.size, self.app.size)) if minimum else 0
            elif sibling.display:
                room -= sibling.outer_size.height
        listing = self.query_one(QuestionList)
        scroller = self.query_one("#question-text", VerticalScroll)
        text = self.query_one("#question-body", Static)
        detail = self.query_one("#question-detail", Static)
        field = self.query_one("#answer-input", Input)
        answer = _rows(detail, width) if detail.display else 0
        answer += field.outer_size.height if field.display else 0
        needed = _rows(text, width)
        list_rows, text_rows = inbox_rows(room, len(self.questions), needed, answer)
        scrolls = text_rows < needed
        if (list_rows, text_rows, scrolls) == self._fitted:
            return
        self._fitted = (list_rows, text_rows, scrolls)
        listing.styles.max_height = list_rows if self.questions else None
        scroller.styles.height = text_rows if scrolls else "auto"
        self._say_pending()

    def _say_pending(self) -> None:
        """The border: how many questions wait, and that the text scrolls when it does."""
        count = len(self.questions)
        pending = f"{count} pending" if count else ""
        text = self.query_one("#question-text", VerticalScroll)
        if self._fitted and self._fitted[2]:
            more = "PgUp: back" if text.scroll_y >= text.max_scroll_y > 0 else "PgDn: more"
            pending = f"{pending} · {more}"
        self.border_subtitle = pending

    @on(OptionList.OptionSelected)
    def _open_input(self) -> None:
        question = self.selected
        if question is not None and question.question_type in ("text", "permission"):
            field = self.query_one("#answer-input", Input)
            field.add_class("visible")
            focus_now(field)

    @on(Input.Submitted, "#answer-input")
    def _send_text(self, event: Input.Submitted) -> None:
        question = self.selected
        if question is not None and event.value.strip():
            text = event.value
            if question.question_type == "permission":
                text = f"deny: {text.strip()}"  # the line is the reason of a denial
            self._answer(question, text=text)
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
            self._answer(question, option=number)

    def action_confirm(self, answer: str) -> None:
        question = self.selected
        if question is not None and question.question_type == "confirm":
            self._answer(question, text=answer)
        elif question is not None and question.question_type == "permission":
            self._answer(question, text="allow" if answer == "yes" else "deny")


def _rows(widget: Static, width: int) -> int:
    """The rows `widget` takes at `width` columns (its padding included)."""
    inner = max(width - widget.styles.gutter.width, 1)
    size = Size(width, 0)
    return widget.get_content_height(size, size, inner) + widget.styles.gutter.height
