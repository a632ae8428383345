"""Every attached console: a `Notification` on the engine's bus.

The control socket carries it to each console; the console writes it to its terminal as OSC 9
and OSC 777 (desktop notifications) with a bell (semo/console/desktop_notify.py)."""

from __future__ import annotations

from semo.engine.bus import EventBus
from semo.engine.events import Notification
from semo.engine.notify.models import Notice
from semo.engine.notify.settings import NotifySink
from semo.engine.notify.sinks.base import Sink, SinkError


class ConsoleSink(Sink):
    def __init__(self, settings: NotifySink, label: str, bus: EventBus | None) -> None:
        super().__init__(settings, label)
        self.bus = bus
        #: the office's id for the bus event (set by the notifier)
        self.office_id = ""

    async def send(self, notice: Notice) -> str:
        if self.bus is None:
            raise SinkError("no engine bus: consoles are reached through a running engine")
        self.bus.publish(
            Notification(
                office_id=self.office_id,
                notice_kind=notice.kind,
                headline=notice.headline,
                body=notice.line(),
                agent=notice.agent,
                ref=notice.ref,
            )
        )
        return f"to {self.bus.subscriber_count} subscriber(s) of the bus"

    def where(self) -> str:
        return "attached consoles"
