"""`semo demo`: the demo office's three agents (FE, BE, QA) in PTYs, shown as live text panes.

Each agent is the bundled scripted demo agent in its own pseudo-terminal; the protocol pipeline
(`AgentObserver`) reads each screen and reports states and messages, exactly as it does for a real
agent without hooks. The office, its agents and their sessions (with every state change) are
rows in the configured store: the embedded SQLite file by default, so `semo sessions --office
demo --all` shows them afterwards. Routing and the Textual console join the demo as they land.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from dataclasses import dataclass, field

from engine.protocol.messages import Done
from engine.protocol.observer import AgentObserver, MessageFound, ObserverEvent
from engine.protocol.state import StateChange
from engine.store import open_store
from engine.store.base import Store
from engine.store.models import Agent, AgentSession, Office
from engine.terminal.session import TerminalSession

ROLES = ("FE", "BE", "QA")
DEMO_OFFICE = "demo"
TASKS = {"FE": "build the login page", "BE": "add the /health endpoint", "QA": "run the tests"}


@dataclass
class DemoAgent:
    role: str
    session: TerminalSession
    row: AgentSession
    observer: AgentObserver = field(default_factory=lambda: AgentObserver("generic"))
    log: list[str] = field(default_factory=list)
    states: asyncio.Queue[str] = field(default_factory=asyncio.Queue)

    def on_output(self, _: str) -> None:
        for event in self.observer.on_screen(self.session.screen, time.monotonic()):
            self.log.append(describe(event))
            if isinstance(event, StateChange):
                self.states.put_nowait(str(event.state))

    async def record_states(self, store: Store) -> None:
        """Write each state change to the session's row, in order."""
        while True:
            state = await self.states.get()
            await store.set_session_status(self.row.session_id, state)  # type: ignore[arg-type]
            self.states.task_done()

    @property
    def done(self) -> bool:
        return any(
            isinstance(e, MessageFound) and isinstance(e.message, Done)
            for e in self.observer.events
        )


def describe(event: ObserverEvent) -> str:
    if isinstance(event, StateChange):
        return f"state {event.state} ({event.reason})"
    if isinstance(event, MessageFound):
        return f"message {event.message.kind}"
    return type(event).__name__.lower()


def _render(agents: list[DemoAgent], width: int) -> str:
    out = []
    for agent in agents:
        out.append(f"── {agent.role} · {agent.observer.state} " + "─" * max(0, width - 20))
        rows = agent.session.screen.text_rows()
        while rows and not rows[-1]:
            rows.pop()
        out.extend(row[:width] for row in rows[-6:])
    return "\r\n".join(out)


async def demo_office(store: Store) -> tuple[Office, dict[str, Agent]]:
    """The office named "demo" with agents FE, BE and QA (created on first use)."""
    office = next((o for o in await store.list_offices() if o.name == DEMO_OFFICE), None)
    if office is None:
        office = await store.create_office(Office(name=DEMO_OFFICE))
    agents = {a.role: a for a in await store.list_agents(office.id)}
    for role in ROLES:
        if role not in agents:
            agents[role] = await store.upsert_agent(
                Agent(
                    office_id=office.id,
                    name=f"demo {role}",
                    role=role,
                    prompt=f"Scripted demo agent for the {role} role.",
                    command=[sys.executable, "-m", "engine.demo.agent", "--role", role],
                )
            )
    return office, agents


async def run_demo(seconds: float, *, live: bool) -> int:
    async with open_store() as store:
        office, agents = await demo_office(store)
        print(f"semo demo: office {office.name!r} in the {store.backend} store")
        return await _run_agents(store, office, agents, seconds, live=live)


async def _run_agents(
    store: Store, office: Office, agents_by_role: dict[str, Agent], seconds: float, *, live: bool
) -> int:
    width = min(shutil.get_terminal_size((100, 30)).columns, 100)
    agents = []
    for role in ROLES:
        agent = agents_by_role[role]
        session = TerminalSession(agent.command, cols=width, rows=10)
        row = await store.upsert_session(AgentSession(office_id=office.id, agent_id=agent.id))
        agents.append(DemoAgent(role, session, row))
    writers = [asyncio.create_task(agent.record_states(store)) for agent in agents]
    for agent in agents:
        agent.session.add_listener(agent.on_output)
        agent.session.start()
    try:
        for agent in agents:
            await agent.session.wait_quiet(0.2, 5)
            await agent.session.send_keys(TASKS[agent.role] + "<Enter>")
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        while loop.time() < end and not (not live and all(a.done for a in agents)):
            if live:
                sys.stdout.write("\x1b[H\x1b[2J" + _render(agents, width) + "\r\n")
                sys.stdout.flush()
            await asyncio.sleep(0.25)
        if not live:
            print(_render(agents, width).replace("\r\n", "\n"))
            for agent in agents:
                print(f"{agent.role}: " + " → ".join(agent.log))
        finished = sum(agent.done for agent in agents)
        print(f"\nsemo demo: {finished}/{len(agents)} demo agents finished their task.")
        print("semo demo: the sessions and their states: semo sessions --office demo --all")
        return 0 if finished == len(agents) else 1
    finally:
        for agent in agents:
            await agent.session.close(grace=0.5)
            await agent.states.join()
            await store.set_session_status(agent.row.session_id, "terminated", reason="demo ended")
        for writer in writers:
            writer.cancel()
