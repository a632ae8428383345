"""`semo office members [list|add USER|remove USER] [--role operator|viewer]`.

Who may use the office from a dashboard (Supabase Auth users; semo/engine/store/members.py),
with the engine's own access (the service role's key, or the direct connection). Exit codes as
the other store commands: 0 done, 2 bad input (or not a postgres/supabase store), 3 the store
is unreachable; `remove` of a user who is not a member is 1.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from semo.engine.plain_text import plain
from semo.engine.store.literals import ROLES

if TYPE_CHECKING:  # the store loads when the command runs, not for --help
    from semo.engine.store.base import Store

COLUMNS = ["user_id", "email", "role", "created_at"]


def add_office_commands(commands: Any, run: Any, add_config_option: Any) -> None:
    """Register `semo office ...`; `run` and `add_config_option` come from commands.options."""
    office = commands.add_parser("office", help="the office's members (Supabase Auth users)")
    sub = office.add_subparsers(dest="office_command", metavar="SUBCOMMAND", required=True)
    members = sub.add_parser(
        "members",
        help="list, add or remove the office's operators and viewers",
        description=(
            "Members are Supabase Auth users (auth.users): operators read the office, insert "
            "commands, answer questions, create and cancel jobs; viewers read it. USER is a "
            "user id or an email. Needs the postgres or supabase store (the engine's access)."
        ),
    )
    members.add_argument(
        "action", nargs="?", default="list", choices=["list", "add", "remove"], help="default list"
    )
    members.add_argument("user", nargs="?", metavar="USER", help="user id or email (add, remove)")
    members.add_argument(
        "--role", choices=ROLES, default="operator", help="for add (default operator)"
    )
    members.add_argument("--office", help="office name or id (default: as `semo command`)")
    members.add_argument("--json", action="store_true")
    add_config_option(members)

    async def handle(store: Store, args: argparse.Namespace) -> int:
        from semo.engine.commands.options import office_for
        from semo.engine.commands.views import emit
        from semo.engine.office.operations import resolve_office
        from semo.engine.store.members import add_member, list_members, remove_member

        office_row = await resolve_office(store, office_for(args))
        if args.action == "list":
            if args.user:
                raise ValueError("list takes no USER")
            emit(await list_members(store, office_row.id), args.json, COLUMNS)
            return 0
        if not args.user:
            raise ValueError(f"{args.action} needs USER (a user id or an email)")
        if args.action == "add":
            emit(await add_member(store, office_row.id, args.user, args.role), args.json, COLUMNS)
            return 0
        if await remove_member(store, office_row.id, args.user):
            print(f"removed {plain(args.user)} from office {plain(office_row.name)}")
            return 0
        print(f"{plain(args.user)} is not a member of office {plain(office_row.name)}")
        return 1

    members.set_defaults(handler=run(handle))
