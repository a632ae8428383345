"""`semo` command line."""

from __future__ import annotations

import sys

if sys.argv[1:2] == ["hook"]:  # Claude Code runs this on every hook: skip the heavy imports
    from semo.engine.protocol.hook_shim import main as _hook_shim_main

    sys.exit(_hook_shim_main(sys.argv[2:]))

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from semo.engine.commands.jobs import add_job_commands
from semo.engine.commands.office import add_store_commands
from semo.engine.commands.worktrees import add_worktree_commands
from semo.engine.notify.cli import add_notify_commands
from semo.engine.plain_text import plain, plain_json

if TYPE_CHECKING:
    from semo.engine.terminal.capture import CaptureResult


def _positive(value: str) -> int:
    number = int(value)
    if number <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return number


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="semo", description="Run and watch a team of coding agents in terminals."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    cap = commands.add_parser(
        "capture",
        help="run a program in a terminal, type keys, print the settled screen",
        description=(
            "Run CMD in a pseudo-terminal through semo's terminal core, wait for its first "
            "output (up to 2 s), type the keys, wait until the screen has been quiet for "
            "--settle ms (or CMD exits) and print the rows. "
            "Keys: plain text plus <Enter> <Esc> <Tab> <S-Tab> <BS> <Up> <Down> <Left> <Right> "
            "<Home> <End> <PgUp> <PgDn> <Del> <F1>..<F12> <C-c> <M-x> <C-Up> <Sleep:200> <lt>."
        ),
    )
    cap.add_argument("--cols", type=_positive, default=80, help="terminal width (default 80)")
    cap.add_argument("--rows", type=_positive, default=24, help="terminal height (default 24)")
    cap.add_argument(
        "--keys",
        nargs="+",
        action="extend",
        default=[],
        metavar="K",
        help="key specs, typed in order; the screen settles after each",
    )
    cap.add_argument(
        "--settle",
        type=_positive,
        default=300,
        metavar="MS",
        help="quiet time that counts as settled (default 300 ms)",
    )
    cap.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="give up waiting after S seconds in all (default 10)",
    )
    cap.add_argument("--term", default="xterm-256color", help="TERM for the child")
    cap.add_argument("--record", metavar="FILE.cast", help="also record an asciicast v2 file")
    cap.add_argument(
        "--json",
        action="store_true",
        help="print rows, cursor, title, alternate-screen flag, modes and styles",
    )
    cap.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS]")
    cap.set_defaults(handler=_run_capture)

    demo = commands.add_parser(
        "demo",
        help="run the demo office: FE, BE and QA as scripted demo agents, in the console",
        description=(
            "Start the demo office on the embedded store: FE, BE and QA are the bundled scripted "
            "demo agent (no AI, no network, no Claude Code) in pseudo-terminals. FE gets a job, "
            "asks you a question, invokes BE and QA and finishes. In a terminal the operator "
            "console opens; with --headless (or without a terminal) the flow is printed and the "
            "question answered with its first option."
        ),
    )
    demo.add_argument(
        "--headless", action="store_true", help="no console: print the flow, answer for you"
    )
    demo.add_argument(
        "--timeout", type=float, default=60.0, help="headless: give up after S seconds (60)"
    )
    console = commands.add_parser(
        "console",
        help="the operator console: the engine for semo.toml's office, with live panes",
        description=(
            "Attach to the engine of semo.toml's office (starting it in the background when none "
            "runs) and open the operator console: agent panes, the pool, commands and the "
            "question inbox. Keys: see the footer; ctrl+] leaves a pane; ctrl+q detaches (the "
            "agents keep running; `semo stop` stops them)."
        ),
    )
    console.add_argument(
        "--config", type=Path, default=Path("semo.toml"), help="config file (default ./semo.toml)"
    )
    console.set_defaults(handler=_console_needs_entry_point)
    demo.set_defaults(handler=_run_demo)

    stop = commands.add_parser(
        "stop",
        help="stop the office's engine on this machine and its agents (consoles detach)",
        description=(
            "Ask the engine serving the office (semo console's background engine, or a "
            "foreground semo engine) to stop, as on SIGTERM: it stops taking commands, its "
            "agents get [engine] shutdown_grace seconds (all at once), then are killed, with "
            "what they started in their terminal session. If the engine is still there 20 s "
            "after that, it is killed. An engine that does not answer on its socket within "
            "10 s (stopped, hung) is sent SIGTERM instead, and SIGKILL shutdown_grace + 20 s "
            "later. Exit 0 when it stopped, 1 when no engine serves the office, 2 for a "
            "configuration error."
        ),
    )
    stop_target = stop.add_mutually_exclusive_group()
    stop_target.add_argument(
        "--config", type=Path, default=Path("semo.toml"), help="config file (default ./semo.toml)"
    )
    stop_target.add_argument("--demo", action="store_true", help="the demo office's engine")
    stop.set_defaults(handler=_run_stop)

    parse = commands.add_parser(
        "parse",
        help="replay a recording through the protocol pipeline; print messages, signals, states",
        description=(
            "Replay an asciicast v2 recording (FILE.cast, or - for stdin) through the same "
            "pipeline a live session uses and print the protocol messages, malformed messages, "
            "completion/error signals and state changes found, with their times and sources."
        ),
    )
    parse.add_argument("file", metavar="FILE.cast|-")
    parse.add_argument("--cols", type=_positive, help="replay at this width instead")
    parse.add_argument(
        "--profile",
        choices=_profile_names(),
        help="agent kind (default: claude if the recording has hook events)",
    )
    parse.add_argument("--json", action="store_true", help="one JSON object per line")
    parse.set_defaults(handler=_run_parse)

    hook = commands.add_parser(
        "hook",
        help="forward a Claude Code hook's stdin JSON to the engine (Claude Code runs this)",
    )
    hook.add_argument("event", metavar="EVENT")
    hook.set_defaults(handler=lambda args: _hook_main([args.event]))

    init = commands.add_parser(
        "init",
        help="write a commented example semo.toml (office, store, engine, pool, agents)",
        description=(
            "Write an example semo.toml with every key, its default and what it does, and three "
            "Claude Code agents (FE, BE, QA). An existing file is kept unless --force. "
            "The reference is docs/CONFIG.md."
        ),
    )
    init.add_argument(
        "path",
        nargs="?",
        default="semo.toml",
        metavar="PATH",
        help="the file to write, or a folder to write semo.toml in (default ./semo.toml)",
    )
    init.add_argument("--force", action="store_true", help="overwrite an existing file")
    init.set_defaults(handler=_run_init)

    engine = commands.add_parser(
        "engine",
        help="run the headless engine: warm sessions, execute commands from the store",
        description=(
            "Run the engine for the office in the config file until SIGTERM/SIGINT: sync the "
            "office and its agents to the store, reconcile what an earlier run left, start the "
            "warm pool, claim and run commands. SIGTERM stops taking commands, finishes or "
            "fails what is in flight, ends the sessions and records it. Exit 0 after a clean "
            "stop, 1 if the engine cannot start, 2 for a configuration error."
        ),
    )
    engine.add_argument(
        "--config", type=Path, default=Path("semo.toml"), help="config file (default ./semo.toml)"
    )
    engine.add_argument(
        "--log-format",
        choices=["text", "json"],
        default=None,
        help="log lines as text or JSON (default: [engine] log_format, text)",
    )
    engine.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="also serve the Sessions REST API there (default: [api] listen; docs/API.md)",
    )
    engine.set_defaults(handler=_run_engine)

    api = commands.add_parser(
        "api",
        help="serve the Sessions REST API of a store that engines serve (docs/API.md)",
        description=(
            "Serve the Sessions REST API for the store in the config file until SIGTERM/SIGINT: "
            "writes become agent_commands rows that an engine runs, reads come from the store. "
            "Tokens: SEMO_API_TOKEN (the config's office), SEMO_API_TOKENS (JSON object office "
            "-> token), or [api] token / tokens. Exit 0 after a clean stop, 1 if it cannot "
            "serve, 2 for a configuration error."
        ),
    )
    api.add_argument(
        "--config", type=Path, default=Path("semo.toml"), help="config file (default ./semo.toml)"
    )
    api.add_argument("--listen", metavar="HOST:PORT", help="address (default: [api] listen)")
    api.add_argument("--log-format", choices=["text", "json"], default=None)
    api.set_defaults(handler=_run_api)

    add_store_commands(commands)
    add_job_commands(commands)
    add_worktree_commands(commands)
    add_notify_commands(commands)
    return parser


