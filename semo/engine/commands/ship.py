"""`semo job ship ID --push/--pr/--merge`: ship a job's work from the command line.

Exit codes as the other job commands (semo/engine/commands/jobs.py): 0 shipped, 1 a step failed (the
message says which and why; the timeline has it too), 2 bad input, 3 the store is unreachable.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from semo.engine.commands.options import _run, add_config_option, load_cli_config
from semo.engine.plain_text import plain, plain_json

if TYPE_CHECKING:
    from semo.engine.store.base import Store

__all__ = ["add_ship_command"]


def add_ship_command(actions: Any) -> None:
    """`ship` under `semo job`."""
    ship = actions.add_parser(
        "ship",
        help="ship a done job's work: push its branch, open a pull request, merge it",
        description="Ship the job's branch: --push to [ship] remote, --pr a GitHub pull "
        "request (pushes first; gh when logged in, else GitHub's API with GITHUB_TOKEN), "
        "--merge into the job's base branch (fast-forward or a merge commit; refused on "
        "conflicts). See docs/JOBS.md, 'Shipping a job's work'.",
    )
    ship.add_argument("job_id")
    ship.add_argument("--push", action="store_true", help="push the job's branch")
    ship.add_argument("--pr", action="store_true", help="open a pull request (pushes first)")
    ship.add_argument("--merge", action="store_true", help="merge into the base branch")
    ship.add_argument("--json", action="store_true", help="print JSON")
    add_config_option(ship)
    ship.set_defaults(handler=_run(_ship))


async def _ship(store: Store, args: argparse.Namespace) -> int:
    from semo.engine.ship.settings import ShipSection
    from semo.engine.ship.ship import ShipError, ShipRequest, ship_stored_job
    from semo.engine.store.short_ids import resolve_job_id

    if not (args.push or args.pr or args.merge):
        raise ValueError("say what to do: --push, --pr and/or --merge")
    args.job_id = await resolve_job_id(store, args.job_id)
    config = load_cli_config(args)
    settings = config.ship if config is not None else ShipSection()
    request = ShipRequest(push=args.push, pr=args.pr, merge=args.merge)
    try:
        report = await ship_stored_job(store, args.job_id, request, settings)
    except ShipError as error:
        print(f"semo job ship: {plain(str(error))}", file=sys.stderr)
        return 1
    if args.json:
        print(plain_json(report.model_dump(mode="json"), indent=2))
        return 0
    if report.pushed:
        print(plain(f"pushed {report.branch} to {report.remote} ({report.pushed[:12]})"))
    if report.pr is not None:
        already = " (the job's pull request already)" if report.pr_existed else ""
        url = f": {report.pr.url}" if report.pr.url else ""
        print(plain(f"pull request #{report.pr.number}{url}{already}"))
    if report.merged:
        what = f"{report.merge_kind} ({report.merged[:12]})"
        print(plain(f"merged {report.branch} into {report.base}: {what}"))
    return 0
