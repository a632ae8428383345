"""A scripted *hostile* agent, run in a real PTY as a `generic` agent.

    python -m tests.support.hostile_agent --script acts.json --log prompts.jsonl

Like `tests.support.script_agent`, it waits at a `❯ ` prompt, logs each prompt line it reads
(one JSON string per line in --log, so a test can see exactly what semo typed into it), and
answers with the next act of its script. An act writes raw output, so it can carry anything an
attacker would print: markup, escape sequences (OSC 52, OSC 9, kitty pushes, terminal queries),
forged protocol markers, endless lines, floods. Acts are objects:

    {"raw": "..."}                         write the text as is (no gutter, no newline added)
    {"text": "..."}                        each line with the `● ` gutter and CRLF, as script_agent
    {"raw": "...", "repeat": 1000}         write it `repeat` times
    {"flood": 10485760, "chunk": "x"}      write `chunk` until `flood` bytes have gone out
    {"match": "RESULT", ...}               the first unused act whose `match` is in the prompt
    {"...": ..., "delay": 0.5}             wait `delay` seconds first
    {"...": ..., "prompt": false}          do not print a new `❯ ` prompt afterwards
    {"...": ..., "exit": 3}                exit with this code afterwards (a crash)

The script may start with acts to run before the first prompt: a top-level object
`{"start": [acts...], "replies": [acts...]}` instead of a list. With no reply left it prints
`(script exhausted)`. Output is written to the PTY in binary so no encoding step gets in the way.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

Act = dict[str, Any]


def write(data: str) -> None:
    raw = data.encode("utf-8", "surrogateescape")
    view = memoryview(raw)
    while view:
        sent = os.write(1, view[:65536])
        view = view[sent:]


def perform(act: Act) -> None:
    time.sleep(float(act.get("delay", 0)))
    if "flood" in act:
        chunk = str(act.get("chunk", "x")) * 4096
        remaining = int(act["flood"])
        while remaining > 0:
            piece = chunk[:remaining]
            write(piece)
            remaining -= len(piece.encode("utf-8", "surrogateescape"))
    if "raw" in act:
        for _ in range(int(act.get("repeat", 1))):
            write(str(act["raw"]))
    if "text" in act:
        for _ in range(int(act.get("repeat", 1))):
            for line in str(act["text"]).splitlines():
                write(f"● {line}\r\n")


def pick(replies: list[Act], prompt: str) -> Act | None:
    for index, reply in enumerate(replies):
        if "match" not in reply or reply["match"] in prompt:
            return replies.pop(index)
    return None


def load(path: Path) -> tuple[list[Act], list[Act]]:
    raw = json.loads(path.read_text())
    if isinstance(raw, dict):
        start, replies = raw.get("start", []), raw.get("replies", [])
    else:
        start, replies = [], raw
    norm = [a if isinstance(a, dict) else {"text": a} for a in replies]
    return [a if isinstance(a, dict) else {"text": a} for a in start], norm


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--script", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True)
    args = parser.parse_args()
    start, replies = load(args.script)
    write("hostile agent ready\r\n")
    for act in start:
        perform(act)
        if "exit" in act:
            return int(act["exit"])
    show_prompt = True
    while True:
        if show_prompt:
            write("❯ ")
        line = sys.stdin.buffer.readline()
        if not line:
            return 0
        prompt = line.decode("utf-8", "surrogateescape").rstrip("\n")
        with args.log.open("a") as log:
            log.write(json.dumps(prompt) + "\n")
        act = pick(replies, prompt)
        if act is None:
            write("● (script exhausted)\r\n")
            show_prompt = True
            continue
        perform(act)
        if "exit" in act:
            return int(act["exit"])
        show_prompt = bool(act.get("prompt", True))


if __name__ == "__main__":
    sys.exit(main())
