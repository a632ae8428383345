"""A flooding agent for budget tests and benches: every prompt it reads is answered with
results for another agent.

    python tests/support/flood_agent.py PEER PER SIZE LOG

At its `❯ ` prompt it reads one line, appends it to LOG (one JSON string per line) and prints
PER `[DELIVER_RESULT:PEER]` blocks of SIZE characters each. Two of them, each the other's
PEER, under `reads_prompts = true`: every result typed into one starts PER more (issue 21 #2).
Standard library only: it runs as a script file, from any folder.
"""

from __future__ import annotations

import json
import os
import sys


def main(argv: list[str]) -> int:
    peer, per, size, log = argv[0], int(argv[1]), int(argv[2]), argv[3]
    sent = 0
    while True:
        os.write(1, "\u276f ".encode())
        line = sys.stdin.readline()
        if not line:
            return 0
        with open(log, "a") as prompts:
            prompts.write(json.dumps(line.rstrip("\n")) + "\n")
        out = []
        for _ in range(per):
            sent += 1
            body = f"result {sent} " + "x" * size
            out.append(f"[DELIVER_RESULT:{peer}]\r\n{body}\r\n[/DELIVER_RESULT]\r\n")
        data = "".join(out).encode()
        while data:
            data = data[os.write(1, data) :]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
