"""An "allow for this session" grant outlives an engine SIGKILL with its conversation
(real Claude Code CLI, offline, scripted Messages API; a real `semo engine` process, then a
second engine).

The first engine's BE session runs in Claude Code's classic "ask" mode; its Bash tool use waits
in the inbox and is answered "allow for this session". The engine is SIGKILLed. The next engine
resumes the conversation (`claude --resume`); the reply to its "restarted" note asks for the
same command again, which the resumed session gets without anyone asked: the request is
decided as "allowed for this session earlier", no permission item is made, and the model gets
the command's output, not a refusal.

The same in Claude Code's own default (auto mode) behind an endpoint that does not pass its
safety check: the request is its dialogs read off the screen (no hook), the grant is kept the
same way, and the resumed session's dialogs for the same command are answered by semo.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from semo.engine.config import load_config
from semo.engine.engine import Engine
from semo.engine.events import RoutingStep
from tests.control.office import alive, start_engine, wait_until
from tests.support.claude_approvals import bash, tool_results, uses
from tests.support.claude_home import claude_env
from tests.support.claude_resume import CONFIG, make_repo, ready_session, semo
from tests.support.scripted_api import ScriptedMessagesAPI

pytestmark = [pytest.mark.claude, pytest.mark.timeout(300)]

COMMAND = "touch granted.txt"
MODE = 'permission_mode = "default"\n'
#: auto mode (no permission_mode): a command its safety check would look at
AUTO_COMMAND = 'python3 -c \'open("granted.txt", "w")\''
NOTICE = "Auto mode can't check actions in this session"


def pending_permissions(env: dict[str, str], folder: Path) -> list[dict[str, Any]]:
    listed = semo(env, folder, "questions", "--office", "resume", "--json")
    rows = json.loads(listed.stdout or "[]") if listed.returncode == 0 else []
    return [r for r in rows if r["question_type"] == "permission"]


def first_engine(
    tmp_path: Path, env: dict[str, str], api: ScriptedMessagesAPI, command: str = COMMAND
) -> None:
    """`semo engine`: BE asks, is allowed for the session, runs the command; then SIGKILL."""
    first = start_engine(tmp_path, env, tmp_path / "first.log")
    try:
        wait_until(lambda: ready_session(env, tmp_path), "BE ready", 120)
        row = ready_session(env, tmp_path)
        assert row is not None
        payload = json.dumps({"prompt": "Make granted.txt."})
        sent = semo(
            env, tmp_path, "command", "send_prompt", "--office", "resume",
            "--session", str(row["session_id"]), "--payload", payload,
        )  # fmt: skip
        assert sent.returncode == 0, sent
        wait_until(lambda: pending_permissions(env, tmp_path), "the permission request", 120)
        [asked] = pending_permissions(env, tmp_path)
        if command == COMMAND:
            assert asked["question"] == f"Bash: {COMMAND}"
        else:
            assert NOTICE in asked["question"]  # read off the screen: no hook in auto mode
        answered = semo(env, tmp_path, "answer", asked["id"], "--option", "2")
        assert answered.returncode == 0, answered
        wait_until(lambda: tool_results(api), "the command run", 120)
        wait_until(lambda: ready_session(env, tmp_path), "the turn finished", 120)
        records = tmp_path / "state" / "semo"

        def recorded() -> bool:
            found = list(records.glob("resume-*.json"))
            entry = json.loads(found[0].read_text()).get(str(row["session_id"])) if found else None
            return bool(entry) and entry.get("grants") == [["Bash", command]]

        wait_until(recorded, "the grant recorded with the conversation")
        time.sleep(1.0)  # the CLI writes its transcript after the turn's hooks
        first.kill()
        first.wait(30)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(30)
    agent_pid = int(row["pid"])  # type: ignore[call-overload]
    wait_until(lambda: not alive(agent_pid), "the agent to go with its engine", 30)


@pytest.mark.parametrize("auto", [False, True], ids=["classic", "auto-mode"])
async def test_allow_for_this_session_survives_an_engine_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, auto: bool
) -> None:
    command = AUTO_COMMAND if auto else COMMAND
    await asyncio.to_thread(make_repo, tmp_path)
    runtime = Path(tempfile.mkdtemp(prefix="semo-ctl-"))
    replies = [
        uses(bash(command)),
        "Made it.",
        uses(bash(command), text="Once more, after the restart."),
        "Made it again.",
    ]
    with ScriptedMessagesAPI(replies=replies, safeguards=not auto) as api:
        mode = "" if auto else MODE
        (tmp_path / "semo.toml").write_text(CONFIG.format(base_url=api.base_url) + mode)
        env = {
            **claude_env(tmp_path / "elsewhere", tmp_path / "home", api),
            "XDG_RUNTIME_DIR": str(runtime),
            "XDG_STATE_HOME": str(tmp_path / "state"),
            "LANG": "C.UTF-8",
        }
        await asyncio.to_thread(first_engine, tmp_path, env, api, command)
        assert [r["is_error"] for r in tool_results(api)] == [False]

        config = load_config(tmp_path / "semo.toml")
        monkeypatch.setenv("XDG_STATE_HOME", env["XDG_STATE_HOME"])
        monkeypatch.setenv("XDG_RUNTIME_DIR", env["XDG_RUNTIME_DIR"])
        second = Engine(config, control=True, agent_env=env)
        steps: list[RoutingStep] = []
        second.bus.add_listener(lambda e: steps.append(e) if isinstance(e, RoutingStep) else None)
        await second.start()
        try:
            deadline = asyncio.get_running_loop().time() + 180

            async def settled() -> bool:
                asked = [q for q in await second.pending_questions() if q.question_type]
                return len(tool_results(api)) >= 2 or any(
                    q.question_type == "permission" for q in asked
                )

            while not await settled():
                assert asyncio.get_running_loop().time() < deadline, api.describe()
                await asyncio.sleep(0.2)
            pending = await second.pending_questions()
            assert [q.question for q in pending if q.question_type == "permission"] == []
            [resumed] = [s for s in second.sessions() if "--resume" in s.terminal.argv]
            decided = [s for s in steps if s.step == "permission_decided"]
            assert [(s.detail, s.session_id) for s in decided] == [
                (f"allowed for this session earlier: Bash: {command}", resumed.session_id)
            ]
            assert [r["is_error"] for r in tool_results(api)] == [False, False]
        finally:
            await second.stop("test over")
            shutil.rmtree(runtime, ignore_errors=True)
