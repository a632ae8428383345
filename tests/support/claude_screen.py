"""Waiting on a Claude Code screen in tests (semo's TerminalSession or tmux text)."""

from __future__ import annotations

from collections.abc import Callable

from semo.engine.agents.claude.screen import input_box_in
from semo.engine.terminal.session import TerminalSession
from tests.support.waiting import eventually


def screen_text(session: TerminalSession) -> str:
    """The visible rows, with the CLI's U+00A0 after `❯` read as a space."""
    return "\n".join(session.screen.text_rows()).replace("\xa0", " ")


def prompt_ready(screen: str) -> bool:
    """Claude Code's input box is drawn (the engine's own rule, on screen text)."""
    return input_box_in(screen.splitlines())


async def wait_screen(
    session: TerminalSession, predicate: Callable[[str], bool], timeout: float, what: str
) -> str:
    """Poll the screen until `predicate` holds; AssertionError with the screen on timeout or
    when the program exited first."""

    def screen() -> str:
        if session.exit_status is not None:
            raise AssertionError(f"the program exited waiting for {what}: {session.exit_status}")
        return screen_text(session)

    text: str = await eventually(screen, timeout, what=what, until=predicate, interval=0.03)
    return text
