"""The office snapshot carries the latest routing steps (audit15 #4: a console that attaches
later, or a second console, had an empty commands panel; the steps lived only in the console
that saw them on the bus).

A real engine serving its control socket in this process, scripted agents in real PTYs: FE asks
a 4-option question; a client that connects afterwards gets the step in its snapshot, plain text
with FE's role, under the key the console gives the live event; after the answer a new client
gets both steps, oldest first. The list is bounded (the latest RECENT_STEPS) and holds no
control characters.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from semo.console.app import SemoApp
from semo.console.panel_text import snapshot_step_rows
from semo.console.widgets.commands_panel import CommandsPanel
from semo.engine.config import OfficeConfig, PoolConfig, SemoConfig
from semo.engine.control.client import EngineClient
from semo.engine.control.views import RECENT_STEPS
from semo.engine.engine import Engine
from semo.engine.events import RoutingStep
from tests.console.console_snapshot_app import FOUR, REPO, script_agent
from tests.support.control_engine import serving_engine
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(120)
TIMEOUT = 30.0


@pytest.fixture
async def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Engine]:
    ask = f"[ASK_USER]\n{json.dumps(FOUR)}\n[/ASK_USER]"
    agents = [
        script_agent(tmp_path, "FE", [{"match": "go", "text": ask}], 80, 24),
        script_agent(tmp_path, "BE", [{"match": "go", "text": "be: done"}], 80, 24),
    ]
    config = SemoConfig(
        office=OfficeConfig(name="steps", workspace_root=tmp_path / "ws"),
        store={"backend": "sqlite", "sqlite_path": tmp_path / "semo.db"},
        pool=PoolConfig(max_sessions=2, warm_roles=["FE", "BE"]),
        agents=agents,
    )
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "HOME": str(tmp_path)}
    async with serving_engine(config, tmp_path, monkeypatch, env, "semo-steps-") as engine:
        yield engine


def publish_steps(engine: Engine, step: str, steps: list[tuple[str, str]]) -> None:
    """FE's routing steps `step` on the engine's bus, one per (ref_id, detail), in order."""
    assert engine.office is not None and engine.office.id is not None
    fe = engine.agents["FE"]
    for ref_id, detail in steps:
        engine.bus.publish(
            RoutingStep(
                office_id=engine.office.id, step=step, ref_id=ref_id, agent_id=fe.id, detail=detail
            )
        )


async def snapshot_of(engine: Engine) -> dict[str, object]:
    """What a console that connects now gets when it subscribes."""
    assert engine.control is not None
    client = EngineClient(engine.control.paths)
    await client.connect()
    try:
        return await client.request({"op": "subscribe"})
    finally:
        await client.close()


async def test_a_console_that_attaches_later_gets_the_routing_steps(engine: Engine) -> None:
    await eventually(lambda: len(engine.sessions()) == 2, TIMEOUT)
    assert (await snapshot_of(engine))["steps"] == []
    fe = next(s for s in engine.sessions() if s.role == "FE")
    engine.send_prompt(fe.session_id, "go")
    await eventually(lambda: fe.state.value == "waiting_input", TIMEOUT)
    [question] = await engine.pending_questions()

    steps = (await snapshot_of(engine))["steps"]
    assert isinstance(steps, list) and len(steps) == 1
    [asked] = steps
    assert asked["key"] == f"step:question_asked:{question.id}"  # the console's live key
    assert (asked["step"], asked["role"], asked["detail"]) == (
        "question_asked",
        "FE",
        FOUR["question"],
    )
    assert asked["session_id"] == fe.session_id and asked["at"]

    await engine.answer(question.id, option=2)
    await eventually(lambda: fe.state.value != "waiting_input", TIMEOUT)
    later = (await snapshot_of(engine))["steps"]
    assert isinstance(later, list)
    assert [s["step"] for s in later][:2] == ["question_asked", "question_answered"]
    assert all(s["role"] == "FE" for s in later)


async def test_the_snapshot_keeps_the_latest_steps_as_plain_text(engine: Engine) -> None:
    assert engine.office is not None and engine.office.id is not None
    detail = "bad \x1b]52;c;aGk=\x07 \x9b2J line\nbreak {}"
    bad = [(f"r{n}", detail.format(n)) for n in range(RECENT_STEPS + 10)]
    publish_steps(engine, "malformed", bad)
    await eventually(
        lambda: engine.control is not None and len(engine.control._steps) == RECENT_STEPS,
        TIMEOUT,
    )
    steps = (await snapshot_of(engine))["steps"]
    assert isinstance(steps, list) and len(steps) == RECENT_STEPS
    assert [s["ref_id"] for s in steps] == [f"r{n}" for n in range(10, RECENT_STEPS + 10)]
    for step in steps:
        assert not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in step["detail"]), step
        assert step["detail"].startswith("bad ") and step["role"] == "FE"


async def test_the_console_reads_the_steps_as_its_commands_rows(engine: Engine) -> None:
    """panel_text.snapshot_step_rows: the rows an attaching console adds to its commands panel
    from the snapshot, named as it names the live events; a broken row is left out."""
    await eventually(lambda: len(engine.sessions()) == 2, TIMEOUT)
    fe = next(s for s in engine.sessions() if s.role == "FE")
    engine.send_prompt(fe.session_id, "go")
    await eventually(lambda: fe.state.value == "waiting_input", TIMEOUT)
    # the question is stored, then its step published: the state can come first
    await eventually(
        lambda: (
            engine.control is not None
            and any(s["step"] == "question_asked" for s in engine.control._steps)
        ),
        TIMEOUT,
    )
    steps = (await snapshot_of(engine))["steps"]
    assert isinstance(steps, list)
    rows = snapshot_step_rows([*steps, {"key": "x"}, "not a step", {**steps[0], "at": "?"}])
    assert [(r.what, r.status, r.detail) for r in rows] == [("FE asked you", "", FOUR["question"])]
    [question] = await engine.pending_questions()
    assert rows[0].key == f"step:question_asked:{question.id}"


async def test_a_console_opened_later_shows_the_steps_in_its_commands_panel(
    engine: Engine,
) -> None:
    """The console seeds its commands panel from the snapshot once, at the start, next to the
    steps it sees live (one row for a step seen both ways)."""
    assert engine.office is not None and engine.office.id is not None and engine.control
    publish_steps(engine, "invocation_sent", [(f"inv{n}", f"task {n}") for n in range(3)])
    await eventually(lambda: len(engine.control._steps) == 3, TIMEOUT)  # type: ignore[union-attr]
    app = SemoApp(EngineClient(engine.control.paths))
    async with app.run_test(size=(120, 40)):
        await eventually(lambda: getattr(app.screen, "started", False), TIMEOUT)
        panel = app.screen.query_one(CommandsPanel)
        await eventually(lambda: len(panel.rows_shown) >= 3, TIMEOUT)
        shown = [(row.what, row.detail) for row in panel.rows_shown]
        assert shown[:3] == [("FE got task", f"task {n}") for n in (2, 1, 0)]  # newest first
