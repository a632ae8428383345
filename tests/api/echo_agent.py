"""A harmless stand-in agent for fuzzing: whatever it is sent, it never runs anything.

The terminal is put in raw mode (so Ctrl+C, Ctrl+D and escape sequences are just bytes), input
is echoed as a terminal would (printable ASCII as itself, any other byte as `.`, so no escape
sequence reaches the screen), and each Enter (CR or LF) is answered with `ok <n bytes>` and the
`$ ` prompt, which semo's generic reader takes as "ready"; Ctrl+C (a cancel) with `^C` and the
prompt, as a shell does. Run as `python tests/api/echo_agent.py`.
"""

from __future__ import annotations

import os
import sys
import tty


def main() -> int:
    fd = sys.stdin.fileno()
    if os.isatty(fd):
        tty.setraw(fd)
    out = sys.stdout.fileno()
    os.write(out, b"echo agent\r\n$ ")
    line = 0
    while True:
        try:
            chunk = os.read(fd, 65536)
        except InterruptedError:
            continue
        except OSError:
            return 0
        if not chunk:
            return 0
        echo = bytearray()
        for byte in chunk:
            if byte in (0x0D, 0x0A):
                echo += f"\r\nok {line}\r\n$ ".encode()
                line = 0
            elif byte == 0x03:
                echo += b"^C\r\n$ "
                line = 0
            else:
                echo += bytes([byte]) if 0x20 <= byte < 0x7F else b"."
                line += 1
        os.write(out, bytes(echo))


if __name__ == "__main__":
    sys.exit(main())
