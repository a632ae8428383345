"""The `semo` entry point: the console's two commands here, everything else in semo.engine.cli.

`engine` never imports the console (import-linter contract), so the commands that open the
Textual app (`semo console`, and `semo demo` in a terminal) are dispatched from this module, and
every other command goes straight to semo.engine.cli without importing Textual.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def wants_console(args: list[str]) -> bool:
    if args[:1] == ["console"]:
        return "-h" not in args and "--help" not in args
    if args[:1] == ["demo"]:
        return (
            "--headless" not in args
            and "-h" not in args
            and "--help" not in args
            and (sys.stdin.isatty() and sys.stdout.isatty())
        )
    return False


#: what `semo console` says, on one line, when stdin or stdout is no terminal
NO_TERMINAL = (
    "semo console: stdin and stdout must be a terminal (the console draws on it); "
    "from a script use `semo sessions`, `semo questions`, `semo answer`, `semo jobs`"
)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not wants_console(args):
        from semo.engine.cli import main as engine_main

        return engine_main(args)
    if args[0] == "console" and not (sys.stdin.isatty() and sys.stdout.isatty()):
        print(NO_TERMINAL, file=sys.stderr)  # no escape sequence, no engine started
        return 2
    from semo.console.launch import launch

    return launch(args)


if __name__ == "__main__":
    sys.exit(main())