def _hook_main(argv: list[str]) -> int:
    from semo.engine.protocol.hook_shim import main as hook_shim_main

    return hook_shim_main(argv)


def _run_engine(args: argparse.Namespace) -> int:
    from semo.engine.daemon import main as engine_main

    return engine_main(args.config, args.log_format, args.http)


def _run_api(args: argparse.Namespace) -> int:
    from semo.engine.api.server import main as api_main

    return api_main(args.config, args.listen, args.log_format)


def _run_init(args: argparse.Namespace) -> int:
    import shlex
    from pathlib import Path

    from semo.engine.config import ConfigError, init_config, load_config

    try:
        target = Path(args.path)
        if args.path.endswith(("/", os.sep)):  # "ops/": a folder, even one not made yet
            target = target / "semo.toml"
        path = init_config(target, force=args.force)
        config = load_config(path)
    except ConfigError as error:
        print(f"semo init: {error}", file=sys.stderr)
        return 2
    roles = ", ".join(agent.role for agent in config.agents)
    print(f"semo init: wrote {path} (office {config.office.name!r}, agents {roles})")
    print("next: edit it (office name, repository, agents' prompts), then run:")
    print(f"  semo engine --config {shlex.quote(str(path))}")
    return 0


def _profile_names() -> list[str]:
    from semo.engine.agents.registry import names

    return list(names())


