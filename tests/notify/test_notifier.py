"""The notifier on a real event bus, delivering to loopback servers: waits, jobs, storms,
duplicates, failing and hanging sinks, secrets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from semo.engine.bus import EventBus
from semo.engine.events import (
    JobEvent,
    Notification,
    RoutingStep,
    SessionSignal,
    SessionStatusChanged,
)
from semo.engine.notify.models import Notice
from semo.engine.notify.notifier import Notifier
from semo.engine.notify.settings import NotifySink
from tests.support.notify_servers import SMTP_PASSWORD, HttpReceiver, SmtpReceiver, email_sink
from tests.support.waiting import eventually

OFFICE_ID = "office-1"
ROLES = {"agent-fe": "FE", "agent-be": "BE"}


def asked(ref: str, text: str = "which database?", agent: str = "agent-fe") -> RoutingStep:
    return RoutingStep(
        office_id=OFFICE_ID,
        step="question_asked",
        ref_id=ref,
        session_id="s-1",
        agent_id=agent,
        detail=text,
    )


def job(step: str, status: str, detail: str) -> JobEvent:
    return JobEvent(
        office_id=OFFICE_ID,
        job_id="job-7",
        agent_id="agent-be",
        step=step,  # type: ignore[arg-type]
        status=status,  # type: ignore[arg-type]
        attempts=1,
        detail=detail,
    )


@asynccontextmanager
async def notifier(
    sinks: list[NotifySink],
    still_waiting: Callable[[Notice], Any] | None = None,
    secrets: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> AsyncIterator[tuple[EventBus, Notifier]]:
    bus = EventBus()
    running = Notifier(
        bus,
        sinks,
        office="acme",
        office_id=OFFICE_ID,
        role_of=lambda agent_id: ROLES.get(agent_id or "", "?"),
        still_waiting=still_waiting,
        secrets=secrets,
        env=env or {},
    )
    running.start()
    try:
        yield bus, running
    finally:
        await running.stop()


def kinds(receiver: HttpReceiver) -> list[str]:
    return [body["kind"] for body in receiver.bodies()]


async def test_a_question_waiting_past_its_delay_reaches_webhook_ntfy_and_mail(
    tmp_path: Path,
) -> None:
    with HttpReceiver() as hook, HttpReceiver() as ntfy, SmtpReceiver(tmp_path) as smtp:
        sinks = [
            NotifySink(sink="webhook", url=hook.url, delay=0.2),
            NotifySink(sink="ntfy", url=f"{ntfy.url}/semo", delay=0.2),
            email_sink(smtp, delay=0.2),
        ]
        checked: list[str] = []

        async def still_waiting(notice: Notice) -> bool:
            checked.append(notice.ref)
            return True

        async with notifier(sinks, still_waiting, env={"SMTP_PASS": SMTP_PASSWORD}) as (bus, _):
            bus.publish(asked("q-1"))
            await eventually(lambda: hook.requests and ntfy.requests and smtp.messages)
        [body] = hook.bodies()
        assert body["kind"] == "question" and body["agent"] == "FE" and body["office"] == "acme"
        assert body["needed"] == "which database?"
        assert body["answer"].startswith("semo answer q-1 ")
        assert ntfy.requests[0].json["title"] == "semo acme: FE asks you"
        assert smtp.messages[0]["Subject"] == "semo acme: FE asks you"
        assert "semo answer q-1" in smtp.messages[0].get_content()
        assert checked == ["q-1"]  # the store is asked once per distinct delay


async def test_a_question_answered_in_time_or_no_longer_pending_is_not_sent() -> None:
    with HttpReceiver() as hook:
        sinks = [NotifySink(sink="webhook", url=hook.url, delay=0.2)]

        async def still_waiting(notice: Notice) -> bool:
            return notice.ref != "q-gone"  # the store says q-gone was answered elsewhere

        async with notifier(sinks, still_waiting) as (bus, _):
            bus.publish(asked("q-1"))
            bus.publish(RoutingStep(office_id=OFFICE_ID, step="question_answered", ref_id="q-1"))
            bus.publish(asked("q-gone"))
            await asyncio.sleep(0.5)  # past the delay: the timers have fired (or not)
            bus.publish(job("done", "done", "built the page"))
            await eventually(lambda: hook.requests)
        assert kinds(hook) == ["job_done"]


async def test_a_permission_request_waits_like_a_question() -> None:
    with HttpReceiver() as hook:
        async with notifier([NotifySink(sink="webhook", url=hook.url, delay=0)]) as (bus, _):
            bus.publish(
                RoutingStep(
                    office_id=OFFICE_ID,
                    step="permission_requested",
                    ref_id="p-1",
                    agent_id="agent-be",
                    detail="Bash: rm -rf build",
                )
            )
            await eventually(lambda: hook.requests)
        [body] = hook.bodies()
        assert body["kind"] == "permission" and body["agent"] == "BE"
        assert body["needed"] == "Bash: rm -rf build"


async def test_job_done_failed_and_review_reach_the_sinks(tmp_path: Path) -> None:
    with HttpReceiver() as hook, SmtpReceiver(tmp_path) as smtp:
        sinks = [
            NotifySink(sink="webhook", url=hook.url),
            email_sink(smtp, events=["job_failed"]),
        ]
        async with notifier(sinks, env={"SMTP_PASS": SMTP_PASSWORD}) as (bus, _):
            bus.publish(job("turn", "running", "a turn ended"))  # not a notification
            bus.publish(job("done", "done", "built the page"))
            bus.publish(job("failed", "failed", "tests failed: 3"))
            bus.publish(job("needs_review", "needs_review", "FE and BE changed app.py"))
            await eventually(lambda: len(hook.requests) == 3 and smtp.messages)
        done, failed, review = hook.bodies()
        assert review["kind"] == "job_review" and review["title"] == "a job of BE needs your review"
        assert done["kind"] == "job_done" and done["title"] == "a job of BE is done"
        assert failed["kind"] == "job_failed" and failed["needed"] == "tests failed: 3"
        assert failed["answer"] == "semo job show job-7"
        [mail] = smtp.messages  # this sink asked for failures only
        assert mail["Subject"] == "semo acme: a job of BE failed"


async def test_a_storm_of_100_questions_sends_a_bounded_summary() -> None:
    with HttpReceiver() as hook:
        sink = NotifySink(sink="webhook", url=hook.url, delay=0, max_messages=3, window=0.5)
        async with notifier([sink]) as (bus, running):
            for number in range(100):
                bus.publish(asked(f"q-{number}", f"question {number}"))
            await eventually(lambda: any(b["kind"] == "summary" for b in hook.bodies()))
            await asyncio.sleep(1.2)  # two more windows: nothing else is due
            bodies = hook.bodies()
            assert len(bodies) == 4  # three questions, then one summary for the 97 others
            summary = bodies[-1]
            assert summary["count"] == 97 and summary["needed"].startswith("97 questions wait")
            assert "FE 97" in summary["needed"]

            # the same question again is a duplicate; a new one goes (a slot is free again)
            bus.publish(asked("q-5"))
            bus.publish(asked("q-new"))
            await eventually(lambda: len(hook.requests) == 5)
            assert hook.bodies()[-1]["ref"] == "q-new"
            assert running.lanes[0].throttle.duplicates == 1


async def test_a_failing_sink_is_retried_and_a_hanging_one_delays_nobody() -> None:
    with HttpReceiver() as flaky, HttpReceiver() as stuck, HttpReceiver() as fine:
        flaky.fail_next = 2
        stuck.hang.set()
        sinks = [
            NotifySink(sink="webhook", url=flaky.url, backoff=0.05, retries=3),
            NotifySink(sink="webhook", url=stuck.url, timeout=30, retries=0),
            NotifySink(sink="webhook", url=fine.url),
        ]
        async with notifier(sinks) as (bus, running):
            bus.publish(job("failed", "failed", "boom"))
            await eventually(
                lambda: [lane.sent for lane in running.lanes] == [1, 0, 1] and stuck.attempts
            )
            assert flaky.attempts == 3  # two 500s, then delivered
            assert stuck.attempts == 1 and not stuck.requests  # still waiting for its answer
            assert running.lanes[1].failed == 0  # not given up: its attempt is still running


async def test_secrets_never_reach_a_notification() -> None:
    with HttpReceiver() as hook:
        sink = NotifySink(sink="webhook", url=hook.url, delay=0)
        async with notifier([sink], secrets=["postgres-pass-4242"]) as (bus, _):
            bus.publish(asked("q-1", "the db password is postgres-pass-4242, ok?"))
            await eventually(lambda: hook.requests)
        body = hook.requests[0].body.decode()
        assert "postgres-pass-4242" not in body and "the db password is ***, ok?" in body


async def test_the_console_sink_is_a_notification_event_on_the_bus() -> None:
    async with notifier([NotifySink(sink="console")]) as (bus, _):
        with bus.subscribe(kinds=["notification"]) as seen:
            bus.publish(asked("q-1", "ship it?\x1b]2;x\x07"))
            event = await seen.get(timeout=10)
    assert isinstance(event, Notification)
    assert event.notice_kind == "question" and event.ref == "q-1"
    assert event.headline == "semo acme: FE asks you"
    assert "ship it?]2;x" in event.body and "\x1b" not in event.body


async def test_agent_error_by_default_and_stale_only_when_asked_for() -> None:
    with HttpReceiver() as quiet, HttpReceiver() as everything:
        sinks = [
            NotifySink(sink="webhook", url=quiet.url),
            NotifySink(sink="webhook", url=everything.url, events=["agent_error", "agent_stale"]),
        ]
        async with notifier(sinks) as (bus, _):
            bus.publish(
                SessionSignal(
                    office_id=OFFICE_ID,
                    session_id="agent-be",  # role_of here maps it; the engine's knows sessions
                    signal_kind="stale",
                    pattern="no_output",
                    source="screen",
                    text="no output for 300 s",
                )
            )
            bus.publish(
                SessionStatusChanged(
                    office_id=OFFICE_ID,
                    session_id="s-9",
                    agent_id="agent-fe",
                    role="FE",
                    status="error",
                    previous="executing",
                    reason="API error: 529 overloaded",
                )
            )
            await eventually(lambda: len(everything.requests) == 2 and quiet.requests)
        assert kinds(quiet) == ["agent_error"]
        stale, error = everything.bodies()
        assert stale["kind"] == "agent_stale" and stale["title"] == "BE is silent while busy"
        assert error["title"] == "FE is in error" and error["needed"] == "API error: 529 overloaded"


async def test_what_was_published_before_stop_is_still_sent() -> None:
    with HttpReceiver() as hook:
        bus = EventBus()
        running = Notifier(
            bus,
            [NotifySink(sink="webhook", url=hook.url)],
            office="acme",
            office_id=OFFICE_ID,
            env={},
        )
        running.start()
        bus.publish(job("failed", "failed", "the engine stopped while running it"))
        await running.stop()  # at once: the event is still in the notifier's queue
        assert kinds(hook) == ["job_failed"]
