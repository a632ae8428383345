"""The doctor's Realtime budget check: an office's most messages against the plan's budget.

What an office of this size may send at most, against the plan's message budget (Supabase
counts every message a channel sends and every delivery)."""

from __future__ import annotations

from semo.engine.doctor.checks import Check

#: Supabase's Realtime messages per second by plan (docs/SUPABASE.md)
PLAN_BUDGETS = {"free": 100, "pro": 500}
#: session_output broadcasts a busy session sends at most (semo/engine/events.py: 0.1 s coalescing)
OUTPUT_PER_SESSION = 10


def realtime_budget(sessions: int, engines: int, members: int, budget: int) -> Check:
    """Pass when every open session busy at once stays within `budget` messages a second:
    each broadcast counts once sent and once per receiver (the other engines and a dashboard
    per member)."""
    receivers = max(engines - 1, 0) + members
    worst = sessions * OUTPUT_PER_SESSION * (1 + receivers)
    shape = (
        f"{sessions} open sessions x {OUTPUT_PER_SESSION} broadcasts/s x (1 + {receivers}"
        f" receivers) = {worst} messages/s at most, budget {budget}/s"
    )
    if worst > budget:
        return Check(
            "realtime budget",
            False,
            f"{shape}: over it Realtime closes the channel ('Too many messages per second')."
            " Fix: fewer sessions or dashboards per office, or a plan with a larger budget"
            " (--messages-per-second)",
        )
    return Check("realtime budget", True, shape)
