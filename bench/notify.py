"""Notifications: what they cost the engine, and what a storm becomes.

    python bench/notify.py [--events 100000] [--storm 1000] [--repeat 5]

1. The engine's side: `EventBus.publish` of routing steps that notify nobody (the common case)
   with a Notifier subscribed (two webhook sinks) against the same bus without it (a
   console's subscription on both), and the time the notifier's task needs to read them all.
2. A storm: `--storm` questions published at once to a notifier with a webhook sink
   (max_messages 5, window 1 s) on a loopback server; the messages the server received, and
   how long publishing the storm took the engine.
3. A sink that never answers beside one that works: publish time, and the working sink's
   delivery, while the other's attempt is still pending.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from semo.engine.bus import EventBus
from semo.engine.events import RoutingStep
from semo.engine.notify.notifier import Notifier
from semo.engine.notify.settings import NotifySink
from tests.support.notify_servers import HttpReceiver


def step(ref: str, name: str = "result_created") -> RoutingStep:
    return RoutingStep(office_id="o", step=name, ref_id=ref, agent_id="a", detail="x" * 200)


def notifier(bus: EventBus, sinks: list[NotifySink]) -> Notifier:
    return Notifier(bus, sinks, office="bench", office_id="o", env={})


async def publish_cost(count: int, with_notifier: bool, url: str) -> tuple[float, float]:
    """(µs per publish, ms until the notifier read everything)."""
    bus = EventBus()
    console = bus.subscribe(maxsize=10 * count)  # a console's subscription, on both sides
    running = None
    if with_notifier:
        sinks = [NotifySink(sink="webhook", url=url), NotifySink(sink="webhook", url=url)]
        running = notifier(bus, sinks)
        running.start()
    events = [step(f"r{n}") for n in range(count)]
    started = time.perf_counter()
    for event in events:
        bus.publish(event)
    published = time.perf_counter()
    drained = published
    if running is not None:
        subscription = running._subscription
        assert subscription is not None
        while len(subscription):  # noqa: ASYNC110 (polling is what is measured)
            await asyncio.sleep(0)
        drained = time.perf_counter()
        await running.stop()
    console.close()
    return (published - started) / count * 1e6, (drained - published) * 1000


async def storm(count: int, url: str, hook: HttpReceiver) -> tuple[float, int, int]:
    """(ms to publish the storm, messages received, the summary's count)."""
    bus = EventBus()
    sink = NotifySink(sink="webhook", url=url, delay=0, max_messages=5, window=1.0)
    running = notifier(bus, [sink])
    running.start()
    before = len(hook.requests)
    events = [step(f"q{n}", "question_asked") for n in range(count)]
    started = time.perf_counter()
    for event in events:
        bus.publish(event)
    took = (time.perf_counter() - started) * 1000
    deadline = time.monotonic() + 10
    while not any(b.get("kind") == "summary" for b in hook.bodies()[before:]):
        if time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.5)  # a window more: nothing else comes
    await running.stop()
    got = hook.bodies()[before:]
    summary = next((b["count"] for b in got if b.get("kind") == "summary"), 0)
    return took, len(got), summary


async def hanging(url_ok: str, url_stuck: str, ok: HttpReceiver) -> tuple[float, float]:
    """(µs to publish a failed job, ms until the working sink has it) while the other hangs."""
    from semo.engine.events import JobEvent

    bus = EventBus()
    sinks = [
        NotifySink(sink="webhook", url=url_stuck, timeout=30, retries=0),
        NotifySink(sink="webhook", url=url_ok),
    ]
    running = notifier(bus, sinks)
    running.start()
    before = len(ok.requests)
    event = JobEvent(
        office_id="o", job_id="j", agent_id="a", step="failed", status="failed", detail="x"
    )
    started = time.perf_counter()
    bus.publish(event)
    took = (time.perf_counter() - started) * 1e6
    while len(ok.requests) == before:  # noqa: ASYNC110 (another thread appends)
        await asyncio.sleep(0.001)
    delivered = (time.perf_counter() - started) * 1000
    await running.stop(flush_timeout=0.1)
    return took, delivered


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--storm", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with HttpReceiver() as hook, HttpReceiver() as stuck:
        stuck.hang.set()
        base, notified, drain = [], [], []
        for _ in range(args.repeat):
            base.append((await publish_cost(args.events, False, hook.url))[0])
            cost, drained = await publish_cost(args.events, True, hook.url)
            notified.append(cost)
            drain.append(drained)
        print(f"publish, {args.events} routing steps that notify nobody, median of {args.repeat}")
        print(f"  bus + a console      {statistics.median(base):7.2f} µs per publish")
        print(f"  bus + notifier       {statistics.median(notified):7.2f} µs per publish")
        print(f"  notifier reads all   {statistics.median(drain):7.0f} ms after the last")
        took, messages, summary = await storm(args.storm, hook.url, hook)
        print(f"storm of {args.storm} questions: published in {took:.1f} ms")
        print(f"  the webhook got {messages} messages (the summary stands for {summary})")
        publish, delivered = await hanging(hook.url, stuck.url, hook)
        print(f"a sink that never answers beside a working one: publish {publish:.1f} µs")
        print(f"  the working sink had it after {delivered:.1f} ms")


if __name__ == "__main__":
    asyncio.run(main())
