"""Screen fidelity: semo's terminal core against tmux 3.3a as the reference terminal.

Every case runs the same program at the same size, with the same environment, working directory
and keys, once through `engine.terminal.capture.capture` (in process) and once in a private tmux
server (`tests.support.tmux.tmux_capture`), and requires the same screen text, row for row. The
two runs go side by side (tmux in a worker thread) except where a program writes shared state.

Everything is pinned so a program shows the same thing twice: `bash --norc --noprofile` with
`PS1='$ '`, HOME in a temporary directory, C.UTF-8, fixed file names, a git repository with fixed
names and dates, no history files. The only normalised case is `top` (see there).
"""

from __future__ import annotations

import asyncio
import difflib
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest
from wcwidth import wcswidth

from semo.engine.terminal.capture import CaptureResult, StyleSpan, capture
from semo.engine.terminal.session import TerminalSession, child_environment
from semo.engine.terminal.stream import make_screen_and_stream
from tests.support.claude_home import claude_argv, claude_env
from tests.support.scripted_api import ScriptedMessagesAPI
from tests.support.tmux import TmuxServer, tmux_capture, tmux_capture_styled
from tests.support.waiting import eventually, wait_until

pytestmark = pytest.mark.tmux

TERM = "xterm-256color"  # what semo gives a child by default; tmux's default-terminal is set alike
PATH = "/usr/local/bin:/usr/bin:/bin"
BASH = ["bash", "--norc", "--noprofile"]
VIM = ["vim", "-u", "NONE", "-N", "-i", "NONE", "-n"]
# With -u NONE vim waits 'timeoutlen' (1 s) after <Esc> for the rest of a key code before it
# leaves insert mode; a short 'ttimeoutlen' makes <Esc> act at once, so the settled screen is
# the one after the mode change.
VIM_FAST_ESC = ["-c", "set ttimeout ttimeoutlen=10"]
SETTLE_MS = 300
TIMEOUT = 10.0


def lingering(argv: Sequence[str]) -> list[str]:
    """`argv`, then stay alive: tmux can lose all the output of a program that exits at once.

    Under load, a pane whose program has exited before tmux's first read of the pty sometimes
    shows nothing at all (pane dead, status 0, empty screen). Waiting after the program keeps
    the reference reliable; semo reads the same argv.
    """
    return ["sh", "-c", '"$@"; exec sleep 600', "sh", *argv]


# -- fixtures ----------------------------------------------------------------------------------


def _write(path: Path, text: str, mode: int | None = None) -> Path:
    path.write_text(text, encoding="utf-8")
    if mode is not None:
        path.chmod(mode)
    return path


def _git(repo: Path, *args: str, date: str) -> None:
    env = {
        "PATH": PATH,
        "HOME": str(repo.parent / "githome"),
        "LANG": "C.UTF-8",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Ada Lovelace",
        "GIT_AUTHOR_EMAIL": "ada@example.org",
        "GIT_COMMITTER_NAME": "Ada Lovelace",
        "GIT_COMMITTER_EMAIL": "ada@example.org",
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_DATE": date,
    }
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def _make_repo(repo: Path) -> None:
    """Two branches with interleaved commits, merged with --no-ff: a graph with a fork."""
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main", date="2024-01-01T10:00:00+00:00")
    commits = [
        ("main", "readme"),
        ("main", "core"),
        ("feature", "widget"),
        ("main", "docs"),
        ("feature", "widget tests"),
        ("main", "release notes"),
    ]
    for n, (branch, name) in enumerate(commits):
        date = f"2024-01-0{n + 2}T12:{n:02d}:00+00:00"
        if n == 2:
            _git(repo, "checkout", "-q", "-b", "feature", date=date)
        elif n > 2:
            _git(repo, "checkout", "-q", branch, date=date)
        _write(repo / f"{name.replace(' ', '_')}.txt", f"{name}\n")
        _git(repo, "add", "-A", date=date)
        _git(repo, "commit", "-q", "-m", f"Add {name}", date=date)
    merged = "2024-01-09T09:00:00+00:00"
    _git(repo, "checkout", "-q", "main", date=merged)
    _git(repo, "merge", "-q", "--no-ff", "-m", "Merge branch 'feature'", "feature", date=merged)


