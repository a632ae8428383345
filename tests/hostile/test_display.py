"""Hostile agent text shown to people (docs/SECURITY.md, "What the operator sees").

- The console with real hostile agents (tests/support/hostile_agent.py) in real PTYs, Textual's
  Pilot at the keyboard: questions holding markup (`[/x]`, `[@click=app.quit]`) and escape
  sequences (OSC 52 clipboard write, OSC 2 title, C1 CSI, a bidi override) leave the app and
  its engine running; the inbox, its detail line, the toast and the commands panel show the
  text literally, controls made visible (`\\x1b`); what the console writes to the terminal holds
  no escape sequence but CSI and no C1 or bidi control. An operator's answer holding markup is
  sent and acknowledged (the acknowledgement toast used to parse it).
- A real `semo engine` (text and JSON logs) whose hostile agent asks such a question, holding the
  engine's secrets (a database password and an API token with quotes, backslashes and non-ASCII)
  besides: the text log shows the OSC 52 made visible, neither log holds a raw control or any
  form of a secret; `semo questions` as a real process prints no ESC/C1/bidi byte (text and
  --json), the JSON reads back to the exact question.
- `semo parse` of a recording with such output prints no control characters.
- engine.plain_text and the log redaction on their own: every form of a tricky secret.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from textual.command import CommandList

from semo.console.app import SemoApp
from semo.console.widgets.commands_panel import CommandsPanel
from semo.console.widgets.questions_panel import QuestionsPanel
from semo.engine.in_process import InProcessEngine
from semo.engine.logs import REDACTED, secret_forms
from semo.engine.plain_text import plain, plain_json
from semo.engine.store.sqlite import SqliteStore
from tests.console.console_snapshot_app import console_engine
from tests.support.hostile_display import (
    CSI,
    CSI_C1,
    HOSTILE_TEXT,
    MARKUP,
    OSC52,
    PASSWORD,
    RLO,
    TIMEOUT,
    TITLE,
    TOKEN,
    UNSAFE_OUTPUT,
    UNSAFE_TEXT,
    assert_no_control_bytes,
    block,
    engine_process,
    make_office,
    semo,
    terminal_output,
)
from tests.support.script_agent import logged_prompts
from tests.support.semo_process import SEMO
from tests.support.temp_dirs import captured_logs, short_temp_dir
from tests.support.waiting import eventually, eventually_value

SECRET_TAILS = ("wörd-7f3a", "w\\u00f6rd-7f3a", "5d1c9b2e7a4f")


@pytest.fixture
def runtime_dir() -> Iterator[Path]:
    with short_temp_dir("semo-hostile-") as path:  # short: Unix socket paths
        yield path


def prompts(folder: Path, role: str) -> list[str]:
    return logged_prompts(folder / f"{role}.log")


# -- the console ---------------------------------------------------------------------------------


async def test_hostile_questions_show_literally_in_the_console(
    tmp_path: Path, runtime_dir: Path
) -> None:
    choice = {"type": "choice", "question": HOSTILE_TEXT, "options": ["[/b]", "\x1b[31mred"]}
    scripts = {
        # the one-line form, and an answer to acknowledge
        "FE": [{"match": "go", "text": f"[ASK_USER] Is this {MARKUP} ok?"}],
        # raw escapes to its own terminal first, then a question holding them (JSON escapes)
        "BE": [
            {"match": "go", "raw": f"{OSC52}{TITLE}{CSI_C1} {RLO}cba\r\n", "text": block(choice)},
        ],
    }
    engine = console_engine(
        tmp_path, runtime_dir, scripts=scripts, agent="tests.support.hostile_agent"
    )
    app = SemoApp(InProcessEngine(engine))
    async with app.run_test(size=(200, 50), notifications=True) as pilot:
        await eventually(lambda: getattr(app.screen, "started", False), TIMEOUT)
        await eventually(
            lambda: all(s.terminal.screen.columns != 60 for s in engine.sessions()), TIMEOUT
        )
        for session in engine.sessions():
            engine.send_prompt(session.session_id, "go")
        panel = app.screen.query_one(QuestionsPanel)
        await eventually(lambda: len(panel.questions) == 2, TIMEOUT)
        await eventually(lambda: len(app._notifications) >= 2, TIMEOUT)
        await asyncio.sleep(1.2)  # a refresh of every panel with the hostile rows in it

        assert app.is_running and all(not s.ended for s in engine.sessions())
        stored = {panel.agent_roles[q.agent_id]: q for q in panel.questions}
        assert stored["BE"].question == HOSTILE_TEXT  # the store keeps what the agent asked
        options = panel.query_one("#question-list")
        shown = {
            role: str(options.get_option_at_index(i).prompt)  # type: ignore[attr-defined]
            for i, role in enumerate(panel.agent_roles[q.agent_id] for q in panel.questions)
        }
        assert shown["FE"] == f"FE Is this {MARKUP} ok?"
        assert shown["BE"] == f"BE {plain(HOSTILE_TEXT)}"
        assert "\\x1b]52;c;aGFja2Vk\\x07" in shown["BE"] and "\\x9b2J" in shown["BE"]
        assert "\\u202e" in shown["BE"]

        toasts = [(n.title, n.message, n.markup) for n in app._notifications]
        assert ("Question", f"FE asks: Is this {MARKUP} ok?", False) in toasts
        assert ("Question", f"BE asks: {plain(HOSTILE_TEXT)}", False) in toasts

        await pilot.press("f4")
        options.highlighted = list(shown).index("BE")  # type: ignore[attr-defined]
        await pilot.pause()
        detail = str(app.screen.query_one("#question-detail").render())
        assert detail.splitlines()[-2:] == ["1 [/b]", "2 \\x1b[31mred"]

        screen = terminal_output(app)
        assert UNSAFE_OUTPUT.findall(screen) == []
        text = CSI.sub("", screen)
        for literal in ("[/x]", "[@click=app.quit]click", "\\x1b]52;c;aGFja2Vk\\x07", "1 [/b]"):
            assert literal in text, literal
        assert "asks:" in text  # the toasts are on screen too

        # store text in the commands panel: an error naming a session id full of escapes
        bad = await engine.store.insert_command(
            engine.office_id, "send_keys", {"keys": "x"}, session_id=f"{MARKUP}{OSC52}"
        )
        commands = app.screen.query_one(CommandsPanel)
        await eventually(lambda: bad.id in app.screen._results, TIMEOUT)  # type: ignore[attr-defined]
        await asyncio.sleep(1.2)
        cells = [str(cell) for cell in commands.get_row(bad.id)]
        assert "[/x] [@click=app.quit]" in cells[0], cells  # literally (clipped to the width)
        assert UNSAFE_OUTPUT.findall(terminal_output(app)) == []

        # an answer holding markup: sent as typed, the acknowledgement shows it literally
        options.highlighted = list(shown).index("FE")  # type: ignore[attr-defined]
        await pilot.press("enter", *"[/y] fine", "enter")
        await eventually(lambda: any("[/y] fine" in p for p in prompts(tmp_path, "FE")), TIMEOUT)
        await eventually(
            lambda: any(n.message == "FE: [/y] fine" for n in app._notifications), TIMEOUT
        )
        assert app.is_running and all(not s.ended for s in engine.sessions())

        # palette entries are escaped text, still found and shown
        await pilot.press("ctrl+p", *"new")
        hits = app.screen.query_one(CommandList)
        await eventually(lambda: hits.option_count >= 2, TIMEOUT)
        prompts_shown = [str(hits.get_option_at_index(i).prompt) for i in range(hits.option_count)]
        assert any("New session for FE" in shown for shown in prompts_shown), prompts_shown
        await pilot.press("escape")


# -- semo engine logs and semo questions ---------------------------------------------------------


@pytest.mark.parametrize("log_format", ["text", "json"])
async def test_engine_logs_and_semo_questions_show_no_control_and_no_secret(
    tmp_path: Path, log_format: str
) -> None:
    question = f"{HOSTILE_TEXT} leak {PASSWORD} and {TOKEN}"
    script = [{"match": "go", "text": block({"type": "text", "question": question})}]
    config = make_office(tmp_path, script)
    async with (
        engine_process(config, log_format) as engine,
        SqliteStore(tmp_path / "semo.db") as store,
    ):

        async def session_ready() -> str | None:
            offices = [o for o in await store.list_offices() if o.name == "hostile-display"]
            if engine.returncode is not None:
                raise AssertionError((tmp_path / "engine.log").read_text(errors="replace"))
            if not offices:
                return None
            ready = [s for s in await store.list_sessions(offices[0].id) if s.status == "ready"]
            return ready[0].session_id if ready else None

        session_id = await eventually_value(session_ready, "the hostile agent ready", TIMEOUT)
        office = (await store.get_session(session_id)).office_id
        await store.insert_command(office, "send_prompt", {"prompt": "go"}, session_id=session_id)

        async def asked() -> str | None:
            rows = await store.list_questions(office)
            return rows[0].question if rows else None

        assert await eventually_value(asked, "the hostile question", TIMEOUT) == question

        listed = await semo(tmp_path, "questions")
        assert_no_control_bytes(listed)
        assert "\\x1b]52;c;aGFja2Vk\\x07" in listed.decode()
        as_json = await semo(tmp_path, "questions", "--json")
        assert_no_control_bytes(as_json)
        assert [row["question"] for row in json.loads(as_json)] == [question]
        sessions = await semo(tmp_path, "sessions")
        assert_no_control_bytes(sessions)

        engine.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(engine.wait(), TIMEOUT) == 0

    log = (tmp_path / "engine.log").read_bytes()
    assert_no_control_bytes(log)
    text = log.decode()
    for tail in SECRET_TAILS:
        assert tail not in text, tail
    asked_lines = [line for line in text.splitlines() if "question_asked" in line]
    assert asked_lines, text[-3000:]
    if log_format == "text":
        assert "\\x1b]52;c;aGFja2Vk\\x07" in asked_lines[0]
        assert f"leak {REDACTED} and {REDACTED}" in asked_lines[0]
    else:
        records = [json.loads(line) for line in text.splitlines()]
        [record] = [r for r in records if "question_asked" in r["msg"]]
        assert OSC52 in record["msg"] and f"leak {REDACTED} and {REDACTED}" in record["msg"]


# -- semo parse ----------------------------------------------------------------------------------


def test_semo_parse_prints_no_control_characters(tmp_path: Path) -> None:
    question = block({"type": "text", "question": HOSTILE_TEXT})
    output = "".join(f"● {line}\r\n" for line in question.splitlines()) + OSC52 + "❯ "
    cast = tmp_path / "hostile.cast"
    header = {"version": 2, "width": 200, "height": 24}
    cast.write_text(json.dumps(header) + "\n" + json.dumps([0.1, "o", output]) + "\n")
    semo = str(SEMO)
    for extra in ([], ["--json"]):
        run = subprocess.run(
            [semo, "parse", str(cast), "--profile", "generic", *extra],
            capture_output=True,
            check=True,
        )
        assert_no_control_bytes(run.stdout)
        assert b"ASK_USER" in run.stdout or b"ask_user" in run.stdout, run.stdout


# -- the sanitiser and the redaction on their own ------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain text, ünïcode 🎉\tand\nlines", "plain text, ünïcode 🎉\tand\nlines"),
        (OSC52, "\\x1b]52;c;aGFja2Vk\\x07"),
        ("a\rb\x00c\x7fd", "a\\rb\\x00c\\x7fd"),
        (CSI_C1 + "\x85", "\\x9b2J\\x85"),
        (f"{RLO}x\u2066y\u2028", "\\u202ex\\u2066y\\u2028"),
        ("lone \udc80", "lone \\udc80"),
    ],
)
def test_plain_makes_controls_visible(raw: str, shown: str) -> None:
    assert plain(raw) == shown
    assert plain(shown) == shown  # nothing left to change
    assert UNSAFE_TEXT.search(plain(raw, one_line=True).replace("\\", "")) is None
    data = plain_json({"k": raw})
    assert json.loads(data) == {"k": raw}
    assert_no_control_bytes(data.encode())


def test_one_line_shows_newlines_and_tabs() -> None:
    assert plain("a\nb\tc", one_line=True) == "a\\nb\\tc"


TRICKY_SECRETS = ['pa"ss\\word', "it's \"both\" \\\\ 'quotes'", "pässwörd€-ü", "tab\there\x1b"]


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_log_redaction_covers_every_escaped_form(fmt: str) -> None:
    log = logging.getLogger("semo.test.redaction")
    with captured_logs(fmt, TRICKY_SECRETS) as stream:
        for secret in TRICKY_SECRETS:
            log.info("raw %s", secret)
            log.info("repr %r and in a dict %r", secret, {"k": [secret]})
            log.info(
                "json %s %s", json.dumps({"k": secret}), json.dumps(secret, ensure_ascii=False)
            )
            log.info("bytes %r url %s", secret.encode(), quote(secret, safe=""))
            log.warning("extra", extra={"detail": secret})
            try:
                raise ValueError(f"bad value {secret!r}")
            except ValueError:
                log.exception("failed")
    out = stream.getvalue()
    for secret in TRICKY_SECRETS:
        for form in secret_forms(secret):
            assert form not in out, (secret, form)
    assert out.count(REDACTED) >= 8 * len(TRICKY_SECRETS)
    assert "\x1b" not in out
    if fmt == "json":
        assert all(json.loads(line)["msg"] for line in out.splitlines())


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_unregistered_tokens_are_redacted_by_their_names(fmt: str) -> None:
    """A session's hook token nobody registered, an env dump, a bearer header: the value goes,
    the name stays; counts named like tokens stay."""
    log = logging.getLogger("semo.test.names")
    env = {"SEMO_HOOK_TOKEN": "hook-t0ken-abcdef", "PATH": "/usr/bin", "max_tokens": 1000}
    with captured_logs(fmt) as stream:
        log.info("agent env %s", env)
        log.info("SEMO_HOOK_TOKEN=hook-t0ken-abcdef PGPASSWORD=pg-pass-1234 other=kept")
        log.info("request Authorization: Bearer api-t0ken-987654 from %s", "127.0.0.1")
        log.info("payload %s", json.dumps({"api_key": "k3y-value-55", "token_count": 12}))
    out = stream.getvalue()
    for secret in ("hook-t0ken-abcdef", "pg-pass-1234", "api-t0ken-987654", "k3y-value-55"):
        assert secret not in out
    for kept in ("SEMO_HOOK_TOKEN", "/usr/bin", "1000", "other=kept", "127.0.0.1", "12"):
        assert kept in out
