"""What an engine does on start about what an earlier run left behind.

An engine that died (SIGKILL, power loss) leaves `agent_sessions` rows that say a session is
alive and `agent_commands` rows it had claimed. On start the engine finds the runs that are
certainly dead: its own configured id (it cannot be running twice), or a default id
``<this host>-<pid>`` whose process no longer exists. Their sessions are marked terminated, their
in-flight commands fail with a reason, and commands whose lease expired (any engine's) go
back to pending or fail, as `Store.recover_expired` decides. Pending commands are simply picked
up by the dispatcher afterwards. Runs on other hosts, or still alive here, are left alone: their
leases expire if they are really gone.
"""

from __future__ import annotations

import logging
import os
import socket

from pydantic import BaseModel

from engine.store.base import Store, StoreConflict

log = logging.getLogger("semo.engine")


class ReconcileReport(BaseModel):
    dead_engines: list[str] = []
    sessions_ended: int = 0
    commands_failed: int = 0
    commands_recovered: int = 0

    def describe(self) -> str:
        if not (self.sessions_ended or self.commands_failed or self.commands_recovered):
            return "nothing left over from earlier runs"
        return (
            f"{self.sessions_ended} session(s) marked terminated, {self.commands_failed} "
            f"in-flight command(s) failed, {self.commands_recovered} expired lease(s) recovered"
            f" (dead engines: {', '.join(self.dead_engines) or 'none'})"
        )


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_dead_run(engine_id: str, me: str, host: str | None = None) -> bool:
    """Whether `engine_id` names an earlier run of this engine that is certainly not running."""
    if engine_id == me:
        return True
    prefix = f"{host or socket.gethostname()}-"
    if not engine_id.startswith(prefix):
        return False
    pid = engine_id[len(prefix) :]
    return pid.isdigit() and int(pid) != os.getpid() and not pid_alive(int(pid))


async def reconcile(store: Store, office_id: str, me: str) -> ReconcileReport:
    report = ReconcileReport()
    dead: set[str] = set()

    def dead_run(engine_id: str | None) -> bool:
        if not engine_id:
            return False
        if engine_id in dead:
            return True
        if is_dead_run(engine_id, me):
            dead.add(engine_id)
            return True
        return False

    for row in await store.list_sessions(office_id):
        if dead_run(row.engine_id):
            reason = f"engine {row.engine_id} stopped without ending it (found by {me} on start)"
            await store.set_session_status(row.session_id, "terminated", reason=reason)
            report.sessions_ended += 1
    for command in await store.list_commands(office_id, status="processing", limit=10_000):
        holder = command.claimed_by
        if holder and dead_run(holder):
            error = f"engine {holder} stopped while running this command (found by {me} on start)"
            try:
                await store.complete_command(command.id, holder, success=False, error=error)
            except StoreConflict:
                continue  # finished or recovered meanwhile
            report.commands_failed += 1
    report.commands_recovered = len(await store.recover_expired())
    report.dead_engines = sorted(dead)
    return report
