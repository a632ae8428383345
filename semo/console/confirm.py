"""A yes/no question before anything destructive (e.g. stopping the office's engine)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from semo.console.widgets.key_bar import KeyBar


class Confirm(ModalScreen[bool]):
    """Dismissed with True only for the confirming button (or y); n and Escape say no."""

    DEFAULT_CSS = """
    Confirm { align: center middle; }
    Confirm > Vertical {
        width: 60; max-width: 100%; height: auto;
        border: round $error; background: $surface; padding: 1 2;
    }
    Confirm Horizontal { height: auto; align: center middle; margin-top: 1; }
    Confirm Button { margin: 0 1; }
    """
    SCREEN_HINTS: ClassVar[list[tuple[str, str, float]]] = [
        ("y", "yes", 0.5),
        ("n/Esc", "no", 0.6),
        ("Tab", "next button", 2.0),
        ("Enter", "press it", 1.0),
    ]
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, question: str, confirm: str) -> None:
        super().__init__()
        self._question = question
        self._confirm = confirm

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self._question, markup=False)
            with Horizontal():
                yield Button(self._confirm, variant="error", id="yes")
                yield Button("No, go back", id="no")
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)


class Choose(ModalScreen[str | None]):
    """One of a few actions, or none: each button's id is what the dialog is dismissed with
    (its key too: the first letter of the id); n and Escape dismiss it with None."""

    DEFAULT_CSS = Confirm.DEFAULT_CSS.replace("Confirm", "Choose")
    SCREEN_HINTS: ClassVar[list[tuple[str, str, float]]] = [
        ("n/Esc", "no", 0.6),
        ("Tab", "next button", 2.0),
        ("Enter", "press it", 1.0),
    ]
    BINDINGS: ClassVar[list[BindingType]] = [Binding("n,escape", "choose('')", "No")]

    def __init__(self, question: str, choices: list[tuple[str, str]]) -> None:
        """`choices`: (id, label) of each button, e.g. ("turn", "t: cancel the turn")."""
        super().__init__()
        self._question = question
        self._choices = choices

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self._question, markup=False)
            with Horizontal():
                for choice, label in self._choices:
                    yield Button(label, variant="error", id=choice)
                yield Button("No, go back", id="no")
        yield KeyBar()

    def on_mount(self) -> None:
        for choice, _label in self._choices:
            self._bindings.bind(choice[0], f"choose('{choice}')", show=False)
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(None if event.button.id == "no" else event.button.id)

    def action_choose(self, choice: str) -> None:
        self.dismiss(choice or None)
