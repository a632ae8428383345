"""`semo supabase doctor [--config]`: check the configured Supabase project for semo.

See semo/engine/doctor/. Prints one line per check; exit 0 when none failed, 1 when one did, 2
for bad input (not a supabase store), 3 when the project is unreachable."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the store loads when the command runs, not for --help
    from semo.engine.store.base import Store

#: the Free plan's Realtime messages per second (docs/SUPABASE.md)
FREE_PLAN_BUDGET = 100


def add_supabase_commands(commands: Any, run: Any, add_config_option: Any) -> None:
    """Register `semo supabase doctor`; `run` and `add_config_option` are commands.options'."""
    supabase = commands.add_parser("supabase", help="check a Supabase project for semo")
    sub = supabase.add_subparsers(dest="supabase_command", metavar="SUBCOMMAND", required=True)
    doctor = sub.add_parser(
        "doctor",
        help="check the project: publication, RLS, policies, grants, channels, Max rows, budget",
        description=(
            "Check the Supabase project of the config's [store] (SUPABASE_URL and "
            "SUPABASE_SERVICE_ROLE_KEY) with the engine's access, one line per check. With "
            "--member EMAIL, that member signs in (SEMO_DOCTOR_PASSWORD, SUPABASE_ANON_KEY) and "
            "joins the office's private channel and another office's, which must be refused. "
            "Exit 1 when a check fails."
        ),
    )
    doctor.add_argument("--office", help="office name or id (default: as `semo command`)")
    doctor.add_argument("--member", metavar="EMAIL", help="a member of the office, to sign in")
    doctor.add_argument(
        "--messages-per-second",
        type=int,
        default=FREE_PLAN_BUDGET,
        help=f"the plan's Realtime budget (default {FREE_PLAN_BUDGET}, Free; Pro 500)",
    )
    add_config_option(doctor)

    async def handle(store: Store, args: argparse.Namespace) -> int:
        from semo.engine.commands.options import office_for
        from semo.engine.doctor.run import Options, doctor
        from semo.engine.plain_text import plain
        from semo.engine.store.supabase import SupabaseStore

        if not isinstance(store, SupabaseStore):
            raise ValueError(f"the doctor checks a supabase store (this one is {store.backend})")
        if args.messages_per_second < 1:
            raise ValueError("--messages-per-second must be at least 1")
        options = Options(office_for(args), args.member, args.messages_per_second)
        report = await doctor(store, options)
        for check in report:
            print(plain(check.line()))
        return 1 if any(c.ok is False for c in report) else 0

    doctor.set_defaults(handler=run(handle))
