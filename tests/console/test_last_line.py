"""The session list's last-line column: the last line with text, without an agent's bullet;
prompt characters and the closing line of a protocol block are passed over."""

from __future__ import annotations

from types import SimpleNamespace

from semo.console.panel_text import screen_last_line


def shown(*rows: str) -> str:
    return screen_last_line(SimpleNamespace(display=list(rows)))


def test_the_last_line_with_text() -> None:
    assert shown("● be: read the task, 3 files checked", "❯ ", "") == (
        "be: read the task, 3 files checked"
    )
    assert shown("● [ASK_USER]", '● {"type": "choice"}', "● [/ASK_USER]", "❯") == (
        '{"type": "choice"}'
    )
    assert shown("⏺ I added the endpoint.", "$ ") == "I added the endpoint."
    assert shown("$ ls", "file.txt", "$") == "file.txt"
    assert shown("", "  ") == ""