def _run_parse(args: argparse.Namespace) -> int:
    from semo.engine.agents.replay import describe_event, format_event, replay
    from semo.engine.terminal.asciicast import AsciicastError

    try:
        source = sys.stdin if args.file == "-" else args.file
        result = replay(source, profile=args.profile, columns=args.cols)
    except FileNotFoundError:
        print(f"semo parse: no such file: {args.file}", file=sys.stderr)
        return 2
    except AsciicastError as error:
        print(f"semo parse: {plain(str(error))}", file=sys.stderr)
        return 2
    for event in result.events:  # agent text: controls made visible / JSON-escaped
        if args.json:
            print(plain_json(describe_event(event)))
        else:
            print(plain(format_event(event)))
    return 0


def _run_demo(args: argparse.Namespace) -> int:
    from semo.engine.demo.runner import run_headless
    from semo.engine.hardening import make_non_dumpable

    make_non_dumpable()

    import asyncio

    from semo.engine.store.base import StoreError

    try:
        return asyncio.run(run_headless(args.timeout))
    except (StoreError, OSError) as error:  # e.g. a runtime folder that is not ours: one line
        print(f"semo demo: the demo cannot run: {plain(str(error))}", file=sys.stderr)
        return 1


def _run_stop(args: argparse.Namespace) -> int:
    from semo.engine.config import ConfigError, load_config
    from semo.engine.control.launcher import LaunchError, stop_engine
    from semo.engine.control.paths import office_paths

    try:
        if args.demo:
            from semo.engine.demo.office import DEMO_OFFICE, demo_config

            config = demo_config()
            paths = office_paths(DEMO_OFFICE, config.store_config())
        else:
            config = load_config(args.config)
            paths = office_paths(config.office.name, config.store_config())
    except ConfigError as error:
        print(f"semo stop: {error}", file=sys.stderr)
        return 2
    try:
        said = stop_engine(paths, config.engine.shutdown_grace, say=_say_stopping)
        print(f"semo stop: {said}")
    except LaunchError as error:
        print(f"semo stop: {error}", file=sys.stderr)
        return 1
    return 0


def _say_stopping(words: str) -> None:
    """What `semo stop` waits for, on stdout at once (not only once it is over)."""
    print(f"semo stop: {words}", flush=True)


def _console_needs_entry_point(_args: argparse.Namespace) -> int:
    print(
        "semo: the console is started by the `semo` entry point (console.cli); "
        "run `semo console`, not python -m semo.engine.cli",
        file=sys.stderr,
    )
    return 2


def _run_capture(args: argparse.Namespace) -> int:
    import asyncio

    from semo.engine.terminal.capture import capture
    from semo.engine.terminal.keys import KeySpecError, parse_keys
    from semo.engine.terminal.pty_process import TerminalSpawnError

    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not argv:
        print("semo capture: give the command after --, e.g. semo capture -- ls", file=sys.stderr)
        return 2
    try:
        for spec in args.keys:
            parse_keys(spec)
    except KeySpecError as error:
        print(f"semo capture: {error}", file=sys.stderr)
        return 2
    try:
        result = asyncio.run(
            capture(
                argv,
                cols=args.cols,
                rows=args.rows,
                keys=args.keys,
                settle_ms=args.settle,
                timeout=args.timeout,
                term=args.term,
                record=args.record,
            )
        )
    except TerminalSpawnError as error:
        print(f"semo capture: {error}", file=sys.stderr)
        return 127
    _print_capture(result, args.json)
    if not result.settled:
        print(f"semo capture: screen still changing after {args.timeout} s", file=sys.stderr)
        return 3
    return 0


def _print_capture(result: CaptureResult, as_json: bool) -> None:
    if as_json:
        print(plain_json(result.model_dump(mode="json"), indent=2))
    else:
        sys.stdout.write("".join(plain(line, one_line=True) + "\n" for line in result.lines))


def _own_parsers(parser: argparse.ArgumentParser) -> None:
    """Let every subcommand's parser record itself, so its own usage reports its errors."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                sub.set_defaults(own_parser=sub)
                _own_parsers(sub)


def parse_command_line(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse argv; unknown arguments are reported with the subcommand's usage, not semo's."""
    parser = build_parser()
    _own_parsers(parser)
    args, extra = parser.parse_known_args(argv)
    if extra:
        owner: argparse.ArgumentParser = getattr(args, "own_parser", parser)
        owner.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_command_line(argv)
    try:
        return int(args.handler(args))
    except BrokenPipeError:  # `semo parse x.cast | head`: the reader left, which is fine
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
