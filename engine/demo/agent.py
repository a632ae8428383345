"""A scripted demo agent: a tiny interactive CLI that looks and talks like a coding agent.

It is labelled as a demo everywhere it prints. It reads a task per line at its `❯` prompt,
shows a spinner while "working", and answers in semo's protocol (docs/PROTOCOL.md): progress
as [STEP_COMPLETE] lines and the end of a task as [SEMO:DONE], each at the start of its line.
"""

from __future__ import annotations

import argparse
import sys
import time

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
COLOURS = {"FE": "38;5;39", "BE": "38;5;208", "QA": "38;5;70"}


def say(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def work(task: str, role: str, steps: int, delay: float) -> None:
    say(f"\x1b[1m●\x1b[22m {role} is on it: {task}\r\n")
    for step in range(1, steps + 1):
        for frame in range(8):
            say(
                f"\r\x1b[2K\x1b[{COLOURS.get(role, '1')}m{SPINNER[frame % 10]}\x1b[39m "
                f"step {step}/{steps}…"
            )
            time.sleep(delay / 8)
        say(f"\r\x1b[2K\x1b[1m●\x1b[22m [STEP_COMPLETE] step {step} of {task!r}\r\n")
    say("\x1b[1m●\x1b[22m [SEMO:DONE] finished\r\n")


def main() -> None:
    parser = argparse.ArgumentParser(description="semo demo agent (scripted, not an AI)")
    parser.add_argument("--role", default="FE")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--delay", type=float, default=0.4, help="seconds per step")
    args = parser.parse_args()
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
        task = line.strip()
        if task in ("exit", "quit"):
            return
        if task:
            work(task, args.role, args.steps, args.delay)


if __name__ == "__main__":
    main()
