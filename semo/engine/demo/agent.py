"""A scripted demo agent: a tiny interactive CLI that looks and talks like a coding agent.

How it works: docs/SESSIONS.md, "The demo agent".
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import select
import sys
import termios
import time
from pathlib import Path

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
COLOURS = {"FE": "38;5;39", "BE": "38;5;208", "QA": "38;5;70"}
INVOCATION = re.compile(r"^\[semo\] Invocation (\S+) from (\w+): (.*?)(?: Context:| When it|$)")
ANSWER = re.compile(r"^\[semo\] Answer to your question \S+: (\S+)")
RESULT = re.compile(r"^\[semo\] Result(?: of invocation \S+)? from (\w+): (.*)")
STEPS = ["read the code", "make the change", "check it"]
#: The file each role writes (in its working folder: its worktree) and what it puts there.
FILES = {
    "FE": (
        "web/login.html",
        '<form action="/login" method="post">\n  <input name="user">\n'
        '  <input name="password" type="password">\n  <button>Log in</button>\n</form>\n',
    ),
    "BE": (
        "api/login.py",
        "def login(user: str, password: str) -> bool:\n"
        '    """Check the password (demo: DATABASE)."""\n'
        "    return bool(user and password)\n",
    ),
    "QA": (
        "tests/test_login.py",
        "from api.login import login\n\n\ndef test_login() -> None:\n"
        '    assert login("ann", "secret")\n    assert not login("", "")\n',
    ),
}
LINE = 60  # the longest line the agent prints about a task


def say(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


class DemoAgent:
    def __init__(self, role: str, steps: int, delay: float) -> None:
        self.role = role
        self.steps = steps
        self.delay = delay
        self.database = "postgres"

    def bullet(self, text: str) -> None:
        say(f"\x1b[1m●\x1b[22m {text}\r\n")

    def message(self, text: str) -> None:
        """A protocol message: each line at the start of its own line, no gutter (JSON one
        field a line: an 80x24 console's pane is 46 columns wide)."""
        for line in text.splitlines():
            say(line + "\r\n")

    def work(self, what: str) -> None:
        self.bullet(f"{self.role}: {short(what)}")
        for step in range(1, self.steps + 1):
            name = STEPS[(step - 1) % len(STEPS)]
            for frame in range(8):
                spin = f"\x1b[{COLOURS.get(self.role, '1')}m{SPINNER[frame % 10]}\x1b[39m"
                say(f"\r\x1b[2K{spin} {name}…")
                time.sleep(self.delay / 8)
            say("\r\x1b[2K")
            self.message(f"[STEP_COMPLETE] {name}")

    def change_file(self) -> None:
        """Write this role's file (the demo's change) in the working folder."""
        name, text = FILES.get(self.role, FILES["QA"])
        path = Path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.replace("DATABASE", self.database))
        self.bullet(f"{self.role}: wrote {name}")

    def handle(self, prompt: str) -> None:
        if match := INVOCATION.match(prompt):
            invocation_id, caller, task = match.groups()
            self.work(task)
            self.change_file()
            summary = f"{self.role}: {short(task)} (demo)"
            if self.role == "QA":
                self.bullet("All tests passed (demo: 12 scripted tests)")
            body = json.dumps({"invocation_id": invocation_id, "summary": summary}, indent=1)
            self.message(f"[DELIVER_RESULT:{caller}]\n{body}\n[/DELIVER_RESULT]")
        elif self.role != "FE" or prompt.startswith("[semo] Your"):
            self.work(prompt)
            self.message("[SEMO:DONE] finished (demo)")
        elif match := ANSWER.match(prompt):
            self.database = match.group(1)
            self.work(f"plan the login page on {self.database}")
            task = {"task": f"Add the /login API on {self.database}", "context": {"demo": True}}
            self.message(f"[INVOKE:BE]\n{json.dumps(task, indent=1)}\n[/INVOKE]")
        elif (match := RESULT.match(prompt)) and match.group(1) == "BE":
            self.work("wire the page to the API")
            self.message("[INVOKE:QA]\nRun the login tests\n[/INVOKE]")
        elif match := RESULT.match(prompt):
            self.change_file()
            self.message(f"[SEMO:DONE] login page built on {self.database}")  # fits 46 columns
        else:
            self.work(prompt)
            question = {
                "type": "choice",
                "question": "Which database should the login page use?",
                "options": ["postgres", "sqlite"],
            }
            self.message(f"[ASK_USER]\n{json.dumps(question, indent=1)}\n[/ASK_USER]")


JOB_NOTES = re.compile(r"\s+(?:Context \(JSON\):|You are |Retry \(attempt)")


def short(text: str) -> str:
    """The first line of `text` (a job's task without semo's notes after it), at most LINE
    characters."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    line = JOB_NOTES.split(line, maxsplit=1)[0]
    return line if len(line) <= LINE else line[: LINE - 1] + "…"


def shown(prompt: str) -> str:
    """What the agent shows of a prompt semo typed: a line a person reads at a glance."""
    if match := INVOCATION.match(prompt):
        return f"task from {match.group(2)}: {short(match.group(3))}"
    if match := ANSWER.match(prompt):
        return f"answer: {match.group(1)}"
    if match := RESULT.match(prompt):
        return f"result from {match.group(1)}"
    return short(prompt)


def read_prompt() -> str | None:
    """One prompt: a line, and the lines typed right after it (a job's prompt is several)."""
    line = sys.stdin.readline()
    if not line:
        return None
    lines = [line]
    while select.select([sys.stdin], [], [], 0.05)[0]:
        more = sys.stdin.readline()
        if not more:
            break
        lines.append(more)
    return "".join(lines).strip()


def no_echo() -> None:
    """The terminal does not echo what semo types: the agent shows a short line instead."""
    with contextlib.suppress(termios.error, OSError, ValueError):
        attributes = termios.tcgetattr(sys.stdin.fileno())
        attributes[3] &= ~termios.ECHO
        termios.tcsetattr(sys.stdin.fileno(), termios.TCSANOW, attributes)


def main() -> None:
    parser = argparse.ArgumentParser(description="semo demo agent (scripted, not an AI)")
    parser.add_argument("--role", default="FE")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--delay", type=float, default=0.3, help="seconds per step")
    args = parser.parse_args()
    agent = DemoAgent(args.role, args.steps, args.delay)
    say("\x1b]0;semo demo agent " + args.role + "\x07")
    say(
        f"\x1b[{COLOURS.get(args.role, '1')}m▐ semo demo agent {args.role}\x1b[0m"
        " (scripted, not an AI)\r\n\r\n"
    )
    no_echo()
    while True:
        say("\x1b[1m❯\x1b[22m ")
        try:
            prompt = read_prompt()
            if prompt is None:
                return
            say(shown(prompt) + "\r\n")
            if prompt in ("exit", "quit"):
                return
            if prompt:
                agent.handle(prompt)
        except KeyboardInterrupt:  # semo's cancel (Ctrl+C): the turn ends, the agent stays
            say("\r\x1b[2K^C interrupted\r\n")


if __name__ == "__main__":
    main()
