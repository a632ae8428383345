"""The console over scripted agents, for snapshot tests and the screenshot script.

Two generic agents (tests/support/script_agent.py) each ask a question as soon as they get
their first prompt, so the console settles into one fixed picture: two panes, two sessions in
the pool waiting for the operator, two questions in the inbox.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from semo.console.app import SemoApp
from semo.console.widgets.questions_panel import QuestionsPanel
from semo.engine.config import AgentConfig, OfficeConfig, PoolConfig, SemoConfig
from semo.engine.engine import Engine
from semo.engine.store.models import Agent
from tests.support.waiting import eventually

REPO = Path(__file__).resolve().parents[2]
CHOICE = {"type": "choice", "question": "Which DB?", "options": ["pg", "lite"]}
SCRIPTS = {
    "FE": [{"match": "go", "text": f"[ASK_USER]\n{json.dumps(CHOICE)}\n[/ASK_USER]"}],
    "BE": [{"match": "go", "text": "[ASK_USER] Name the endpoint?"}],
}


def script_agent(
    folder: Path,
    role: str,
    replies: object,
    cols: int,
    rows: int,
    *,
    agent: str = "tests.support.script_agent",
    stale_after: float | None = None,
) -> AgentConfig:
    script = folder / f"{role}.json"
    script.write_text(json.dumps(replies))
    command = [sys.executable, "-m", agent, "--script", str(script)]
    return AgentConfig(
        role=role,
        profile="generic",
        command=[*command, "--log", str(folder / f"{role}.log")],
        reads_prompts=True,  # stand-ins for models: they get semo's answers and feedback
        cols=cols,
        rows=rows,
        **({"stale_after": stale_after} if stale_after else {}),
    )


def console_engine(
    folder: Path,
    runtime_dir: Path,
    *,
    scripts: dict[str, list[object]] | dict[str, object] | None = None,
    agent: str = "tests.support.script_agent",
    max_sessions: int = 4,
    stale_after: float | None = None,
    repository: Path | None = None,
    control: bool = False,
    warm_roles: list[str] | None = None,
) -> Engine:
    """`agent`: the module each agent runs (tests.support.hostile_agent for a hostile one);
    `stale_after`: the agents' (AgentConfig.stale_after); with `repository` the agents work in
    its worktrees and jobs get branches (docs/JOBS.md); `control`: it serves its control
    socket (tests/support/console_engines.py); `warm_roles`: every role unless given."""
    scripts = SCRIPTS if scripts is None else scripts
    agents = [
        script_agent(folder, role, replies, 60, 12, agent=agent, stale_after=stale_after)
        for role, replies in scripts.items()
    ]
    config = SemoConfig(
        office=OfficeConfig(
            name="console-test",
            workspace_root=folder / "ws",
            repository=repository or Path("."),
        ),
        store={"backend": "sqlite", "sqlite_path": folder / "semo.db"},
        pool=PoolConfig(
            max_sessions=max_sessions,
            warm_roles=list(scripts) if warm_roles is None else warm_roles,
        ),
        agents=agents,
    )
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "HOME": str(folder)}

    def folder_for(agent: Agent, _task: str) -> Path:
        path = folder / "work" / agent.role
        path.mkdir(parents=True, exist_ok=True)
        return path

    if repository is not None:
        return Engine(config, agent_env=env, runtime_dir=runtime_dir, control=control)
    return Engine(
        config, agent_env=env, runtime_dir=runtime_dir, folder_for=folder_for, control=control
    )


async def settle_with_questions(app: SemoApp, count: int = 2, timeout: float = 15.0) -> None:
    """Start every session's task and wait until `count` questions are in the inbox."""
    await eventually(lambda: getattr(app.screen, "started", False), timeout)
    # the panes give the agents their size before the agents print (agents start at 60x12;
    # with one large pane, hidden sessions get its size too)
    await eventually(
        lambda: all(s.terminal.screen.columns != 60 for s in app.engine.sessions()),
        timeout,
    )
    for session in app.engine.sessions():
        app.engine.send_prompt(session.session_id, "go")
    panel = app.screen.query_one(QuestionsPanel)
    sessions = app.engine.sessions()
    await eventually(
        lambda: (
            len(panel.questions) >= count
            and not any(s.queued for s in sessions)
            and all(s.state.value == "waiting_input" for s in sessions)
        ),
        timeout,
    )
    app.screen.query_one("#question-list").focus()
    await asyncio.sleep(1.2)  # one more panel refresh, then a quiet screen
    app.clear_notifications()


ROLES = ["FE", "BE", "QA", "DB", "OPS", "DOCS", "SEC", "UX", "DATA", "ML"]
ROLES += ["INFRA", "API", "WEB", "IOS", "ANDROID", "PERF", "RELEASE", "SUPPORT", "PM", "ARCH"]
#: a question too long for the sidebar at 80x24 (341 characters, 4 options): the inbox's text
#: scrolls in what the options and a row of the list leave (tests/console/test_inbox_layout.py,
#: test_first_frame.py)
LONG = {
    "type": "choice",
    "question": (
        "Which database should the login page use? The page stores sessions and users, and "
        "the session table is written on every request, so it must take many small writes "
        "at once; the users table is read on every login. We also need backups every night "
        "and a way to run the tests without a server. Pick the one our team will maintain "
        "for many years."
    ),
    "options": ["postgres", "sqlite", "mysql", "none: keep them in memory"],
}
FOUR = {
    "type": "choice",
    "question": "Which database should the login page use? The page stores sessions and users.",
    "options": ["postgres", "sqlite", "mysql", "none: keep them in memory"],
}


def office_scripts(count: int) -> dict[str, object]:
    """`count` agents; FE asks a 4-option question when told "go", the others say what they
    did in one line."""
    scripts: dict[str, object] = {}
    for role in ROLES[:count]:
        if role == "FE":
            reply = f"[ASK_USER]\n{json.dumps(FOUR)}\n[/ASK_USER]"
        else:
            reply = f"{role.lower()}: read the task, 3 files checked"
        scripts[role] = [{"match": "go", "text": reply}]
    return scripts


async def settle_office(app: SemoApp, count: int, timeout: float = 60.0) -> None:
    """Every agent told "go"; FE's 4-option question in the inbox; one notification shown."""
    await eventually(lambda: getattr(app.screen, "started", False), timeout)
    await eventually(lambda: len(app.engine.sessions()) == count, timeout)
    screen = app.screen
    await eventually(
        lambda: all(s.terminal.screen.columns != 60 for s in app.engine.sessions()),
        timeout,
    )
    sessions = app.engine.sessions()
    for session in sessions:
        app.engine.send_prompt(session.session_id, "go")
    panel = screen.query_one(QuestionsPanel)
    await eventually(
        lambda: (
            len(panel.questions) == 1
            and not any(s.queued for s in sessions)
            and all(s.state.value in ("waiting_input", "ready") for s in sessions)
            and all("go" in s.terminal.screen.display[1] for s in sessions)
        ),
        timeout,
    )
    screen.query_one("#question-list").focus()
    await asyncio.sleep(1.2)  # one more panel refresh, then a quiet screen
    app.clear_notifications()
    screen.tell("prompt queued for BE", timeout=600)  # type: ignore[attr-defined]
