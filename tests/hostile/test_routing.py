"""Hostile agents against routing: protocol messages that cannot be honoured, on real processes.

The agents are `tests.support.hostile_agent` in real PTYs, run as `generic` agents by a real
Engine (in this process, on sqlite and on postgres) or by `semo engine` (a real process, on
sqlite). What each case shows:

- A DELIVER_RESULT naming an invocation that does not exist (`forged-123`) is refused: no row,
  a `result_refused` event, the reason typed into the agent; the engine runs on and starts
  again. Rows an older version stored (a result of a forged invocation, an invocation of an
  agent no longer configured) do not stop the next start: the result reaches its recipient
  as a plain message, the invocation is failed with the reason.
- Only the invoked agent delivers an invocation's result, to the agent that invoked it, once:
  QA delivering BE's invocation, BE delivering it to the wrong agent, and a second result are
  refused; the store keeps exactly the one real result.
- Invoking oneself, delivering to oneself, an oversize payload and a block left open at the
  end of a turn are refused with the reason (nothing stored).
- Feedback is typed only into agents whose profile reads prompts: a generic agent that does
  not say so gets no semo text (a shell would run it); the refusal is still an event.
- No other agent's text reaches a real bash agent: a result or a task for it is refused, a
  stored result for it skipped; the commands hidden in them never run.
- "Deliver, then [SEMO:DONE]" in one reply does not complete the next queued invocation.
- An engine id that is alive refuses a second engine with that id (in process on sqlite and
  postgres; `semo engine`: exit 1, a clear message); the running engine keeps its sessions.
  Once it stopped, the id starts again; after a SIGKILL the next start takes the silent row
  for a dead run.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from semo.engine.config import AgentConfig
from semo.engine.engine import Engine
from semo.engine.heartbeat import EngineIdInUse
from semo.engine.store.models import AgentInvocation, AgentResult
from semo.engine.store.sqlite import SqliteStore
from tests.api.conftest import store_maker
from tests.support.git_repo import make_repo
from tests.support.hostile_routing import (
    REPO,
    TIMEOUT,
    deliver,
    hostile,
    invoke,
    office_config,
    prompts,
    running,
)
from tests.support.office_toml import sqlite_office_toml
from tests.support.semo_process import environment_without_semo, semo_engine
from tests.support.waiting import eventually, eventually_value


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_a_forged_result_is_refused_and_never_blocks_a_start(
    backend: str, tmp_path: Path, runtime_dir: Path
) -> None:
    agents = [
        hostile(tmp_path, "FE", [], True),
        hostile(tmp_path, "QA", [{"match": "go", "text": deliver("FE", "hi", "forged-123")}], True),
    ]
    config = office_config(tmp_path, agents, "hostile-routing")
    async with store_maker(backend, tmp_path) as make_store:
        async with running(make_store, tmp_path, runtime_dir, config) as office:
            await office.turn("QA", "go")
            await eventually(lambda: len(office.prompts("QA")) == 2, TIMEOUT)
            refusal = office.prompts("QA")[1]
            assert refusal.startswith("[semo] Your DELIVER_RESULT was refused: there is no ")
            assert "invocation 'forged-123' in this office" in refusal
            assert office.reasons("result_refused") == [
                "there is no invocation 'forged-123' in this office"
            ]
            assert await office.store.list_results(office.engine.office_id) == []
            agent_ids = {role: agent.id for role, agent in office.engine.agents.items()}
            office_id = office.engine.office_id
        assert office.prompts("FE") == []

        # rows an older semo stored for hostile agents, in the store when the next one starts
        store = make_store()
        await store.open()
        legacy = await store.create_result(
            AgentResult(
                office_id=office_id,
                invocation_id="forged-456",
                sender_agent_id=agent_ids["QA"],
                recipient_agent_id=agent_ids["FE"],
                summary="left by an older semo",
                payload={"invocation_id": "forged-456", "summary": "left by an older semo"},
            )
        )
        orphan = await store.create_invocation(
            AgentInvocation(
                office_id=office_id,
                caller_agent_id=agent_ids["QA"],
                target_agent_id="an-agent-no-longer-configured",
                task="anything",
            )
        )
        await store.close()
        async with running(make_store, tmp_path, runtime_dir, config) as office:
            assert office.engine.started_at is not None  # it raised StoreConflict before
            await eventually(lambda: len(office.prompts("FE")) == 1, TIMEOUT)
            [seen] = office.prompts("FE")
            assert seen.startswith("[semo] Result from QA (not taken as the result of invocation ")
            assert "forged-456: there is no invocation 'forged-456' in this office)" in seen
            # it was stored before this engine started: the agent is told it waited
            assert "(it was waiting for you when semo restarted): left by an older semo" in seen

            async def delivered() -> bool | None:
                [row] = await office.store.list_results(office_id)
                return True if row.status == "delivered" and row.id == legacy.id else None

            await eventually_value(delivered, "the legacy result delivered")
            [failed] = await office.store.list_invocations(office_id)
            assert failed.id == orphan.id and failed.status == "failed"
            assert "an-agent-no-longer-configured is not an agent of this office" in (
                failed.error or ""
            )


async def test_only_the_invoked_agent_delivers_its_result_once(
    backend: str, tmp_path: Path, runtime_dir: Path
) -> None:
    inv = "inv-0001"
    agents = [
        hostile(tmp_path, "FE", [], True),
        hostile(
            tmp_path,
            "BE",
            [
                {"match": f"Invocation {inv}", "text": deliver("QA", "wrong way", inv)},
                {
                    "match": "came from FE",
                    "text": deliver("FE", "done right", inv) + "\n" + deliver("FE", "twice", inv),
                },
            ],
            True,
        ),
        hostile(tmp_path, "QA", [{"match": "go", "text": deliver("FE", "stolen", inv)}], True),
    ]
    config = office_config(tmp_path, agents, "hostile-routing")
    async with (
        store_maker(backend, tmp_path) as make_store,
        running(make_store, tmp_path, runtime_dir, config) as office,
    ):
        office_id, by_role = office.engine.office_id, office.engine.agents
        await office.store.create_invocation(
            AgentInvocation(
                id=inv,
                office_id=office_id,
                caller_agent_id=by_role["FE"].id,
                target_agent_id=by_role["BE"].id,
                task="add /health",
            )
        )
        assert office.engine.router is not None
        await office.engine.router.resume()  # sends it to BE, as after a restart
        await office.turn("QA", "go")
        await eventually(lambda: len(office.reasons("result_refused")) == 3, TIMEOUT)
        reasons = office.reasons("result_refused")
        assert f"invocation {inv} came from FE: deliver its result to FE" in reasons
        stolen = f"invocation {inv} was sent to BE, not to you: only the invoked agent delivers"
        assert any(r.startswith(stolen) for r in reasons)
        assert any(
            r.startswith((f"invocation {inv} already has a result", f"invocation {inv} is delive"))
            for r in reasons
        )

        async def delivered() -> AgentInvocation | None:
            [row] = await office.store.list_invocations(office_id)
            return row if row.status == "delivered" else None

        await eventually_value(delivered, "the invocation delivered")
        [result] = await office.store.list_results(office_id)
        assert (result.summary, result.sender_agent_id, result.invocation_id) == (
            "done right",
            by_role["BE"].id,
            inv,
        )
        await eventually(lambda: len(office.prompts("FE")) == 1, TIMEOUT)
        assert office.prompts("FE")[0].startswith(f"[semo] Result of invocation {inv} from BE")
        everything = " ".join(office.prompts("FE") + office.prompts("QA"))
        assert "stolen" not in everything.replace("refused", "")
        assert not any("wrong way" in p or "twice" in p for p in office.prompts("FE"))


async def test_a_done_after_a_result_is_not_taken_for_the_next_invocation(
    tmp_path: Path, runtime_dir: Path
) -> None:
    """BE delivers FE's first invocation and says [SEMO:DONE] in the same reply while FE's
    second invocation waits: the DONE belongs to the turn BE already answered, so the second
    invocation is answered only by what BE prints after it read that task."""
    two_tasks = invoke("BE", "task one") + "\n" + invoke("BE", "task two")
    agents = [
        hostile(tmp_path, "FE", [{"match": "go", "text": two_tasks}], True),
        hostile(
            tmp_path,
            "BE",
            [
                {"match": "task one", "text": deliver("FE", "one done") + "\n[SEMO:DONE] all"},
                {"match": "task two", "text": deliver("FE", "two done"), "delay": 0.3},
            ],
            True,
        ),
    ]
    config = office_config(tmp_path, agents, "hostile-routing")
    async with (
        store_maker("sqlite", tmp_path) as make_store,
        running(make_store, tmp_path, runtime_dir, config) as office,
    ):
        await office.turn("FE", "go")
        office_id = office.engine.office_id

        async def both_delivered() -> list[AgentInvocation] | None:
            rows = await office.store.list_invocations(office_id)
            return rows if [r.status for r in rows] == ["delivered", "delivered"] else None

        invocations = await eventually_value(both_delivered, "both invocations delivered")
        results = await office.store.list_results(office_id)
        by_invocation = {r.invocation_id: r.summary for r in results}
        assert by_invocation == {invocations[0].id: "one done", invocations[1].id: "two done"}
        assert len(office.prompts("BE")) == 2


async def test_self_oversize_and_unclosed_messages_are_refused(
    tmp_path: Path, runtime_dir: Path
) -> None:
    big = json.dumps({"summary": "x" * 70_000})
    script = [
        {"match": "go", "text": invoke("FE", "myself")},
        {"match": "invoke itself", "text": deliver("FE", "to me")},
        {"match": "to itself", "text": f"[DELIVER_RESULT:BE]\n{big}\n[/DELIVER_RESULT]"},
        {"match": "oversize", "text": '[INVOKE:BE]\n{"task": "never closed"}'},
    ]
    agents = [hostile(tmp_path, "FE", script, True), hostile(tmp_path, "BE", [], True)]
    config = office_config(tmp_path, agents, "hostile-routing")
    async with (
        store_maker("sqlite", tmp_path) as make_store,
        running(make_store, tmp_path, runtime_dir, config) as office,
    ):
        await office.turn("FE", "go")
        await eventually(lambda: len(office.prompts("FE")) == 5, TIMEOUT)
        fe = office.prompts("FE")
        assert fe[1] == "[semo] Your INVOKE was refused: an agent cannot invoke itself."
        assert fe[2] == (
            "[semo] Your DELIVER_RESULT was refused: an agent cannot deliver a result to itself."
        )
        assert fe[3].startswith("semo could not read your [DELIVER_RESULT:BE] message (oversize)")
        assert fe[4].startswith("semo could not read your [INVOKE:BE] message (missing_close)")
        steps = [s.step for s in office.steps]
        assert steps.count("malformed") == 2
        assert "invoke_refused" in steps and "result_refused" in steps
        assert await office.store.list_invocations(office.engine.office_id) == []
        assert await office.store.list_results(office.engine.office_id) == []
        assert office.prompts("BE") == []


async def test_feedback_is_typed_only_into_agents_that_read_prompts(
    tmp_path: Path, runtime_dir: Path
) -> None:
    shell_like = [{"match": "go", "text": invoke("XX", "anything")}]
    agents = [hostile(tmp_path, "SH", shell_like, None)]  # generic, reads_prompts not set
    config = office_config(tmp_path, agents, "hostile-routing")
    async with (
        store_maker("sqlite", tmp_path) as make_store,
        running(make_store, tmp_path, runtime_dir, config) as office,
    ):
        await office.turn("SH", "go")
        await eventually(lambda: bool(office.reasons("invoke_refused")), TIMEOUT)
        assert office.reasons("invoke_refused") == ["there is no agent XX (known: SH)"]
        # anything semo typed after the refusal would be queued before this prompt
        await office.turn("SH", "echo next")
        await eventually(lambda: len(office.prompts("SH")) == 2, TIMEOUT)
        assert office.prompts("SH") == ["go", "echo next"]


async def test_no_agent_text_is_typed_into_a_shell(tmp_path: Path, runtime_dir: Path) -> None:
    """SH is bash (generic, reads_prompts not set): QA's result for it and QA's task for it are
    refused (QA is told why), a result row left in the store for it is skipped, and nothing
    reaches the shell: the commands hidden in them never run."""
    script = [
        {"match": "go", "text": deliver("SH", "x; touch pwned-by-result")},
        {"match": "DELIVER_RESULT was refused", "text": invoke("SH", "touch pwned-by-invoke")},
    ]
    shell = AgentConfig(
        role="SH",
        profile="generic",
        command=["bash", "--norc", "--noprofile", "-i"],
        env={"PS1": "$ "},
    )
    config = office_config(tmp_path, [hostile(tmp_path, "QA", script, True), shell], "shell")
    work = tmp_path / "work"
    async with store_maker("sqlite", tmp_path) as make_store:
        async with running(make_store, tmp_path, runtime_dir, config) as office:
            await office.turn("QA", "go")
            await eventually(lambda: len(office.prompts("QA")) == 3, TIMEOUT)
            why = "SH does not read prompts (not a model: [[agents]] reads_prompts is off)"
            assert why in office.prompts("QA")[1] and why in office.prompts("QA")[2]
            refused = office.reasons("result_refused")
            assert refused and all(r.startswith("SH does not read") for r in refused)
            assert office.reasons("invoke_refused")[0].startswith("SH does not read prompts")
            assert await office.store.list_results(office.engine.office_id) == []
            assert await office.store.list_invocations(office.engine.office_id) == []
            agents = {role: agent.id for role, agent in office.engine.agents.items()}
            office_id = office.engine.office_id
        store = make_store()
        await store.open()
        await store.create_result(
            AgentResult(
                office_id=office_id,
                sender_agent_id=agents["QA"],
                recipient_agent_id=agents["SH"],
                summary="x; touch pwned-by-legacy-row",
                payload="x; touch pwned-by-legacy-row",
            )
        )
        await store.close()
        async with running(make_store, tmp_path, runtime_dir, config) as office:
            await eventually(lambda: bool(office.reasons("result_skipped")), TIMEOUT)
            assert office.reasons("result_skipped")[0].startswith("SH does not read prompts")
            # whatever semo typed into the shell before would run before this
            await office.turn("SH", "touch marker")
            await eventually(lambda: (work / "marker").exists(), TIMEOUT)
    assert sorted(p.name for p in work.iterdir()) == ["marker"]


async def test_a_second_engine_with_a_live_engines_id_does_not_start(
    backend: str, tmp_path: Path, runtime_dir: Path
) -> None:
    """On any backend (the heartbeat's clock is the database's): the second start raises
    EngineIdInUse before it touches anything; the first engine's session and row stay."""
    config = office_config(tmp_path, [hostile(tmp_path, "QA", [], True)], "twin", 3)
    async with (
        store_maker(backend, tmp_path) as make_store,
        running(make_store, tmp_path, runtime_dir, config) as first,
    ):
        [session] = first.engine.sessions()
        second = Engine(config, store=make_store(), runtime_dir=runtime_dir)
        await second.store.open()
        try:
            with pytest.raises(EngineIdInUse, match="engine twin is already running"):
                await second.start()
        finally:
            await second.store.close()
        assert not session.ended
        row = await first.store.get_session(session.session_id)
        assert row.status != "terminated"
        [beat] = await first.store.list_engines(first.engine.office_id)
        assert (beat.engine_id, beat.status, beat.alive) == ("twin", "running", True)


