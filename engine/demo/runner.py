"""`semo demo`: the demo office's three agents (FE, BE, QA) in PTYs, shown as live text panes.

Each agent is the bundled scripted demo agent in its own pseudo-terminal; the protocol pipeline
(`AgentObserver`) reads each screen and reports states and messages, exactly as it does for a real
agent without hooks. The store, routing and the Textual console join the demo as they land.
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
from engine.terminal.session import TerminalSession

ROLES = ("FE", "BE", "QA")
TASKS = {"FE": "build the login page", "BE": "add the /health endpoint", "QA": "run the tests"}


@dataclass
class DemoAgent:
    role: str
    session: TerminalSession
    observer: AgentObserver = field(default_factory=lambda: AgentObserver("generic"))
    log: list[str] = field(default_factory=list)

    def on_output(self, _: str) -> None:
        for event in self.observer.on_screen(self.session.screen, time.monotonic()):
            self.log.append(describe(event))

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


async def run_demo(seconds: float, *, live: bool) -> int:
    width = min(shutil.get_terminal_size((100, 30)).columns, 100)
    agents = [
        DemoAgent(
            role,
            TerminalSession(
                [sys.executable, "-m", "engine.demo.agent", "--role", role], cols=width, rows=10
            ),
        )
        for role in ROLES
    ]
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
        return 0 if finished == len(agents) else 1
    finally:
        for agent in agents:
            await agent.session.close(grace=0.5)
