"""Hostile text for display tests: what an agent may print, and how to catch it on screen."""

from __future__ import annotations

import asyncio
import io
import json
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import quote

from rich.console import Console

from semo.console.app import SemoApp
from tests.support.git_repo import make_repo
from tests.support.office_toml import sqlite_office_toml
from tests.support.semo_process import SEMO, environment_without_semo, semo_engine

SOURCE = Path(__file__).resolve().parents[2]


HOSTILE = SOURCE / "tests" / "support" / "hostile_agent.py"


TIMEOUT = 20.0


OSC52 = "\x1b]52;c;aGFja2Vk\x07"  # write "hacked" to the operator's clipboard


TITLE = "\x1b]2;pwned\x07"


CSI_C1 = "\x9b2J"  # clear the screen, 8-bit CSI


RLO = "\u202e"


MARKUP = "[/x] [@click=app.quit]click here[/]"


HOSTILE_TEXT = f"clip {OSC52} title {TITLE} csi {CSI_C1} rtl {RLO}cba {MARKUP}"


#: What may never reach a terminal: an escape that does not start a CSI, BEL, C1, bidi controls.
UNSAFE_OUTPUT = re.compile(
    "\x1b[^\\[]|[\x00-\x08\x0b-\x1a\x1c-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]"
)


CSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")


def block(payload: dict[str, object]) -> str:
    """An ASK_USER block as an agent prints it (JSON with \\u escapes, as json.dumps writes)."""
    return f"[ASK_USER]\n{json.dumps(payload)}\n[/ASK_USER]"


def terminal_output(app: SemoApp) -> str:
    """What the console writes to the operator's terminal for its current screen (the way
    App.export_screenshot renders it)."""
    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        force_terminal=True,
        color_system="truecolor",
        legacy_windows=False,
        safe_box=False,
    )
    console.print(app.screen._compositor.render_update(full=True))
    return console.file.getvalue()  # type: ignore[attr-defined]


def make_office(folder: Path, script: list[dict[str, object]]) -> Path:
    make_repo(folder / "repo")
    (folder / "script.json").write_text(json.dumps(script))
    argv = [sys.executable, str(HOSTILE), "--script", str(folder / "script.json")]
    argv += ["--log", str(folder / "prompts.jsonl")]
    config = folder / "semo.toml"
    config.write_text(CONFIG.format(command=json.dumps(argv)))
    return config


@asynccontextmanager
async def engine_process(
    config: Path, log_format: str
) -> AsyncIterator[asyncio.subprocess.Process]:
    env = store_environment(config.parent)
    env["SEMO_DATABASE_URL"] = f"postgresql://semo:{quote(PASSWORD, safe='')}@db.invalid/semo"
    env["SEMO_API_TOKEN"] = TOKEN
    args = ["--log-format", log_format]
    with (config.parent / "engine.log").open("wb") as log:
        async with semo_engine(config, env, log, args=args, grace=TIMEOUT) as process:
            yield process


async def semo(folder: Path, *args: str) -> bytes:
    """Run `semo ARGS` in `folder` (its semo.toml names the store) and return its stdout."""
    run = await asyncio.create_subprocess_exec(
        str(SEMO),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=store_environment(folder),
        cwd=folder,
    )
    out, err = await run.communicate()
    assert run.returncode == 0, err.decode(errors="replace")
    return out


def assert_no_control_bytes(data: bytes) -> None:
    text = data.decode("utf-8")  # strict: a lone surrogate or a stray byte fails here
    assert UNSAFE_TEXT.findall(text) == [], UNSAFE_TEXT.findall(text)


CONFIG = (
    sqlite_office_toml("hostile-display")
    + """
[engine]
log_format = "text"
shutdown_grace = 1

[pool]
max_sessions = 2
warm_roles = ["EVIL"]

[[agents]]
role = "EVIL"
profile = "generic"
command = {command}
cols = 250
rows = 30
"""
)


PASSWORD = 'pa"ss\\wörd-7f3a'


TOKEN = 'tok"en\\ünï€-5d1c9b2e7a4f'


def store_environment(folder: Path) -> dict[str, str]:
    env = environment_without_semo()
    env["XDG_STATE_HOME"] = str(folder / "state")
    env["PYTHONPATH"] = str(SOURCE)
    return env


UNSAFE_TEXT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
