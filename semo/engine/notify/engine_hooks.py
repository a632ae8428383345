"""The engine's side of notifications: a `Notifier` for its office.

It is fed with the engine's bus, its reconcile reports (dead engines) and its circuit
breakers.

Engine death is reported by whoever ends what the dead engine left: the store ends an
engine's sessions, commands and jobs once (one transaction, `Store.end_engine`), so exactly one
engine's reconcile report names it, at the next engine's start or in a running engine's
periodic pass; and that engine reports it only when no console attached to the dead engine
reported it first (`claim_report`, semo/engine/notify/death.py).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from semo.engine.control.paths import office_paths
from semo.engine.notify.death import claim_report
from semo.engine.notify.models import Notice
from semo.engine.notify.notifier import Notifier
from semo.engine.notify.secrets import config_secrets
from semo.engine.notify.sources import breaker_open, engine_died
from semo.engine.store.base import NotFound, StoreError

if TYPE_CHECKING:
    from semo.engine.bus import EventBus
    from semo.engine.config import SemoConfig
    from semo.engine.reconcile import ReconcileReport
    from semo.engine.sessions.breaker import BreakerTransition
    from semo.engine.sessions.manager import SessionManager
    from semo.engine.store.base import Store
    from semo.engine.store.models import Agent

log = logging.getLogger("semo.notify")


class NoticesEngine(Protocol):
    """What the notifier reads of its engine (engine.Engine has it; read-only)."""

    @property
    def config(self) -> SemoConfig: ...
    @property
    def engine_id(self) -> str: ...
    @property
    def office_id(self) -> str: ...
    @property
    def bus(self) -> EventBus: ...
    @property
    def store(self) -> Store: ...
    @property
    def agents(self) -> Mapping[str, Agent]: ...
    @property
    def manager(self) -> SessionManager | None: ...


class EngineNotices:
    """The notifier of one running engine (`Engine.notices`)."""

    def __init__(self, engine: NoticesEngine) -> None:
        self.engine = engine
        config = engine.config
        self.notifier = Notifier(
            engine.bus,
            config.notify_sinks(),
            office=config.office.name,
            office_id=engine.office_id,
            role_of=self.role_of,
            still_waiting=self.still_waiting,
            secrets=engine_secrets(engine),
        )

    def start(self) -> None:
        self.notifier.start()

    async def stop(self) -> None:
        await self.notifier.stop()

    def notify(self, notice: Notice) -> None:
        self.notifier.notify(notice)

    def role_of(self, agent_id: str | None) -> str:
        """The role of an agent id, or of a live session's id."""
        for role, agent in self.engine.agents.items():
            if agent.id == agent_id:
                return role
        manager = self.engine.manager
        session = manager.sessions.get(agent_id or "") if manager is not None else None
        return session.role if session is not None else "an agent"

    async def still_waiting(self, notice: Notice) -> bool:
        """Whether the question (or the permission request, kept as a question row) is still
        pending; a request the store does not know waits until a routing step ends it."""
        try:
            question = await self.engine.store.get_question(notice.ref)
        except NotFound:
            return notice.kind != "question"
        except StoreError as error:
            log.warning("notify: reading question %s failed (%s); notifying", notice.ref, error)
            return True
        return question.status == "pending"

    def engines_died(self, report: ReconcileReport, how: str) -> None:
        """One notice per dead engine of `report` (what was done about it), unless an
        attached console reported it already."""
        me = self.engine.engine_id
        config = self.engine.config
        paths = office_paths(config.office.name, config.store_config())
        for engine_id in report.dead_engines:
            if claim_report(paths, engine_id) is False:
                log.info("notify: engine %s's death was reported already", engine_id)
                continue
            who = "an earlier run of this engine" if engine_id == me else "an engine"
            self.notify(
                engine_died(
                    self.engine.config.office.name,
                    engine_id,
                    f"{who} stopped without ending its work ({how} by {me}): {report.describe()}",
                )
            )

    def breaker_changed(self, transition: BreakerTransition) -> None:
        if str(transition.new) != "open":
            return
        pool = self.engine.config.pool
        self.notify(
            breaker_open(
                self.engine.config.office.name,
                str(transition.key),
                transition.reason,
                pool.restart_cooldown,
            )
        )


def engine_secrets(engine: NoticesEngine) -> list[str]:
    """The engine's secrets that could end up in text: its store's, its API tokens."""
    return config_secrets(engine.config)
