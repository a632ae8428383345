"""Store commands of `semo`: migrate, command, sessions, engines, end-session, questions, answer.

The job commands are in semo/engine/store/job_cli.py.

Each handler opens the configured store, does one thing, prints a row or a table (or JSON with
--json) and returns an exit code: 0 done, 2 bad input (or a bad config file), 3 the store is
unreachable, 4 a --wait that timed out.

The store and the office come from `--config` (default `./semo.toml` when it exists): its
`[store]` and `[office] name`, each store setting overridden by its environment variable when
set (SEMO_STORE, SEMO_SQLITE_PATH, SEMO_DATABASE_URL, SUPABASE_URL, SUPABASE_SERVICE_ROLE_KEY;
docs/CONFIG.md), the office by `--office` or SEMO_OFFICE. Without a config file the environment
alone decides, as before.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from semo.engine import safe_json
from semo.engine.commands.options import (
    OFFICE_HELP,
    _run,
    _run_main,
    add_config_option,
    add_listing,
    office_for,
    store_config_for,
)
from semo.engine.store.literals import COMMAND_TYPES

if TYPE_CHECKING:  # the store, pydantic and the models load when a command runs, not for --help
    from semo.engine.store.base import Store
    from semo.engine.store.models import Office, QuestionStatus


def add_store_commands(commands: Any) -> None:
    migrate = commands.add_parser(
        "migrate", help="apply migrations/*.sql to the Postgres/Supabase database (idempotent)"
    )
    add_config_option(migrate)
    migrate.set_defaults(handler=_run_main(_migrate))

    command = commands.add_parser(
        "command",
        help="insert an agent command; with --wait, print its result",
        description=f"Insert a row into agent_commands. Types: {', '.join(COMMAND_TYPES)}.",
    )
    command.add_argument("type", metavar="TYPE")
    command.add_argument("--office", help=OFFICE_HELP)
    command.add_argument("--session", help="session id (needed by all but create_session/run_job)")
    command.add_argument("--payload", default="{}", help='JSON object, e.g. \'{"prompt": "hi"}\'')
    command.add_argument("--wait", action="store_true", help="wait for the result row and print it")
    command.add_argument("--timeout", type=float, default=30.0, help="--wait limit (default 30 s)")
    command.add_argument("--json", action="store_true", help="print JSON")
    add_config_option(command)
    command.set_defaults(handler=_run(_command))

    add_listing(
        commands,
        "sessions",
        "list the office's agent sessions",
        _sessions,
        include="include terminated sessions",
    )
    add_listing(
        commands,
        "engines",
        "list the office's engines, their heartbeats and whether each is alive",
        _engines,
    )

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
    add_config_option(end)
    end.set_defaults(handler=_run(_end_session))

    add_listing(
        commands,
        "questions",
        "list pending ASK_USER questions",
        _questions,
        include="include answered ones",
    )

    answer = commands.add_parser("answer", help="answer a pending question")
    answer.add_argument("question_id")
    answer.add_argument("text", nargs="?", help="the answer (text, a choice, or yes/no)")
    answer.add_argument("--option", type=int, metavar="N", help="pick option N (1-based)")
    answer.add_argument("--json", action="store_true")
    add_config_option(answer)
    answer.set_defaults(handler=_run(_answer))

    from semo.engine.commands.members import add_office_commands

    add_office_commands(commands, _run, add_config_option)

    from semo.engine.commands.supabase import add_supabase_commands

    add_supabase_commands(commands, _run, add_config_option)


async def _migrate(args: argparse.Namespace) -> int:
    from semo.engine.store.migrate import migrate

    config = store_config_for(args)
    if config.backend == "sqlite":
        print("semo migrate: the sqlite store creates its schema itself; nothing to do")
        return 0

    def warn(text: str) -> None:
        print(f"semo migrate: WARNING: {text}", file=sys.stderr)

    applied = await migrate(config.dsn(), warn=warn)
    print("applied: " + ", ".join(applied) if applied else "up to date: nothing to apply")
    return 0


async def _command(store: Store, args: argparse.Namespace) -> int:
    from semo.engine.commands.views import emit
    from semo.engine.office.operations import check_input_reaches, resolve_office, wait_for_result

    try:
        payload = safe_json.loads(args.payload)
    except safe_json.JSONInputError as error:
        if error.reason == "malformed":
            raise ValueError(f"--payload is {error}".replace(" valid JSON", " JSON")) from None
        raise ValueError(f"--payload refused: {error}") from None
    if not isinstance(payload, dict):
        raise ValueError("--payload must be a JSON object")
    office = await resolve_office(store, office_for(args))
    await check_input_reaches(store, args.type, args.session)  # not for a dead engine's session
    command = await store.insert_command(office.id, args.type, payload, session_id=args.session)
    if not args.wait:
        emit(command, args.json, ["id", "command_type", "status", "session_id"])
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
    emit(result, args.json, ["command_id", "success", "result", "error"])
    return 0 if result.success else 1


async def _sessions(store: Store, args: argparse.Namespace) -> int:
    from semo.engine.commands.views import SessionView, office_table
    from semo.engine.office.operations import LOST, lost_sessions

    async def rows(office: Office) -> list[SessionView]:
        agents = {agent.id: agent for agent in await store.list_agents(office.id)}
        sessions = await store.list_sessions(office.id, include_terminated=args.all)
        lost = await lost_sessions(store, office.id, sessions)
        return [
            SessionView(
                **row.model_dump(),
                role=agents[row.agent_id].role if row.agent_id in agents else None,
                name=agents[row.agent_id].name if row.agent_id in agents else None,
                state=LOST if row.session_id in lost else row.status,
                lost_reason=lost.get(row.session_id),
            )
            for row in sessions
        ]

    columns = ["session_id", "role", "name", "state", "engine_id", "last_activity_at"]
    return await office_table(store, args, [*columns, "lost_reason"], rows)


async def _engines(store: Store, args: argparse.Namespace) -> int:
    from semo.engine.commands.views import EngineView, office_table
    from semo.engine.liveness import engine_pid
    from semo.engine.office.operations import engine_gone

    async def rows(office: Office) -> list[EngineView]:
        views = []
        for row in await store.list_engines(office.id):
            gone = None if row.status == "stopped" else engine_gone(row.engine_id, row)
            alive = row.alive and gone is None
            state = engine_state(row.status, alive)
            status = "dead" if state == "dead" else row.status
            fields = row.model_dump() | {"alive": alive, "status": status}
            pid = engine_pid(row.engine_id, row)
            views.append(EngineView(**fields, state=state, pid=pid, dead_reason=gone))
        return views

    columns = ["engine_id", "state", "alive", "pid", "last_seen", "alive_until", "stopped_at"]
    return await office_table(store, args, [*columns, "dead_reason"], rows)


def engine_state(status: str, alive: bool) -> str:
    """alive; stopped (a clean stop); dead (its heartbeat ran out, another engine ended what
    it left, which makes it run out at once, or it was a process of this machine that has
    exited: semo/engine/office/operations.py `engine_gone`)."""
    if alive:
        return "alive"
    return "stopped" if status == "stopped" else "dead"


async def _end_session(store: Store, args: argparse.Namespace) -> int:
    from semo.engine.commands.views import emit
    from semo.engine.office.operations import end_session

    session = await end_session(store, args.session_id, args.reason)
    emit(session, args.json, ["session_id", "status", "engine_id", "end_reason"])
    return 0


async def _questions(store: Store, args: argparse.Namespace) -> int:
    from semo.engine.commands.views import QuestionView, office_table

    status: QuestionStatus | None = None if args.all else "pending"

    async def rows(office: Office) -> list[QuestionView]:
        roles = {agent.id: agent.role for agent in await store.list_agents(office.id)}
        return [
            QuestionView(**q.model_dump(), role=roles.get(q.agent_id))
            for q in await store.list_questions(office.id, status=status)
        ]

    columns = ["id", "role", "question_type", "question", "options", "status"]
    return await office_table(store, args, columns, rows)


async def _answer(store: Store, args: argparse.Namespace) -> int:
    from semo.engine.commands.views import emit
    from semo.engine.office.operations import answer_question
    from semo.engine.store.short_ids import resolve_question_id

    question_id = await resolve_question_id(store, args.question_id)
    question = await answer_question(store, question_id, text=args.text, option=args.option)
    emit(question, args.json, ["id", "status", "answer"])
    return 0
