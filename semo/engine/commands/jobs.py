"""`semo job create|show|cancel` and `semo jobs`: jobs from the command line (docs/JOBS.md).

Like the other store commands (semo/engine/commands/office.py): `--config` picks the store and the
office, exit codes 0 done, 2 bad input, 3 store unreachable, 4 a --wait that timed out; and for
`job create --wait`, 1 when the job failed.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from semo.engine import safe_json
from semo.engine.commands.options import _run, add_config_option, add_listing, office_for
from semo.engine.plain_text import plain, plain_json

if TYPE_CHECKING:  # the store and its models load when a command runs, not for --help
    from semo.engine.store.base import Store
    from semo.engine.store.models import Agent, JobEntry


def add_job_commands(commands: Any) -> None:
    job = commands.add_parser(
        "job",
        help="create, follow, show or cancel a job (a task for one agent, to its end)",
        description="Jobs: a task for the office's agent of a role, run by an engine until the "
        "agent says [SEMO:DONE] or the job fails. See docs/JOBS.md.",
    )
    actions = job.add_subparsers(dest="action", required=True, metavar="ACTION")

    create = actions.add_parser(
        "create",
        help="create a job and have an engine run it (prints its id)",
        description="Create a job for the agent of --role and queue the run_job command an "
        "engine of the office runs it with. Prints the job id; with --wait, follows it to the "
        "end, printing each step: exit 0 when it is done, 1 when it failed.",
    )
    create.add_argument("--role", required=True, help="the agent's role, e.g. FE")
    create.add_argument("--task", required=True, help="what the agent is to do")
    create.add_argument("--context", help="a JSON object given to the agent with the task")
    create.add_argument("--office", help="office name or id (default: the config's office)")
    create.add_argument("--wait", action="store_true", help="follow the job to its end")
    create.add_argument(
        "--timeout", type=float, help="--wait: give up after S seconds (exit 4; default: never)"
    )
    create.add_argument("--json", action="store_true", help="print JSON")
    add_config_option(create)
    create.set_defaults(handler=_run(_create))

    show = actions.add_parser(
        "show",
        help="a job's branch, commits, diffstat, worktrees and timeline (attempts, questions, "
        "invocations, results, outcome)",
    )
    show.add_argument("job_id")
    show.add_argument("--json", action="store_true")
    add_config_option(show)
    show.set_defaults(handler=_run(_show))

    cancel = actions.add_parser(
        "cancel",
        help="cancel a job (a pending one at once; a running one is ended by its engine)",
    )
    cancel.add_argument("job_id")
    cancel.add_argument("--reason", default="cancelled by an operator (semo job cancel)")
    cancel.add_argument("--json", action="store_true")
    add_config_option(cancel)
    cancel.set_defaults(handler=_run(_cancel))

    from semo.engine.commands.job_work import add_work_commands
    from semo.engine.commands.ship import add_ship_command

    add_ship_command(actions)
    add_work_commands(actions)

    add_listing(
        commands,
        "jobs",
        "list the office's pending, running and needs_review jobs",
        _jobs,
        include="include jobs that have ended",
    )


def _context(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = safe_json.loads(text)
    except safe_json.JSONInputError as error:
        raise ValueError(f"--context is not JSON: {error}") from None
    if not isinstance(value, dict):
        raise ValueError("--context must be a JSON object")
    return value


async def _create(store: Store, args: argparse.Namespace) -> int:
    from semo.engine.office.job_ops import agents_of, create_job, follow_job, job_timeline
    from semo.engine.office.operations import resolve_office

    context = _context(args.context)
    office = await resolve_office(store, office_for(args))
    job, _ = await create_job(store, office.id, role=args.role, task=args.task, context=context)
    if not args.wait:
        print(plain_json(job.model_dump(mode="json"), indent=2) if args.json else job.id)
        return 0
    agents = await agents_of(store, office.id)
    if not args.json:
        print(job.id, flush=True)
    final = await follow_job(
        store,
        job.id,
        on_entry=lambda entry: None if args.json else _print_step(entry, agents),
        timeout=args.timeout,
    )
    if final is None:
        print(
            f"semo job: job {job.id} has not ended after {args.timeout:g} s "
            "(follow it with `semo job show`)",
            file=sys.stderr,
        )
        return 4
    if args.json:
        timeline = await job_timeline(store, job.id)
        print(plain_json(timeline.model_dump(mode="json"), indent=2))
    else:
        why = f": {final.failure_reason}" if final.failure_reason else ""
        print(plain(f"job {final.id} {final.status} after {final.attempts} attempt(s){why}"))
    return 0 if final.status == "done" else 1


def _print_step(entry: JobEntry, agents: dict[str, Agent]) -> None:
    from semo.engine.office.job_ops import describe_entry

    print(plain(describe_entry(entry, agents), one_line=True), flush=True)
    if entry.step == "question_asked" and entry.ref_id:
        print(f"          answer with: semo answer {entry.ref_id} TEXT (or --option N)", flush=True)
    elif entry.step == "permission_asked" and entry.ref_id:
        print(
            f"          answer with: semo answer {entry.ref_id} allow"
            " | 'allow for this session' | 'deny: REASON'",
            flush=True,
        )


async def _show(store: Store, args: argparse.Namespace) -> int:
    from semo.engine.commands.job_work import print_review, review_lines
    from semo.engine.office.job_ops import agents_of, describe_entry, job_timeline
    from semo.engine.store.short_ids import resolve_job_id

    args.job_id = await resolve_job_id(store, args.job_id)
    timeline = await job_timeline(store, args.job_id)
    review = await review_lines(store, args.job_id, args)
    if args.json:
        data = timeline.model_dump(mode="json")
        data["work"] = review.model_dump(mode="json", exclude={"job"})
        print(plain_json(data, indent=2))
        return 0
    job = timeline.job
    agents = await agents_of(store, job.office_id)
    lines = [
        f"job {job.id}: {job.status}, {job.attempts} attempt(s), agent {job.role or job.agent_id}",
        f"task: {job.task}",
    ]
    if job.context:
        lines.append(f"context: {plain_json(job.context)}")
    if job.failure_reason:
        lines.append(f"reason: {job.failure_reason}")
    if job.cancel_reason and job.status == "running":
        lines.append(f"cancel requested: {job.cancel_reason}")
    for line in lines:
        print(plain(line, one_line=True))
    print_review(review)
    print("timeline:")
    for entry in timeline.entries:
        print("  " + plain(describe_entry(entry, agents), one_line=True))
    if not timeline.entries:
        print("  (nothing yet: no engine has picked the job up)")
    for question in timeline.questions:
        answer = f" -> {question.answer}" if question.answer else ""
        text = f"question {question.id} ({question.status}): {question.question}{answer}"
        print(plain(text, one_line=True))
    for invocation in timeline.invocations:
        target = agents.get(invocation.target_agent_id)
        error = f" ({invocation.error})" if invocation.error else ""
        name = target.role if target else invocation.target_agent_id
        text = f"invocation {invocation.id} -> {name} ({invocation.status}{error}): "
        print(plain(text + invocation.task, one_line=True))
    for result in timeline.results:
        sender = agents.get(result.sender_agent_id)
        name = sender.role if sender else result.sender_agent_id
        text = f"result {result.id} from {name} ({result.status}): {result.summary}"
        print(plain(text, one_line=True))
    return 0


async def _cancel(store: Store, args: argparse.Namespace) -> int:
    from semo.engine.commands.views import emit
    from semo.engine.office.job_ops import cancel_job
    from semo.engine.store.short_ids import resolve_job_id

    job = await cancel_job(store, await resolve_job_id(store, args.job_id), args.reason)
    emit(job, args.json, ["id", "status", "cancel_reason", "failure_reason"])
    return 0


async def _jobs(store: Store, args: argparse.Namespace) -> int:
    from semo.engine.commands.views import office_table
    from semo.engine.office.job_ops import list_jobs

    columns = ["id", "role", "status", "attempts", "task", "failure_reason", "updated_at"]
    return await office_table(
        store, args, columns, lambda office: list_jobs(store, office.id, include_ended=args.all)
    )