ALT_SCRIPT = r"""
printf 'before switching\n'
printf '\033[?%sh' "$1"
printf 'ALTERNATE SCREEN (mode %s)\n' "$1"
printf 'press Enter to leave\n'
read line
printf '\033[?%sl' "$1"
printf 'after leaving mode %s\n' "$1"
"""

CURSOR_QUERY_SCRIPT = r"""
import os, sys, termios, tty

fd = sys.stdin.fileno()


def ask(query):
    old = termios.tcgetattr(fd)
    tty.setraw(fd)
    try:
        os.write(1, query)
        reply = b""
        while not reply.endswith(b"R"):
            reply += os.read(fd, 1)
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, old)
    return reply


sys.stdout.write("some text, then the query:")
sys.stdout.flush()
first = ask(b"\x1b[6n")
sys.stdout.write("\x1b[5;10Hmoved")
sys.stdout.flush()
second = ask(b"\x1b[6n")
sys.stdout.write("\r\n")
print("first reply:", repr(first))
print("second reply:", repr(second))
# private-prefix / string sequences a terminal must swallow, with text around each
sys.stdout.write(
    "A\x1b[>4;2mB\x1b[<uC\x1b[?1uD\x1b[>1uE\x1bP+q544e\x1b\\F\x1b_hello\x1b\\G\x1b[>4mH\n"
)
print("done")
"""

# Echoes each read as a bytes repr; the window title counts the reads handled so far, so the
# test types the next key only once the previous one was echoed (see type_each_key).
KEY_ECHO_SCRIPT = r"""
import os, tty

tty.setraw(0)
os.write(1, b"keys:\r\n\x1b]2;0\x07")
reads = 0
while True:
    data = os.read(0, 64)
    reads += 1
    if data == b"!":  # switch to application cursor keys (DECCKM)
        out = b"\x1b[?1h[app]"
    else:
        out = repr(data)[2:-1].encode()
    os.write(1, out + b"\x1b]2;%d\x07" % reads)
"""

# `CSI 18 G |` puts a bar at a fixed column: capture-pane text drops the padding of wide cells,
# so only something drawn after a character shows how many columns the terminal gave it.
BAR = "\x1b[18G|"

CJK_TEXT = (
    f"中文字符测试{BAR}\n"
    # 19 narrow cells, then a wide character that does not fit in the last column: it wraps
    "abcdefghijklmnopqrs中X\n"
    f"ｱｲｳｴｵ ＡＢ 한국{BAR}\n"
    "中文字符测试中文字符测\n"  # exactly 20 columns, then the newline
    # overwrite the right half of a wide character, then the left half of another (not at
    # column 0: there tmux 3.3a leaves the wide character in place, an off-by-one of its own)
    "a中文字\r\x1b[2Cx\x1b[2Cy\n"
    "end\n"
)

EMOJI_TEXT = (
    f"family 👨‍👩‍👧 end{BAR}\n"
    f"heart ❤️ end{BAR}\n"
    f"flag 🏳️‍🌈 end{BAR}\n"
    f"thumb 👍🏽 end{BAR}\n"
    f"mixed 👍🏽❤️👨‍👩‍👧🏳️‍🌈{BAR}tail\n"
    # a two-cell emoji in the last two columns fits; one column later it wraps
    f"{'x' * 28}👨‍👩‍👧\n"
    f"{'y' * 29}👍🏽z\n"
)

# Regional-indicator pairs (flags): one cell per indicator in tmux 3.3a (glibc's widths).
FLAGS_TEXT = f"🇺🇸 🇯🇵{BAR}\n{'x' * 19}🇺🇸\n{'y' * 18}🇫🇷z\n"

# Autowrap (DECAWM) off at the right margin: tmux drops a wide character that does not fit and
# any character written while a wrap is pending from before autowrap was switched off.
MARGIN_TEXT = (
    "\x1b[?7labcdefghijklmnopqrs中\x1b[?7h\n"
    "abcdefghijklmnopqrst\x1b[?7lXY\x1b[?7h\n"
    "\x1b[?7labcdefghijklmnopqrstuvw\x1b[?7h\n"
    "end\n"
)

