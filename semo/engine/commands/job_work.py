"""`semo job diff`, `semo job resolve`, and the work part of `semo job show`.

See docs/JOBS.md "Shipping a job's work".

Exit codes as the other job commands: 0 done, 2 bad input (an unknown job or role, a job with
no branch yet, a job that does not need review), 3 the store is unreachable; `resolve --done`
exits 1 when the work still conflicts.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from semo.engine.commands.options import _run, add_config_option, load_cli_config
from semo.engine.plain_text import plain, plain_json

if TYPE_CHECKING:
    from semo.engine.jobwork.review import JobDiff, JobReview
    from semo.engine.jobwork.settings import GitSection
    from semo.engine.store.base import Store

__all__ = ["add_work_commands", "review_lines"]


def add_work_commands(actions: Any) -> None:
    diff = actions.add_parser(
        "diff",
        help="the diff of a job's work since its base (the job branch, or one role's)",
        description="What the job's branch changed since the job's base commit: every file's "
        "unified diff (the files' own text: no external diff or textconv runs). --role: only "
        "that role's branch; --stat: lines added and removed per file.",
    )
    diff.add_argument("job_id")
    diff.add_argument("--role", help="one role's branch (default: the job branch)")
    diff.add_argument("--stat", action="store_true", help="per file: lines added and removed")
    diff.add_argument("--json", action="store_true", help="print JSON (JobDiff)")
    add_config_option(diff)
    diff.set_defaults(handler=_run(_diff))

    resolve = actions.add_parser(
        "resolve",
        help="go on with a job whose roles' work conflicts (needs_review)",
        description="Hand the conflict to an agent: the job goes back to an engine, which "
        "merges the job branch into --role's branch in its worktree (conflict markers in the "
        "files) and gives the agent --prompt; when it is done the job's end runs again. Or, "
        "with --done, after resolving it by hand: combine the roles' work again here.",
    )
    resolve.add_argument("job_id")
    resolve.add_argument("--role", help="the role to resolve it (default: the conflicting one)")
    resolve.add_argument("--prompt", help="what to tell the agent (default: the files)")
    resolve.add_argument(
        "--done", action="store_true", help="resolved by hand: combine again (no agent)"
    )
    resolve.add_argument("--json", action="store_true")
    add_config_option(resolve)
    resolve.set_defaults(handler=_run(_resolve))


def _settings(args: argparse.Namespace) -> GitSection | None:
    config = load_cli_config(args)
    return None if config is None else config.git


async def review_lines(store: Store, job_id: str, args: argparse.Namespace) -> JobReview:
    """The job's review (for `semo job show`)."""
    from semo.engine.jobwork.review import job_review

    return await job_review(store, job_id, settings=_settings(args))


def print_review(review: JobReview) -> None:
    """The work part of `semo job show`."""
    if review.branch is None:
        print(plain(f"branch: none ({review.note or 'not started'})", one_line=True))
        return
    base = f"{review.base_branch} at {(review.base_commit or '')[:10]}"
    print(plain(f"branch: {review.branch} (base {base})", one_line=True))
    if review.note:
        print(plain(f"  {review.note}", one_line=True))
    stat = f"{len(review.files)} file(s), +{review.insertions} -{review.deletions}"
    print(plain(f"commits: {len(review.commits)}, {stat}", one_line=True))
    for commit in review.commits:
        who = commit.role or commit.author
        print(plain(f"  {commit.short} [{who}] {commit.subject}", one_line=True))
    for file in review.files:
        added = "bin" if file.added is None else f"+{file.added} -{file.removed}"
        print(plain(f"  {added:>12}  {file.path}", one_line=True))
    for role, work in review.roles.items():
        state = {None: "gone or elsewhere", True: "uncommitted changes", False: "clean"}
        where = work.worktree or "no worktree"
        line = f"worktree [{role}] {where}: {work.branch}, {work.commits} commit(s) ahead, "
        print(plain(line + state[work.dirty], one_line=True))
    if review.conflict is not None:
        print(plain(f"conflict: {review.conflict.detail}", one_line=True))
        print(f"  resolve with: semo job resolve {review.job.id} [--role R] [--prompt TEXT]")
        print(f"  or by hand, then: semo job resolve {review.job.id} --done")


async def _diff(store: Store, args: argparse.Namespace) -> int:
    from semo.engine.jobwork.review import job_diff
    from semo.engine.store.short_ids import resolve_job_id

    diff = await job_diff(store, await resolve_job_id(store, args.job_id), role=args.role)
    if args.json:
        print(plain_json(diff.model_dump(mode="json"), indent=2))
    elif args.stat:
        _print_stat(diff)
    else:
        print(diff.text, end="")
    return 0


def _print_stat(diff: JobDiff) -> None:
    added = sum(f.added or 0 for f in diff.files)
    removed = sum(f.removed or 0 for f in diff.files)
    width = max((len(f.path) for f in diff.files), default=0)
    for file in diff.files:
        change = "binary" if file.added is None else f"+{file.added} -{file.removed}"
        print(plain(f" {file.status} {file.path.ljust(width)} | {change}", one_line=True))
    print(f" {len(diff.files)} file(s) changed, {added} insertion(s)(+), {removed} deletion(s)(-)")


async def _resolve(store: Store, args: argparse.Namespace) -> int:
    from semo.engine.jobwork.resolve import combine_again, hand_conflict
    from semo.engine.store.short_ids import resolve_job_id

    args.job_id = await resolve_job_id(store, args.job_id)
    if args.done:
        if args.role or args.prompt:
            raise ValueError("--done combines the work again; it takes no --role or --prompt")
        job = await store.get_job(args.job_id)
        office = await store.get_office(job.office_id)
        if not office.repository:
            raise ValueError(f"office {office.name} has no repository")
        job = await combine_again(store, job.id, Path(office.repository), _settings(args))
        text = f"job {job.id} {job.status}" + (
            f": {job.failure_reason}" if job.failure_reason else ""
        )
    else:
        job, command = await hand_conflict(store, args.job_id, role=args.role, prompt=args.prompt)
        text = f"job {job.id} pending: handed to an agent (command {command.id})"
    print(plain_json(job.model_dump(mode="json"), indent=2) if args.json else plain(text))
    return 0 if job.status in ("done", "pending") else 1
