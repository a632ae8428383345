"""`semo worktrees [--json]` and `semo worktrees prune [--force] [--json]`.

The worktrees semo made, and removing those whose work is elsewhere (docs/JOBS.md "Shipping a
job's work").

Exit codes as the other store commands: 0, 2 bad input (no repository), 3 store unreachable.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from semo.engine.commands.options import _run, add_config_option, load_cli_config, office_for
from semo.engine.plain_text import plain, plain_json

if TYPE_CHECKING:
    from semo.engine.store.base import Store

__all__ = ["add_worktree_commands"]


def add_worktree_commands(commands: Any) -> None:
    parser = commands.add_parser(
        "worktrees",
        help="the worktrees semo made (role, job, branch, dirty, ahead of base, age); prune",
        description="List every worktree semo made for the office's repository: role, job, "
        "branch, whether it holds uncommitted changes, commits ahead of the base branch, age, "
        "and where its work is (merged, shipped, combined on a job branch, unmerged, dirty); "
        "and the earlier jobs' leftovers saved on semo/saved/... branches. `prune` removes the "
        "worktrees whose work is merged or shipped; --force also the others (uncommitted "
        "changes are saved on a branch first; unmerged branches are kept).",
    )
    parser.add_argument("action", nargs="?", choices=["prune"], help="remove what is merged")
    parser.add_argument("--force", action="store_true", help="prune: also unmerged and dirty")
    parser.add_argument("--office", help="office name or id (default: the config's office)")
    parser.add_argument("--json", action="store_true")
    add_config_option(parser)
    parser.set_defaults(handler=_run(_worktrees))


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


async def _worktrees(store: Store, args: argparse.Namespace) -> int:
    from semo.engine.jobwork.worktree_list import list_worktrees, prune_worktrees
    from semo.engine.office.operations import resolve_office

    if args.force and args.action != "prune":
        raise ValueError("--force goes with prune")
    office = await resolve_office(store, office_for(args))
    config = load_cli_config(args)
    settings = None if config is None else config.git
    if args.action == "prune":
        results = await prune_worktrees(store, office, force=args.force, settings=settings)
        if args.json:
            print(plain_json([r.model_dump(mode="json") for r in results], indent=2))
            return 0
        for result in results:
            verb = "removed" if result.removed else "kept   "
            saved = f" (changes saved on {result.saved})" if result.saved else ""
            print(plain(f"{verb} {result.path}: {result.why}{saved}", one_line=True))
        if not results:
            print("no worktrees")
        return 0
    listing = await list_worktrees(store, office, settings)
    if args.json:
        print(plain_json(listing.model_dump(mode="json"), indent=2))
        return 0
    print(f"base branch: {listing.base_branch}")
    rows = [["ROLE", "JOB", "BRANCH", "DIRTY", "AHEAD", "AGE", "STATE", "PATH"]]
    for w in listing.worktrees:
        dirty = {None: "-", True: "yes", False: "no"}[w.dirty]
        state = w.state + (", in use" if w.in_use else "")
        job = (w.job_id or "-")[:8]
        ahead = "-" if w.ahead is None else str(w.ahead)
        rows.append(
            [
                w.role,
                job,
                w.branch or "(detached)",
                dirty,
                ahead,
                _age(w.age_seconds),
                state,
                w.path,
            ]
        )
    widths = [max(len(plain(r[i], one_line=True)) for r in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [plain(c, one_line=True).ljust(n) for c, n in zip(row, widths, strict=False)]
        print("  ".join([*cells, plain(row[-1], one_line=True)]))
    if listing.saved:
        print("saved leftovers:")
        for work in listing.saved:
            line = f"  {work.ref} {work.commit[:10]} ({_age(work.age_seconds)}): {work.subject}"
            print(plain(line, one_line=True))
    return 0