COLOUR_TEXT = (
    "\x1b[38;5;196mred256\x1b[0m \x1b[48;5;21mbluebg\x1b[0m \x1b[38;5;3mpal3\x1b[0m\n"
    "\x1b[38;2;255;128;0mtruecolor\x1b[0m \x1b[48;2;1;2;3mdarkbg\x1b[0m\n"
    "\x1b[38:2::255:0:0mcolon-rgb\x1b[0m \x1b[38:2:0:255:0mcolon-no-cs\x1b[0m"
    " \x1b[38:5:46mcolon-256\x1b[0m\n"
    "\x1b[4:3mcurly\x1b[4:0m plain \x1b[1;4mboldul\x1b[22;24m after\n"
    "\x1b[1;38;5;208;48;2;10;20;30mmixed\x1b[m \x1b[31mred\x1b[91mbright\x1b[0m\n"
    "\x1b[7mreverse\x1b[27m \x1b[3mitalic\x1b[23m \x1b[9mstrike\x1b[29m \x1b[2mdim\x1b[22m\n"
    "\x1b[48:2::200:100:50mcolon-bg\x1b[49m \x1b[58:2::1:2:3m\x1b[4mul-colour\x1b[0m end\n"
)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Files, scripts, a git repository and a HOME shared by every case (read-only for them)."""
    root = tmp_path_factory.mktemp("fidelity")
    files = root / "files"
    (files / "adir").mkdir(parents=True)
    _write(files / "plain.txt", "plain\n")
    _write(files / "run.sh", "#!/bin/sh\necho run\n", mode=0o755)
    (files / "link").symlink_to("plain.txt")
    (files / "dangling").symlink_to("nowhere")
    _write(files / "file.txt", "first line\nsecond line\nthird line\n")
    _write(
        files / "numbers.txt",
        "".join(f"line {n:03d} of the numbered file\n" for n in range(1, 201)),
    )
    _write(files / "alt.sh", ALT_SCRIPT)
    _write(files / "cursor_query.py", CURSOR_QUERY_SCRIPT)
    _write(files / "key_echo.py", KEY_ECHO_SCRIPT)
    _write(files / "cjk.txt", CJK_TEXT)
    _write(files / "emoji.txt", EMOJI_TEXT)
    _write(files / "flags.txt", FLAGS_TEXT)
    _write(files / "margin.txt", MARGIN_TEXT)
    _write(files / "colours.txt", COLOUR_TEXT)
    _make_repo(root / "repo")
    (root / "home").mkdir()
    return root


def base_env(world: Path, **extra: str) -> dict[str, str]:
    env = {
        "PATH": PATH,
        "HOME": str(world / "home"),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PS1": "$ ",
        "HISTFILE": "",  # bash: no history file
        "LESSHISTFILE": "-",  # less: no history file
    }
    env.update(extra)
    return env


# -- running both --------------------------------------------------------------------------------


async def run_both(
    argv: Sequence[str],
    *,
    cols: int = 80,
    rows: int = 24,
    keys: Sequence[str] = (),
    env: Mapping[str, str],
    cwd: Path,
    settle_ms: int = SETTLE_MS,
    timeout: float = TIMEOUT,
    styled: bool = False,
    between: Callable[[], None] | None = None,
) -> tuple[CaptureResult, list[str], list[str] | None]:
    """(semo's capture, tmux's rows, tmux's rows with SGR if `styled`), same inputs for both.

    The two runs go side by side, or one after the other with `between()` called in between
    (to reset state the program writes)."""
    common = dict(cols=cols, rows=rows, keys=list(keys), settle_ms=settle_ms, timeout=timeout)
    common |= dict(env=dict(env), cwd=str(cwd))

    def reference() -> tuple[list[str], list[str] | None]:
        if styled:
            return tmux_capture_styled(list(argv), term=TERM, **common)
        return tmux_capture(list(argv), term=TERM, **common), None

    if between is None:
        tmux_run = asyncio.create_task(asyncio.to_thread(reference))
        semo = await capture(argv, term=TERM, **common)
        tmux_lines, tmux_styled = await tmux_run
    else:
        semo = await capture(argv, term=TERM, **common)
        between()
        tmux_lines, tmux_styled = await asyncio.to_thread(reference)
    return semo, tmux_lines, tmux_styled


def _cells(text: str) -> int:
    return max(wcswidth(text), len(text))


def _diff(semo: Sequence[str], tmux: Sequence[str]) -> str:
    """Both screens side by side (rows that differ marked, with their reprs), then a diff."""
    width = max([_cells(line) for line in (*semo, *tmux)] + [10])
    rows = [f"     {'semo'.ljust(width)} | tmux"]
    for y in range(max(len(semo), len(tmux))):
        a = semo[y] if y < len(semo) else "<missing>"
        b = tmux[y] if y < len(tmux) else "<missing>"
        mark = "  " if a == b else "!!"
        rows.append(f"{mark}{y:>2} {a}{' ' * (width - _cells(a))} | {b}")
        if a != b:
            rows.append(f"     semo {a!r}\n     tmux {b!r}")
    unified = difflib.unified_diff(list(tmux), list(semo), "tmux", "semo", lineterm="", n=1)
    return "\n".join([*rows, "", *unified])


def assert_same_screen(semo: Sequence[str], tmux: Sequence[str], what: str) -> None:
    if list(semo) != list(tmux):
        pytest.fail(f"{what}: semo's screen differs from tmux's\n{_diff(semo, tmux)}", False)


STYLE_FIELDS = ("fg", "bg", "bold", "underscore", "reverse", "italics", "strikethrough", "dim")
DEFAULT_STYLE = ("default", "default", False, False, False, False, False, False)


def _cell_styles(text: str, spans: Sequence[StyleSpan]) -> list[tuple[str, tuple]]:
    """(character, style) per character of a row's text, from its style spans."""
    styles = [DEFAULT_STYLE] * len(text)
    for span in spans:
        style = tuple(getattr(span, name) for name in STYLE_FIELDS)
        for i in range(span.start, min(span.end, len(text))):
            styles[i] = style
    return list(zip(text, styles, strict=True))


def styled_rows_via_semo(
    escaped: Sequence[str], cols: int, rows: int
) -> tuple[list[str], list[list[StyleSpan]]]:
    """tmux's `capture-pane -e` rows fed into a fresh semo screen, read back as a capture."""
    screen, stream = make_screen_and_stream(cols, rows)
    stream.feed("\r\n".join(escaped))
    lines = screen.text_rows()
    styles = [
        [StyleSpan(start=r.start, end=r.end, **r.style._asdict()) for r in screen.row_line(y).runs]
        for y in range(rows)
    ]
    return lines, styles


def assert_same_styles(semo: CaptureResult, escaped: Sequence[str], what: str) -> None:
    lines, styles = styled_rows_via_semo(escaped, semo.cols, semo.rows)
    assert_same_screen(semo.lines, lines, f"{what} (text of tmux's capture-pane -e)")
    problems = []
    for y, text in enumerate(semo.lines):
        ours = _cell_styles(text, semo.styles[y])
        theirs = _cell_styles(lines[y], styles[y])
        for x, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            if a != b:
                problems.append(f"row {y} char {x} {a[0]!r}: semo {a[1]} tmux {b[1]}")
    if problems:
        fields = ", ".join(STYLE_FIELDS)
        pytest.fail(f"{what}: cell styles differ ({fields})\n" + "\n".join(problems[:40]), False)


# -- cases ----------------------------------------------------------------------------------------


async def test_bash_prompt_and_ls_color(world: Path) -> None:
    keys = ["ls --color=always<Enter>", "ls -F --color=always adir run.sh link<Enter>"]
    semo, tmux, _ = await run_both(BASH, keys=keys, env=base_env(world), cwd=world / "files")
    assert semo.lines[0].startswith("$ ls --color=always")
    assert_same_screen(semo.lines, tmux, "bash + ls --color")


async def test_python_repl(world: Path) -> None:
    keys = [
        "1 + 2<Enter>",
        "print('héllo ' * 3)<Enter>",
        "for i in range(3):<Enter>",
        "    print(i, '中文')<Enter>",
        "<Enter>",
    ]
    semo, tmux, _ = await run_both(
        ["python3", "-q"], keys=keys, env=base_env(world), cwd=world / "files"
    )
    assert semo.lines[1] == "3"
    assert_same_screen(semo.lines, tmux, "python3 REPL")


async def test_vim_open(world: Path) -> None:
    semo, tmux, _ = await run_both(
        [*VIM, "file.txt"], rows=12, env=base_env(world), cwd=world / "files"
    )
    assert semo.lines[0] == "first line"
    assert_same_screen(semo.lines, tmux, "vim open")


async def test_vim_insert(world: Path) -> None:
    keys = ["ihello world, <Esc>", "jA appended<Esc>", "o新しい行 ❤️<Esc>"]
    semo, tmux, _ = await run_both(
        [*VIM, *VIM_FAST_ESC, "file.txt"], rows=12, keys=keys, env=base_env(world),
        cwd=world / "files",
    )  # fmt: skip
    assert semo.lines[0] == "hello world, first line"
    assert_same_screen(semo.lines, tmux, "vim insert")


async def test_vim_quit_restores_shell(world: Path) -> None:
    keys = [
        "echo before vim<Enter>",
        f"{' '.join(VIM)} file.txt<Enter>",
        "Go typed in vim<Esc>",
        ":q!<Enter>",
        "echo after vim<Enter>",
    ]
    semo, tmux, _ = await run_both(
        BASH, rows=12, keys=keys, env=base_env(world), cwd=world / "files"
    )
    assert "after vim" in semo.lines
    assert_same_screen(semo.lines, tmux, "vim :q! back to bash")


async def test_less_paging(world: Path) -> None:
    keys = ["<Space>", "<Space>", "/line 150<Enter>", "k"]
    semo, tmux, _ = await run_both(
        ["less", "numbers.txt"], rows=10, keys=keys, env=base_env(world), cwd=world / "files"
    )
    assert_same_screen(semo.lines, tmux, "less paging")


def _normalise_top(line: str) -> str:
    # top's numbers change between two runs a moment apart (clock, uptime, load, CPU and memory
    # figures) and so does the width of the fields holding them, so only the words and layout
    # of its screen can be compared: uptime phrases ("3 min" / "1:02" / "2 days, 3:04") become
    # one token, digit runs become 0, whitespace runs vanish.
    line = re.sub(r"up .*?,(?=\s+\d+ users?)", "up UPTIME,", line)
    return re.sub(r"\s+", "", re.sub(r"\d+", "0", line))


async def test_top(world: Path) -> None:
    # `-p` of one idle process: a fixed process list; `-d 100`: no refresh during the test
    sleeper = await asyncio.create_subprocess_exec("sleep", "600")
    try:
        argv = ["top", "-d", "100", "-p", str(sleeper.pid)]
        semo, tmux, _ = await run_both(argv, rows=12, env=base_env(world), cwd=world)
    finally:
        sleeper.kill()
        await sleeper.wait()
    assert semo.lines[0].startswith("top - ")
    assert any(line.endswith(" sleep") for line in semo.lines)
    assert_same_screen(
        [_normalise_top(line) for line in semo.lines],
        [_normalise_top(line) for line in tmux],
        "top (digits and spacing normalised)",
    )


GIT_LOG = ["git", "-c", "core.pager=cat", "log", "--graph", "--color=always", "--all"]


async def test_git_log_graph_color(world: Path) -> None:
    semo, tmux, styled = await run_both(
        lingering(GIT_LOG), rows=48, env=base_env(world), cwd=world / "repo", styled=True
    )
    assert any("Merge branch 'feature'" in line for line in semo.lines)
    assert_same_screen(semo.lines, tmux, "git log --graph --color")
    assert_same_styles(semo, styled, "git log --graph --color")


async def test_git_log_graph_in_less(world: Path) -> None:
    argv = ["git", "-c", "core.pager=less -R", "log", "--graph", "--color=always", "--all"]
    env = base_env(world, LESS="")  # git would set LESS=FRX when it is unset
    semo, tmux, styled = await run_both(
        argv, rows=12, keys=["<Space>", "<Down>"], env=env, cwd=world / "repo", styled=True
    )
    assert_same_screen(semo.lines, tmux, "git log --graph through less -R")
    assert_same_styles(semo, styled, "git log --graph through less -R")


async def test_alternate_screen_1049_shown_then_restored(world: Path) -> None:
    start = ["echo on the main screen<Enter>", "sh alt.sh 1049<Enter>"]
    env, cwd = base_env(world), world / "files"
    semo, tmux, _ = await run_both(BASH, rows=10, keys=start, env=env, cwd=cwd)
    assert semo.alternate_screen
    assert_same_screen(semo.lines, tmux, "inside the 1049 alternate screen")
    semo, tmux, _ = await run_both(BASH, rows=10, keys=[*start, "<Enter>"], env=env, cwd=cwd)
    assert not semo.alternate_screen
    assert "on the main screen" in semo.lines
    assert_same_screen(semo.lines, tmux, "after leaving the 1049 alternate screen")


async def test_alternate_screen_47_and_1047_restore_shell(world: Path) -> None:
    keys = [
        "echo on the main screen<Enter>",
        "sh alt.sh 47<Enter>",
        "<Enter>",
        "sh alt.sh 1047<Enter>",
        "<Enter>",
        "echo back<Enter>",
    ]
    semo, tmux, _ = await run_both(
        BASH, rows=14, keys=keys, env=base_env(world), cwd=world / "files"
    )
    assert not semo.alternate_screen
    assert_same_screen(semo.lines, tmux, "47 / 1047 alternate screens left again")


async def test_wide_cjk(world: Path) -> None:
    semo, tmux, _ = await run_both(
        lingering(["cat", "cjk.txt"]), cols=20, rows=10, env=base_env(world), cwd=world / "files"
    )
    assert semo.lines[1] == "abcdefghijklmnopqrs"
    assert_same_screen(semo.lines, tmux, "wide CJK text")


async def test_emoji_zwj_vs16(world: Path) -> None:
    semo, tmux, _ = await run_both(
        lingering(["cat", "emoji.txt"]), cols=30, rows=12, env=base_env(world), cwd=world / "files"
    )
    assert semo.lines[0].startswith("family 👨‍👩‍👧 end ")
    assert_same_screen(semo.lines, tmux, "emoji with ZWJ and VS16")


async def test_regional_indicator_flags(world: Path) -> None:
    semo, tmux, _ = await run_both(
        lingering(["cat", "flags.txt"]), cols=20, rows=6, env=base_env(world), cwd=world / "files"
    )
    assert_same_screen(semo.lines, tmux, "regional-indicator flags")


async def test_autowrap_off_at_the_right_margin(world: Path) -> None:
    semo, tmux, _ = await run_both(
        lingering(["cat", "margin.txt"]), cols=20, rows=6, env=base_env(world), cwd=world / "files"
    )
    assert_same_screen(semo.lines, tmux, "autowrap off at the right margin")


async def test_colours_256_truecolor_colon(world: Path) -> None:
    semo, tmux, styled = await run_both(
        lingering(["cat", "colours.txt"]), cols=60, rows=10, env=base_env(world),
        cwd=world / "files", styled=True,
    )  # fmt: skip
    assert semo.lines[0] == "red256 bluebg pal3"
    assert_same_screen(semo.lines, tmux, "256-colour / truecolor / colon SGR text")
    assert_same_styles(semo, styled, "256-colour / truecolor / colon SGR")


async def test_cursor_position_query_and_private_sequences(world: Path) -> None:
    semo, tmux, _ = await run_both(
        lingering(["python3", "-I", "cursor_query.py"]), cols=60, rows=10, env=base_env(world),
        cwd=world / "files", timeout=5,
    )  # fmt: skip
    assert "first reply: b'\\x1b[1;27R'" in semo.lines
    assert_same_screen(semo.lines, tmux, "cursor position query + ignored sequences")


async def semo_type_each_key(
    argv: Sequence[str], keys: Sequence[str], *, rows: int, env: Mapping[str, str], cwd: Path
) -> list[str]:
    """Type each key once the program has echoed the one before (its title counts them)."""
    session = TerminalSession(argv, cols=80, rows=rows, cwd=cwd, env=env, term=TERM)
    session.start()
    try:
        await eventually(
            lambda: session.screen.title == "0", TIMEOUT, what="the key echo program to start"
        )
        for count, spec in enumerate(keys, 1):
            await session.send_keys(spec)
            await eventually(
                lambda n=count: session.screen.title == str(n), TIMEOUT, what=f"the echo of {spec}"
            )
        return session.screen.text_rows()
    finally:
        await session.close(grace=1.0)


def tmux_type_each_key(
    argv: Sequence[str], keys: Sequence[str], *, rows: int, env: Mapping[str, str], cwd: Path
) -> list[str]:
    """As `semo_type_each_key`, in tmux (key names sent as tmux names)."""
    server = TmuxServer()
    child_env = child_environment(env, term=TERM, cols=80, rows=rows)

    def wait_title(title: str) -> None:
        wait_until(
            lambda: server("display-message", "-p", "#{pane_title}").strip() == title,
            f"tmux: the title {title}",
            TIMEOUT,
            interval=0.01,
        )

    try:
        server.start(argv, cols=80, rows=rows, env=child_env, cwd=cwd, term=TERM)
        wait_title("0")
        for count, spec in enumerate(keys, 1):
            server.send(spec)
            wait_title(str(count))
        lines, _, _ = server.state()
    finally:
        server.kill()
    lines = [line.rstrip(" ") for line in lines[:rows]]
    return lines + [""] * (rows - len(lines))


async def test_named_keys_reach_the_program_as_tmux_sends_them(world: Path) -> None:
    """The same key specs typed by semo and by tmux (as tmux key names) give the same bytes.

    Each key is typed only after the program echoed the previous one: a key typed earlier could
    share a read with the one before (so `!` would not switch modes) or be encoded before the
    terminal saw the switch to application cursor keys. Under load both happened.

    Not <Home>/<End>: tmux 3.3a sends `CSI 1 ~` / `CSI 4 ~` for them whatever TERM says, semo
    sends xterm's `CSI H` / `CSI F` (`SS3 H` / `SS3 F` with DECCKM), which is what the child's
    TERM=xterm-256color terminfo (khome, kend) announces. So no case here types them.
    """
    keys = [
        "<Up>", "<Down>", "<Right>", "<Left>", "<C-Home>", "<C-End>", "<C-Up>", "<S-Right>",
        "<M-Left>", "<PgUp>", "<PgDn>", "<Ins>", "<Del>", "<F1>", "<F4>", "<F5>", "<F12>",
        "<S-F3>", "<Tab>", "<S-Tab>", "<BS>", "<Enter>", "<Esc>", "<Space>", "<C-c>", "<C-a>",
        "<M-x>", "<M-Enter>", "a;b<lt>c;", "héllo",
        "!", "<Up>", "<Left>", "<C-Right>", "<S-Home>",
    ]  # fmt: skip
    argv = lingering(["python3", "-I", "key_echo.py"])
    env, cwd = base_env(world), world / "files"
    tmux_run = asyncio.create_task(
        asyncio.to_thread(tmux_type_each_key, argv, keys, rows=8, env=env, cwd=cwd)
    )
    semo = await semo_type_each_key(argv, keys, rows=8, env=env, cwd=cwd)
    tmux = await tmux_run
    assert "[app]" in "".join(semo)
    assert_same_screen(semo, tmux, "bytes of named keys")


@pytest.mark.claude
async def test_claude_code_first_screen(tmp_path: Path) -> None:
    """The real CLI, offline against the scripted Messages API, at 100x30: its first screen.

    Nothing on it varies between runs (checked: logo, version, model line, the working
    directory, the effort hint, the input box and the mode line are identical), so nothing is
    normalised. The CLI writes into HOME (.claude/sessions, backups of .claude.json), so the tmux
    run gets a fresh copy of the HOME the semo run started with, at the same path.
    """
    assert shutil.which("claude"), "the Claude Code CLI must be installed (scripts/test does it)"
    workdir, home, pristine = tmp_path / "work", tmp_path / "home", tmp_path / "home.pristine"
    workdir.mkdir()

    def fresh_home() -> None:
        shutil.rmtree(home)
        shutil.copytree(pristine, home, symlinks=True)

    with ScriptedMessagesAPI() as api:
        env = claude_env(workdir, home, api, term=TERM)
        shutil.copytree(home, pristine, symlinks=True)
        semo, tmux, _ = await run_both(
            claude_argv(), cols=100, rows=30, env=env, cwd=workdir, settle_ms=1500,
            timeout=30, between=fresh_home,
        )  # fmt: skip
    assert any("Claude Code" in line for line in semo.lines), "\n".join(semo.lines)
    assert any(line.startswith("❯") for line in semo.lines), "\n".join(semo.lines)
    assert_same_screen(semo.lines, tmux, "Claude Code's first screen")
