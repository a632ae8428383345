"""The diff view (`d` in the jobs view) with a hostile repository's diff: escape sequences (OSC
52 clipboard write, a screen clear, C1 CSI), markup, a bidi override, wide characters and tabs in
file names and lines. Every line is shown literally (control characters made visible), nothing
unsafe reaches the operator's terminal, and n/p page through the files at 80x24."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import App
from textual.widgets import RichLog, Static

from semo.console.diff_text import file_heading, patch_lines
from semo.console.screens.job_diff import JobDiffScreen
from tests.support.hostile_display import UNSAFE_OUTPUT, terminal_output

HOSTILE_LINE = (
    "+x = '\x1b]52;c;aGFja2Vk\x07 \x1b[2J \x9b2J [bold red]loud[/] [@click=app.quit]q[/] \u202eab'"
)
WIDE = "+名前 = '山田太郎'\t# wide"


@dataclass
class Change:
    """A file of a diff, as engine.jobwork.review.FileDiff carries it."""

    path: str
    status: str
    added: int | None
    removed: int | None
    patch: str
    old_path: str | None = None


FILES = [
    Change(
        "app/\x1b[31mlogin\u202e.py",
        "M",
        2,
        1,
        "diff --git a/app/login.py b/app/login.py\n--- a/app/login.py\n+++ b/app/login.py\n"
        f"@@ -1,2 +1,3 @@\n context\n-old = 1\n{HOSTILE_LINE}\n{WIDE}\n+++ not a header\n",
    ),
    Change("logo.png", "A", None, None, "Binary files /dev/null and b/logo.png differ\n"),
    Change("new.txt", "R", 1, 0, "@@ -0,0 +1 @@\n+hi\n", old_path="old.txt"),
]


class DiffApp(App[None]):
    def on_mount(self) -> None:
        self.push_screen(JobDiffScreen("job job-0001 · semo/job/0001", FILES))


def log_lines(screen: JobDiffScreen) -> list[str]:
    return [strip.text for strip in screen.query_one("#diff-body", RichLog).lines]


def test_lines_are_literal_and_coloured_by_what_they_are() -> None:
    lines = patch_lines(FILES[0].patch)
    texts = [line.plain for line in lines]
    assert texts[4] == " context"
    hostile = texts[6]
    assert "\\x1b]52;c;aGFja2Vk\\x07" in hostile and "\\x1b[2J" in hostile
    assert "\\x9b2J" in hostile and "\\u202e" in hostile
    assert "[bold red]loud[/] [@click=app.quit]q[/]" in hostile
    assert "\t" not in texts[7] and "山田太郎" in texts[7]
    styles = [str(line.spans[0].style) if line.spans else "" for line in lines]
    assert styles[0] == "bold" and styles[3] == "cyan"
    assert styles[5] == "red" and styles[6] == "green"
    assert styles[8] == "green"  # "+++" inside a hunk is an added line, not a header
    assert file_heading(FILES[0], 1, 3) == "1/3  M app/\\x1b[31mlogin\\u202e.py  +2 -1"
    assert file_heading(FILES[1], 2, 3).endswith("logo.png  binary")
    assert file_heading(FILES[2], 3, 3) == "3/3  R old.txt -> new.txt  +1 -0"


async def test_the_view_pages_through_files_and_writes_nothing_unsafe() -> None:
    app = DiffApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, JobDiffScreen)
        assert screen.heading_text.startswith("1/3  M app/")
        assert any("[bold red]loud[/]" in line for line in log_lines(screen))
        output = terminal_output(app)  # type: ignore[arg-type]
        assert UNSAFE_OUTPUT.search(output) is None
        assert "\\x1b]52" in output and "山田" in output
        await pilot.press("n")
        assert screen.heading_text.startswith("2/3  A logo.png")
        await pilot.press("n", "n")
        assert screen.heading_text.startswith("1/3")  # wraps around
        await pilot.press("p")
        assert screen.heading_text == "3/3  R old.txt -> new.txt  +1 -0"
        assert log_lines(screen) == ["@@ -0,0 +1 @@", "+hi"]
        heading = str(screen.query_one("#diff-heading", Static).render())
        assert "old.txt -> new.txt" in heading
        await pilot.press("escape")
        assert not isinstance(app.screen, JobDiffScreen)


async def test_a_long_diff_scrolls_at_80x24() -> None:
    patch = "@@ -1,200 +1,200 @@\n" + "".join(f"+line {n} " + "x" * 150 + "\n" for n in range(200))
    app = App[None]()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = JobDiffScreen("job", [Change("big.txt", "M", 200, 0, patch)])
        await app.push_screen(screen)
        await pilot.pause()
        body = screen.query_one("#diff-body", RichLog)
        assert body.scroll_y == 0 and body.max_scroll_y > 150
        assert body.max_scroll_x > 50  # long lines scroll sideways, never wrap
        await pilot.press("pagedown", "pagedown")
        assert body.scroll_y > 20
        await pilot.press("end")
        assert body.scroll_y == body.max_scroll_y
