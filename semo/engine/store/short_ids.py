"""Short ids: the first characters of a row's id, accepted wherever the CLI takes an id.

The console and `semo jobs` show them; `semo job show/cancel/diff/resolve/ship` and
`semo answer` take them. A full id is used as it is; a prefix of at least MIN_PREFIX characters
must name exactly one row of the store (of every office it holds)."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable

from semo.engine.store.base import NotFound, Store

MIN_PREFIX = 4
FULL_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
PREFIX = re.compile(r"^[0-9a-f-]+$")


def pick(given: str, ids: Iterable[str], what: str) -> str:
    """The one id in `ids` that starts with `given` (NotFound for none, ValueError when
    several do). What is no id's start (too short, not hexadecimal) is returned as it is: the
    store then says there is no such row."""
    if FULL_ID.match(given.strip().lower()):
        return given.strip().lower()
    if len(given.strip()) < MIN_PREFIX or not PREFIX.match(given.strip().lower()):
        return given
    given = given.strip().lower()
    found = sorted({i for i in ids if i.startswith(given)})
    if not found:
        raise NotFound(f"no {what} id starts with {given}")
    if len(found) > 1:
        shown = ", ".join(i[:12] for i in found[:5])
        raise ValueError(f"{given} is the start of {len(found)} {what} ids ({shown}): give more")
    return found[0]


async def _resolve(
    store: Store, given: str, what: str, listing: Callable[[str], Awaitable[list[str]]]
) -> str:
    if FULL_ID.match(given.strip().lower()) or not PREFIX.match(given.strip().lower()):
        return pick(given, (), what)
    ids: list[str] = []
    for office in await store.list_offices():
        ids += await listing(office.id)
    return pick(given, ids, what)


async def resolve_job_id(store: Store, given: str) -> str:
    """`given` (a job's id or its start) as the job's full id."""

    async def jobs(office_id: str) -> list[str]:
        return [job.id for job in await store.list_jobs(office_id)]

    return await _resolve(store, given, "job", jobs)


async def resolve_question_id(store: Store, given: str) -> str:
    """`given` (a question's id or its start) as the question's full id."""

    async def questions(office_id: str) -> list[str]:
        return [q.id for q in await store.list_questions(office_id, status=None)]

    return await _resolve(store, given, "question", questions)
