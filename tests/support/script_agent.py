"""A scripted stand-in for a coding agent's CLI, run in a real PTY as a `generic` agent.

    python -m tests.support.script_agent --script replies.json --log prompts.jsonl

At its `❯` prompt it reads one line (a prompt), appends it to --log (one JSON string per line),
and prints the next reply of the script, whose text may hold protocol markers. A reply is
either a string or an object:

    {"text": "...", "delay": 0.5}          print after `delay` seconds
    {"text": "...", "exit": 3}             print, then exit with code 3 (a crash)
    {"match": "RESULT", "text": "..."}     the first unused reply whose `match` is in the prompt
    {"files": {"a/b.txt": "..."}, ...}     write these files (relative to its folder) first

With no reply left it prints `(script exhausted)`. Output lines carry Claude Code's `● `
gutter, which semo's generic reader removes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any


def say(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def logged_prompts(log: Path) -> list[str]:
    """The prompts an agent has logged so far; a long line it is still writing is left out."""
    if not log.exists():
        return []
    text = log.read_text()
    return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines()]


def pick(replies: list[dict[str, Any]], prompt: str) -> dict[str, Any] | None:
    for index, reply in enumerate(replies):
        if "match" not in reply or reply["match"] in prompt:
            return replies.pop(index)
    return None


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--script", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True)
    args = parser.parse_args()
    raw = json.loads(args.script.read_text())
    replies = [r if isinstance(r, dict) else {"text": r} for r in raw]
    say("script agent ready\r\n")
    while True:
        say("❯ ")
        line = sys.stdin.readline()
        if not line:
            return 0
        prompt = line.rstrip("\n")
        with args.log.open("a") as log:
            log.write(json.dumps(prompt) + "\n")
        reply = pick(replies, prompt)
        if reply is None:
            say("● (script exhausted)\r\n")
            continue
        time.sleep(float(reply.get("delay", 0)))
        for name, content in dict(reply.get("files", {})).items():
            path = Path(name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
        for text in str(reply["text"]).splitlines():
            say(f"● {text}\r\n")
        if "exit" in reply:
            return int(reply["exit"])


if __name__ == "__main__":
    sys.exit(main())
