"""Store commands of `semo`: migrate, command, sessions, engines, end-session, questions,
answer.

Each handler opens the configured store (SEMO_STORE, SEMO_DATABASE_URL, ...), does one thing,
prints a row or a table (or JSON with --json) and returns an exit code: 0 done, 2 bad input,
3 the store is unreachable, 4 a --wait that timed out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel

from engine.store import open_store
from engine.store.base import Store, StoreError, StoreUnavailable
from engine.store.models import COMMAND_TYPES, InvalidCommand
from engine.store.operations import (
    answer_question,
    end_session,
    resolve_office,
    wait_for_result,
)

Handler = Callable[[Store, argparse.Namespace], Awaitable[int]]


def add_store_commands(commands: Any) -> None:
    migrate = commands.add_parser(
        "migrate", help="apply migrations/*.sql to the Postgres/Supabase database (idempotent)"
    )
    migrate.set_defaults(handler=_run(_migrate, needs_store=False))

    command = commands.add_parser(
        "command",
        help="insert an agent command; with --wait, print its result",
        description=f"Insert a row into agent_commands. Types: {', '.join(COMMAND_TYPES)}.",
    )
    command.add_argument("type", metavar="TYPE")
    command.add_argument(
        "--office", help="office name or id (default: $SEMO_OFFICE or the only one)"
    )
    command.add_argument("--session", help="session id (needed by all but create_session/run_job)")
    command.add_argument("--payload", default="{}", help='JSON object, e.g. \'{"prompt": "hi"}\'')
    command.add_argument("--wait", action="store_true", help="wait for the result row and print it")
    command.add_argument("--timeout", type=float, default=30.0, help="--wait limit (default 30 s)")
    command.add_argument("--json", action="store_true", help="print JSON")
    command.set_defaults(handler=_run(_command))

    sessions = commands.add_parser("sessions", help="list the office's agent sessions")
    sessions.add_argument("--office")
    sessions.add_argument("--all", action="store_true", help="include terminated sessions")
    sessions.add_argument("--json", action="store_true")
    sessions.set_defaults(handler=_run(_sessions))

    engines = commands.add_parser(
        "engines", help="list the office's engines, their heartbeats and whether each is alive"
    )
    engines.add_argument("--office")
    engines.add_argument("--json", action="store_true")
    engines.set_defaults(handler=_run(_engines))

    end = commands.add_parser(
        "end-session",
        help="record a session whose engine is gone as ended",
        description=(
            "Mark a session terminated in the store, for one whose engine died and will not "
            "come back (an engine that restarts with the same id ends its old sessions itself, "
            "and the other engines end them once its heartbeat has run out). "
            "Its pending questions are cancelled and commands queued for it fail. It does not "
            "stop a process: end a live engine's session with `semo command terminate`."
        ),
    )
    end.add_argument("session_id")
    end.add_argument(
        "--reason", default="ended by an operator (semo end-session)", help="the end reason"
    )
    end.add_argument("--json", action="store_true")
    end.set_defaults(handler=_run(_end_session))

    questions = commands.add_parser("questions", help="list pending ASK_USER questions")
    questions.add_argument("--office")
    questions.add_argument("--all", action="store_true", help="include answered ones")
    questions.add_argument("--json", action="store_true")
    questions.set_defaults(handler=_run(_questions))

    answer = commands.add_parser("answer", help="answer a pending question")
    answer.add_argument("question_id")
    answer.add_argument("text", nargs="?", help="the answer (text, a choice, or yes/no)")
    answer.add_argument("--option", type=int, metavar="N", help="pick option N (1-based)")
    answer.add_argument("--json", action="store_true")
    answer.set_defaults(handler=_run(_answer))


def _run(handler: Handler, *, needs_store: bool = True) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return asyncio.run(_with_store(handler, args) if needs_store else handler(None, args))  # type: ignore[arg-type]
        except StoreUnavailable as error:
            print(f"semo {args.command}: store unavailable: {error}", file=sys.stderr)
            return 3
        except (StoreError, InvalidCommand, ValueError) as error:
            print(f"semo {args.command}: {error}", file=sys.stderr)
            return 2

    return run


async def _with_store(handler: Handler, args: argparse.Namespace) -> int:
    store = open_store()
    async with store:
        return await handler(store, args)


def _emit(row: BaseModel | list[BaseModel], as_json: bool, columns: list[str]) -> None:
    rows = row if isinstance(row, list) else [row]
    if as_json:
        data = [r.model_dump(mode="json") for r in rows]
        print(json.dumps(data if isinstance(row, list) else data[0], ensure_ascii=False, indent=2))
        return
    if not rows:
        print("(none)")
        return
    table = [[_cell(r.model_dump(mode="json").get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(t[i]) for t in table)) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for line in table:
        print("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip())


def _cell(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


async def _migrate(_: Store | None, args: argparse.Namespace) -> int:
    from engine.store import StoreConfig
    from engine.store.migrate import migrate

    config = StoreConfig.from_env()
    if config.backend == "sqlite":
        print("semo migrate: the sqlite store creates its schema itself; nothing to do")
        return 0
    applied = await migrate(config.dsn())
    print("applied: " + ", ".join(applied) if applied else "up to date: nothing to apply")
    return 0


async def _command(store: Store, args: argparse.Namespace) -> int:
    try:
        payload = json.loads(args.payload)
    except json.JSONDecodeError as error:
        raise ValueError(f"--payload is not JSON: {error}") from None
    if not isinstance(payload, dict):
        raise ValueError("--payload must be a JSON object")
    office = await resolve_office(store, args.office)
    command = await store.insert_command(office.id, args.type, payload, session_id=args.session)
    if not args.wait:
        _emit(command, args.json, ["id", "command_type", "status", "session_id"])
        return 0
    result = await wait_for_result(store, office.id, command.id, args.timeout)
    if result is None:
        current = await store.get_command(command.id)
        print(
            f"semo command: no result within {args.timeout:g} s; command {command.id} "
            f"is {current.status}",
            file=sys.stderr,
        )
        return 4
    _emit(result, args.json, ["command_id", "success", "result", "error"])
    return 0 if result.success else 1


async def _sessions(store: Store, args: argparse.Namespace) -> int:
    office = await resolve_office(store, args.office)
    rows = await store.list_sessions(office.id, include_terminated=args.all)
    _emit(rows, args.json, ["session_id", "agent_id", "status", "last_activity_at"])
    return 0


async def _engines(store: Store, args: argparse.Namespace) -> int:
    office = await resolve_office(store, args.office)
    rows = await store.list_engines(office.id)
    _emit(rows, args.json, ["engine_id", "status", "alive", "last_seen", "alive_until"])
    return 0


async def _end_session(store: Store, args: argparse.Namespace) -> int:
    session = await end_session(store, args.session_id, args.reason)
    _emit(session, args.json, ["session_id", "status", "engine_id", "end_reason"])
    return 0


async def _questions(store: Store, args: argparse.Namespace) -> int:
    office = await resolve_office(store, args.office)
    rows = await store.list_questions(office.id, status=None if args.all else "pending")
    _emit(rows, args.json, ["id", "question_type", "question", "options", "status"])
    return 0


async def _answer(store: Store, args: argparse.Namespace) -> int:
    question = await answer_question(store, args.question_id, text=args.text, option=args.option)
    _emit(question, args.json, ["id", "status", "answer"])
    return 0
