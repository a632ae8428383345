"""`semo demo`: the demo office's three agents (FE, BE, QA) in PTYs, shown as live text panes.

Today this exercises the terminal core end to end (PTY, screen, keys) with the bundled demo
agent; the store, routing and the Textual console join it as their issues land.
"""

from __future__ import annotations

import asyncio
import shutil
import sys

from engine.terminal.session import TerminalSession

ROLES = ("FE", "BE", "QA")
TASKS = {"FE": "build the login page", "BE": "add the /health endpoint", "QA": "run the tests"}


def _render(sessions: dict[str, TerminalSession], width: int) -> str:
    out = []
    for role, session in sessions.items():
        out.append(f"── {role} " + "─" * max(0, width - 6))
        rows = session.screen.text_rows()
        while rows and not rows[-1]:
            rows.pop()
        out.extend(row[:width] for row in rows[-6:])
    return "\r\n".join(out)


def _is_done(session: TerminalSession) -> bool:
    return "[SEMO:DONE]" in "\n".join(session.screen.text_rows())


def _all_done(sessions: dict[str, TerminalSession]) -> bool:
    return all(_is_done(s) for s in sessions.values())


async def run_demo(seconds: float, *, live: bool) -> int:
    width = min(shutil.get_terminal_size((100, 30)).columns, 100)
    sessions = {
        role: TerminalSession(
            [sys.executable, "-m", "engine.demo.agent", "--role", role], cols=width, rows=10
        )
        for role in ROLES
    }
    for session in sessions.values():
        session.start()
    try:
        for role, session in sessions.items():
            await session.wait_quiet(0.2, 5)
            await session.send_keys(TASKS[role] + "<Enter>")
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        while loop.time() < end and not (not live and _all_done(sessions)):
            if live:
                sys.stdout.write("\x1b[H\x1b[2J" + _render(sessions, width) + "\r\n")
                sys.stdout.flush()
            await asyncio.sleep(0.25)
        if not live:
            print(_render(sessions, width).replace("\r\n", "\n"))
        done = sum(_is_done(s) for s in sessions.values())
        print(f"\nsemo demo: {done}/{len(sessions)} demo agents finished their task.")
        return 0 if done == len(sessions) else 1
    finally:
        for session in sessions.values():
            await session.close(grace=0.5)
