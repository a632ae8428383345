"""Rows as the store commands print them: a table, or JSON with --json.

Used by semo/engine/store/cli.py, job_cli.py and member_cli.py; also the rows `semo sessions`
and `semo engines` print.

Imported when a command runs (it loads the models), never for `semo --help`.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel

from semo.engine.plain_text import plain, plain_json
from semo.engine.store.models import AgentSession, EngineHeartbeat, Office, UserQuestion

if TYPE_CHECKING:
    from semo.engine.store.base import Store

#: a table cell's most characters
CELL_CHARS = 60


class SessionView(AgentSession):
    """A session row with its agent's role and name (None when the agent row is gone), and its
    state for people: its `status`, or "lost" when it has not ended but its engine is not
    running (`lost_reason` says why: semo/engine/office/operations.py `lost_sessions`)."""

    role: str | None = None
    name: str | None = None
    state: str = ""
    lost_reason: str | None = None


class QuestionView(UserQuestion):
    """A question with the role of the agent that asked it (None when the agent row is gone)."""

    role: str | None = None


class EngineView(EngineHeartbeat):
    """An engine's heartbeat row with its state for people: alive, stopped or dead (its
    heartbeat ran out, or it was a process of this machine that has exited: `dead_reason`).
    `alive` is false and `status` is `dead` for a dead one, whatever its heartbeat row still
    says."""

    #: running, stopped, or dead (not alive, not stopped cleanly): never running for a dead one
    status: str  # type: ignore[assignment]  # the row's EngineState, and "dead"
    state: str
    #: the engine's process id when this machine can tell (semo/engine/liveness.py)
    pid: int | None = None
    dead_reason: str | None = None


def emit(row: BaseModel | Sequence[BaseModel], as_json: bool, columns: list[str]) -> None:
    """Print one row or a list of rows: JSON (an object, or a list), or a table of `columns`."""
    single = isinstance(row, BaseModel)
    rows: Sequence[BaseModel] = [row] if isinstance(row, BaseModel) else row
    if as_json:
        data = [r.model_dump(mode="json") for r in rows]
        print(plain_json(data[0] if single else data, indent=2))
        return
    if not rows:
        print("(none)")
        return
    table = [[cell(r.model_dump(mode="json").get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(t[i]) for t in table)) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for line in table:
        print("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip())


def cell(value: object) -> str:
    """A table cell: store text (an agent's question, an error) on one line, every control
    character made visible (semo.engine.plain_text), at most CELL_CHARS characters."""
    text = plain(value if isinstance(value, str) else plain_json(value), one_line=True)
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 3] + "..."


async def office_table(
    store: Store,
    args: argparse.Namespace,
    columns: list[str],
    rows: Callable[[Office], Awaitable[Sequence[BaseModel]]],
) -> int:
    """A listing command: the office of --office / SEMO_OFFICE / --config, its `rows(office)`
    printed (`emit`); exit code 0."""
    from semo.engine.commands.options import office_for
    from semo.engine.office.operations import resolve_office

    office = await resolve_office(store, office_for(args))
    emit(await rows(office), args.json, columns)
    return 0