# -- a real `semo engine` process -------------------------------------------------------------


def engine_config(folder: Path, engine_id: str, agents: str, lease_seconds: float = 30) -> Path:
    if not (folder / "repo").exists():
        make_repo(folder / "repo")
    config = folder / "semo.toml"
    config.write_text(
        sqlite_office_toml("hostile")
        + f"""
[engine]
id = "{engine_id}"
command_timeout = 10
shutdown_grace = 1
lease_seconds = {lease_seconds}

[pool]
max_sessions = 3
warm_roles = ["QA"]
{agents}"""
    )
    return config


def hostile_toml(folder: Path, role: str, script: list[Any]) -> str:
    path = folder / f"{role}.json"
    path.write_text(json.dumps(script))
    command = [sys.executable, "-m", "tests.support.hostile_agent", "--script", str(path)]
    command += ["--log", str(folder / f"{role}.log")]
    return f"""
[[agents]]
role = "{role}"
profile = "generic"
command = {json.dumps(command)}
env = {{ PYTHONPATH = "{REPO}" }}
reads_prompts = true
"""


@asynccontextmanager
async def engine_process(config: Path, log: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    """`semo engine` with its own runtime folder, as on a machine of its own (engines on one
    machine already meet at the office's control socket; the heartbeat is what tells engines
    on several machines apart)."""
    env = environment_without_semo()
    runtime = Path(tempfile.mkdtemp(prefix="semo-x"))
    env["XDG_RUNTIME_DIR"] = str(runtime)
    try:
        with log.open("ab") as sink:
            async with semo_engine(config, env, sink) as process:
                yield process
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


async def stop(process: asyncio.subprocess.Process) -> int:
    process.send_signal(signal.SIGTERM)
    async with asyncio.timeout(TIMEOUT):
        return await process.wait()


async def ready_session(store: SqliteStore, other_than: frozenset[str] = frozenset()) -> str:
    async def probe() -> str | None:
        for office in await store.list_offices():
            for session in await store.list_sessions(office.id):
                if session.status == "ready" and session.session_id not in other_than:
                    return session.session_id
        return None

    return await eventually_value(probe, "a ready session", timeout=60)  # a loaded machine


async def test_semo_engine_refuses_a_forged_result_and_starts_over_legacy_rows(
    tmp_path: Path,
) -> None:
    script = [{"match": "go", "text": deliver("FE", "hi", "forged-123")}]
    agents = hostile_toml(tmp_path, "QA", script) + hostile_toml(tmp_path, "FE", [])
    config = engine_config(tmp_path, "hostile-engine", agents)
    log = tmp_path / "engine.log"
    async with SqliteStore(tmp_path / "semo.db") as store:
        async with engine_process(config, log) as engine:
            session_id = await ready_session(store)
            office = (await store.get_session(session_id)).office_id
            command = await store.insert_command(
                office, "send_prompt", {"prompt": "go"}, session_id=session_id
            )
            await eventually_value(
                lambda: store.get_result(command.id), "the prompt typed", timeout=60
            )
            await eventually(lambda: b"result_refused" in log.read_bytes(), TIMEOUT)
            # the reason reaches the agent (it reads prompts)
            await eventually(lambda: len(prompts(tmp_path, "QA")) == 2, TIMEOUT)
            assert "Your DELIVER_RESULT was refused" in prompts(tmp_path, "QA")[1]
            assert await store.list_results(office) == []
            assert await stop(engine) == 0
        text = log.read_text()
        assert "StoreConflict" not in text and "routing sweep failed" not in text
        assert "there is no invocation 'forged-123' in this office" in text

        agents_by_role = {a.role: a.id for a in await store.list_agents(office)}
        await store.create_result(
            AgentResult(
                office_id=office,
                invocation_id="forged-123",
                sender_agent_id=agents_by_role["QA"],
                recipient_agent_id=agents_by_role["FE"],
                summary="hi",
                payload={"invocation_id": "forged-123", "summary": "hi"},
            )
        )
        async with engine_process(config, log) as engine:
            await eventually(lambda: len(prompts(tmp_path, "FE")) == 1, TIMEOUT)
            assert "not taken as the result of invocation forged-123" in prompts(tmp_path, "FE")[0]
            assert engine.returncode is None
            assert await stop(engine) == 0
        text = log.read_text()
        assert "start failed" not in text and "StoreConflict" not in text
        assert "routing sweep failed" not in text


async def test_an_engine_id_that_is_alive_refuses_a_second_engine(tmp_path: Path) -> None:
    agents = hostile_toml(tmp_path, "QA", [])
    config = engine_config(tmp_path, "twin", agents, lease_seconds=3)
    async with SqliteStore(tmp_path / "semo.db") as store:
        async with engine_process(config, tmp_path / "first.log") as first:
            session_id = await ready_session(store)
            async with engine_process(config, tmp_path / "second.log") as second:
                async with asyncio.timeout(TIMEOUT):
                    assert await second.wait() == 1
            said = (tmp_path / "second.log").read_text()
            assert "engine twin is already running" in said
            assert "give this engine another [engine] id" in said
            # the first engine and its agent are untouched
            assert first.returncode is None
            assert (await store.get_session(session_id)).status == "ready"
            [row] = await store.list_engines((await store.get_session(session_id)).office_id)
            assert row.alive and row.status == "running"
            assert await stop(first) == 0

        # stopped cleanly: the id is free at once
        async with engine_process(config, tmp_path / "third.log") as third:
            killed = await ready_session(store, frozenset({session_id}))
            third.kill()
            await third.wait()
        # killed: its row still says alive; the next start watches it, sees no beat, goes on
        async with engine_process(config, tmp_path / "fourth.log") as fourth:
            await ready_session(store, frozenset({session_id, killed}))
            assert (await store.get_session(killed)).status == "terminated"
            assert "taking it for dead" in (tmp_path / "fourth.log").read_text()
            assert await stop(fourth) == 0
