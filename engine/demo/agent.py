"""A scripted demo agent: a tiny interactive CLI that looks and talks like a coding agent.

It is labelled as a demo everywhere it prints: no AI, no network. It reads one prompt per line at
its `❯` prompt, shows a spinner while "working", and answers in semo's protocol
(docs/PROTOCOL.md), so a demo office shows every kind of message:

- FE, given a task: asks the operator which database to use (ASK_USER, choice); given the
  answer: invokes BE; given BE's result: invokes QA; given QA's result: `[SEMO:DONE]`.
- BE and QA, given an invocation: work, then deliver a result to the caller (DELIVER_RESULT
  with the invocation id); given a plain task: work, then `[SEMO:DONE]`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
COLOURS = {"FE": "38;5;39", "BE": "38;5;208", "QA": "38;5;70"}
INVOCATION = re.compile(r"^\[semo\] Invocation (\S+) from (\w+): (.*?)(?: Context:| When it|$)")
ANSWER = re.compile(r"^\[semo\] Answer to your question \S+: (\S+)")
RESULT = re.compile(r"^\[semo\] Result(?: of invocation \S+)? from (\w+): (.*)")


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
        """A protocol message: each line at the start of its own line, no gutter."""
        for line in text.splitlines():
            say(line + "\r\n")

    def work(self, what: str) -> None:
        self.bullet(f"{self.role} is on it: {what}")
        for step in range(1, self.steps + 1):
            for frame in range(8):
                spin = f"\x1b[{COLOURS.get(self.role, '1')}m{SPINNER[frame % 10]}\x1b[39m"
                say(f"\r\x1b[2K{spin} step {step}/{self.steps}…")
                time.sleep(self.delay / 8)
            say("\r\x1b[2K")
            self.message(f"[STEP_COMPLETE] step {step} of {what!r}")

    def handle(self, prompt: str) -> None:
        if match := INVOCATION.match(prompt):
            invocation_id, caller, task = match.groups()
            self.work(task)
            summary = f"{self.role}: {task.strip()} (demo)"
            if self.role == "QA":
                self.bullet("All tests passed (demo: 12 scripted tests)")
            body = json.dumps({"invocation_id": invocation_id, "summary": summary})
            self.message(f"[DELIVER_RESULT:{caller}]\n{body}\n[/DELIVER_RESULT]")
        elif self.role != "FE" or prompt.startswith("[semo] Your"):
            self.work(prompt)
            self.message("[SEMO:DONE] finished (demo)")
        elif match := ANSWER.match(prompt):
            self.database = match.group(1)
            self.work(f"plan the login page on {self.database}")
            task = {"task": f"Add the /login API on {self.database}", "context": {"demo": True}}
            self.message(f"[INVOKE:BE]\n{json.dumps(task)}\n[/INVOKE]")
        elif (match := RESULT.match(prompt)) and match.group(1) == "BE":
            self.work("wire the page to the API")
            self.message("[INVOKE:QA]\nRun the login tests\n[/INVOKE]")
        elif match := RESULT.match(prompt):
            self.message(f"[SEMO:DONE] login page built on {self.database} (demo)")
        else:
            self.work(prompt)
            question = {
                "type": "choice",
                "question": "Which database should the login page use?",
                "options": ["postgres", "sqlite"],
            }
            self.message(f"[ASK_USER]\n{json.dumps(question)}\n[/ASK_USER]")


def main() -> None:
    parser = argparse.ArgumentParser(description="semo demo agent (scripted, not an AI)")
    parser.add_argument("--role", default="FE")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--delay", type=float, default=0.3, help="seconds per step")
    args = parser.parse_args()
    agent = DemoAgent(args.role, args.steps, args.delay)
    say("\x1b]0;semo demo agent " + args.role + "\x07")
    say(
        f"\x1b[{COLOURS.get(args.role, '1')}m▐ semo demo agent · {args.role}\x1b[0m"
        "  (scripted stand-in, not an AI)\r\n\r\n"
    )
    while True:
        say("\x1b[1m❯\x1b[22m ")
        line = sys.stdin.readline()
        if not line:
            return
        prompt = line.strip()
        if prompt in ("exit", "quit"):
            return
        if prompt:
            agent.handle(prompt)


if __name__ == "__main__":
    main()
