"""Approvals: an agent's permission request decided by a rule, the session, or a person.

How it works: docs/ROUTING.md, "Approvals".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from semo.engine.approval_policy import (
    ALLOW_SESSION,
    PERMISSION_OPTIONS,
    Answer,
    ApprovalsSection,
    PermissionRequest,
    parse_answer,
)
from semo.engine.events import EventBus, RoutingStep
from semo.engine.protocol.hooks import HookEvent
from semo.engine.protocol.observer import DIALOG_REASON, PaneDialog
from semo.engine.protocol.state import AgentState, StateChange
from semo.engine.sessions.agent_session import AgentSession
from semo.engine.sessions.manager import SessionManager
from semo.engine.store.base import Store, StoreConflict, StoreError
from semo.engine.store.models import UserQuestion

log = logging.getLogger("semo.approvals")

#: What Claude Code tells the model when the operator denied without a reason.
DENIED = "The operator denied this tool use."
#: Seconds a dialog on the screen waits for its hook request before it is read as one that
#: has none (the hook starts as the dialog is drawn; see _ask_screen).
SCREEN_GRACE = 1.5


class Approvals:
    """Decides the permission requests of the sessions of ``manager``."""

    def __init__(
        self,
        store: Store,
        manager: SessionManager,
        *,
        office_id: str,
        policy: ApprovalsSection,
        bus: EventBus | None = None,
        job_for: Callable[[AgentSession], Awaitable[str | None]] | None = None,
    ) -> None:
        self.store = store
        self.manager = manager
        self.office_id = office_id
        self.policy = policy
        self.bus = bus
        self._job_for = job_for
        self._waiting: dict[str, asyncio.Future[UserQuestion]] = {}  # question id -> answer
        self._granted: dict[str, set[tuple[str, str]]] = {}  # session -> allowed for it
        self._hooked: dict[str, float] = {}  # session -> when its latest hook request came
        self._hook_pending: dict[str, int] = {}  # session -> hook requests being decided
        self._screen_tasks: dict[str, asyncio.Task[None]] = {}  # session -> its screen dialog
        self._screen: dict[str, tuple[AgentSession, PaneDialog]] = {}  # question id -> dialog
        self._answering: set[asyncio.Task[None]] = set()
        #: session -> a decision made on auto mode's notice, for the "Do you want to proceed?"
        #: that follows it for the same command (request key, answer, timeline detail)
        self._carried: dict[str, tuple[tuple[str, str], Answer, str]] = {}
        #: told a session's grants each time they change (the engine records them with the
        #: session's conversation, so a resumed session keeps them: semo/engine/control/resume.py)
        self.on_grant: Callable[[str, list[tuple[str, str]]], None] | None = None
        #: seconds a dialog on the screen waits for its hook request before the screen is read
        self.screen_grace = SCREEN_GRACE

    def start(self) -> None:
        self.manager.hooks.decide = self.decide
        self.manager.add_listener(self._on_session_event)

    def _on_session_event(self, session: AgentSession, event: object) -> None:
        if not isinstance(event, StateChange):
            return
        sid = session.session_id
        if event.state == AgentState.TERMINATED:
            self._granted.pop(sid, None)  # its grants end with it
            self._carried.pop(sid, None)
        if event.source != "screen":
            return
        if event.state == AgentState.WAITING_INPUT and event.reason == DIALOG_REASON:
            self._watch_screen(session)
        elif event.previous == AgentState.WAITING_INPUT:
            task = self._screen_tasks.get(sid)
            if task is not None:
                task.cancel()  # answered in the pane, or the hook's answer closed it

    def grants(self, session_id: str) -> list[tuple[str, str]]:
        """What the operator allowed "for this session" in ``session_id`` (tool, input)."""
        return sorted(self._granted.get(session_id, ()))

    def restore(self, session_id: str, grants: Iterable[tuple[str, str]]) -> None:
        """Grants of an earlier session whose conversation ``session_id`` continues (resumed
        after an engine restart)."""
        kept = self._granted.setdefault(session_id, set())
        kept.update(grants)
        self._grants_changed(session_id)

    def _grants_changed(self, session_id: str) -> None:
        if self.on_grant is not None:
            self.on_grant(session_id, self.grants(session_id))

    def stop(self) -> None:
        if self.manager.hooks.decide == self.decide:
            self.manager.hooks.decide = None

    # -- the hook's side ---------------------------------------------------------------------

    async def decide(self, event: HookEvent) -> dict[str, Any] | None:
        """The hook's output for Claude Code, or None: its own dialog asks."""
        session = self.manager.sessions.get(event.session_key)
        if session is None or session.ended:
            return None
        sid = session.session_id
        self._hook_pending[sid] = self._hook_pending.get(sid, 0) + 1
        try:
            return await self._decide(session, event)
        finally:
            self._hooked[sid] = time.monotonic()
            self._hook_pending[sid] -= 1
            if not self._hook_pending[sid]:
                del self._hook_pending[sid]

    async def _decide(self, session: AgentSession, event: HookEvent) -> dict[str, Any] | None:
        """An earlier grant, a rule, or a person decides (see the module's docstring)."""
        self._hooked[session.session_id] = time.monotonic()
        screen = self._screen_tasks.get(session.session_id)
        if screen is not None:
            screen.cancel()  # the hook asks for this dialog: one inbox item, not two
        request = PermissionRequest.from_hook(event.payload)
        granted = self._granted.setdefault(session.session_id, set())
        if request.key() in granted:
            answer = Answer(decision="allow")
            await self._decided(session, f"allowed for this session earlier: {request.summary}")
        elif (rule := self.policy.match(request, session.role, session.cwd)) is not None:
            reason = rule.reason or f"Denied by the office's rule {rule.label()!r}."
            answer = Answer(decision=rule.decision, reason=reason)
            verb = "allowed" if rule.decision == "allow" else "denied"
            await self._decided(session, f"{verb} by rule {rule.label()!r}: {request.summary}")
        else:
            asked = await self._ask(session, request)
            if asked is None:
                return None
            answer = asked
            if answer.decision == "allow_session":
                granted.add(request.key())
                self._grants_changed(session.session_id)
        session.permission_decided()
        return session.adapter.permission_output(answer, DENIED)

    def _item(self, session: AgentSession, summary: str) -> UserQuestion:
        """The inbox item for a permission request (from the hook or read off the screen)."""
        return UserQuestion(
            office_id=self.office_id,
            agent_id=session.agent_id,
            session_id=session.session_id,
            question_type="permission",
            question=summary,
            options=list(PERMISSION_OPTIONS),
        )

    async def _ask(self, session: AgentSession, request: PermissionRequest) -> Answer | None:
        """A person's answer through the inbox; None when it cannot be asked or waited for."""
        try:
            question = await self.store.create_question(self._item(session, request.summary))
        except StoreError as error:
            log.warning(
                "permission request of session %s not stored (%s): Claude Code asks in its "
                "own dialog",
                session.session_id,
                error,
            )
            return None
        await self._step("permission_asked", session, request.summary, question.id)
        waiter: asyncio.Future[UserQuestion] = asyncio.get_running_loop().create_future()
        self._waiting[question.id] = waiter
        minutes = self.policy.deny_after_minutes
        answered: UserQuestion | None
        try:
            try:
                async with asyncio.timeout(minutes * 60 if minutes else None):
                    answered = await asyncio.shield(waiter)
            except TimeoutError:
                answered = await self._expire(question, minutes or 0)
        except asyncio.CancelledError:
            await self._withdraw(question)
            raise
        finally:
            self._waiting.pop(question.id, None)
        if answered is None:
            answer = Answer(
                decision="deny",
                reason=f"No one answered within {minutes:g} minutes (semo's [approvals] policy).",
            )
            who = f"denied: no one answered within {minutes:g} minutes"
        else:
            answer = parse_answer(answered.answer)
            who = f"{_verb(answer)} by a person"
            with contextlib.suppress(StoreError):
                await self.store.mark_answer_delivered(question.id)
        reason = f" ({answer.reason})" if answer.reason and answered is not None else ""
        await self._decided(session, f"{who}{reason}: {request.summary}", question.id)
        if answered is not None and answer.reason:  # the agent learns who said it
            answer = answer.model_copy(update={"reason": f"{DENIED[:-1]}: {answer.reason}"})
        return answer

    async def _expire(self, question: UserQuestion, minutes: float) -> UserQuestion | None:
        """No answer in time: the question is cancelled (None), unless it was answered just
        now (then that answer)."""
        reason = f"no one answered within {minutes:g} minutes: denied by the [approvals] policy"
        try:
            await self.store.cancel_question(question.id, reason)
            return None
        except StoreConflict:
            latest = await self.store.get_question(question.id)
            return latest if latest.status == "answered" else None

    async def _withdraw(self, question: UserQuestion) -> None:
        """The hook went away (Claude Code stopped waiting, the engine stops)."""
        with contextlib.suppress(StoreError):
            await self.store.cancel_question(
                question.id, "the agent stopped waiting for this permission"
            )

    # -- the operator's side -----------------------------------------------------------------

    def answered(self, question: UserQuestion) -> bool:
        """Hand an answered permission to the request waiting for it (False: none waits)."""
        if question.id in self._screen:
            session, dialog = self._screen.pop(question.id)
            watching = self._screen_tasks.get(session.session_id)
            if watching is not None:
                watching.cancel()  # its item is answered: a next dialog gets a watcher again
            self._spawn(self._answer_screen(session, dialog, question))
            return True
        waiter = self._waiting.get(question.id)
        if waiter is None or waiter.done():
            return False
        waiter.set_result(question)
        return True

    # -- dialogs read off the screen --------------------------------------------------------

    def _watch_screen(self, session: AgentSession) -> None:
        sid = session.session_id
        if sid in self._screen_tasks:
            return
        task = asyncio.create_task(self._ask_screen(session))
        self._screen_tasks[sid] = task
        task.add_done_callback(lambda _t: self._screen_tasks.pop(sid, None))

    async def _ask_screen(self, session: AgentSession) -> None:
        """A dialog without a hook request: the inbox item, from what the screen shows."""
        await asyncio.sleep(self.screen_grace)
        hooked = self._hooked.get(session.session_id, -math.inf)
        recent = time.monotonic() - hooked < self.screen_grace * 2
        if recent or session.session_id in self._hook_pending or session.ended:
            return  # the hook asks for it (the dialog shows while the hook waits)
        dialog = session.observer.reader.dialog(session.screen_rows())
        if dialog is None:
            return
        if await self._settle_screen(session, dialog):
            self._spawn(self._follow(session, dialog))
            return
        try:
            question = await self.store.create_question(self._item(session, dialog.summary))
        except StoreError as error:
            log.warning("dialog of session %s not stored: %s", session.session_id, error)
            return
        self._screen[question.id] = (session, dialog)
        await self._step("permission_asked", session, dialog.summary, question.id)
        try:
            await asyncio.Event().wait()  # until the dialog closes (cancelled then)
        except asyncio.CancelledError:
            if self._screen.pop(question.id, None) is not None:
                with contextlib.suppress(StoreError):
                    await self.store.cancel_question(
                        question.id, "answered in the agent's pane (or the dialog went away)"
                    )
            raise

    async def _settle_screen(self, session: AgentSession, dialog: PaneDialog) -> bool:
        """A dialog answered with no one asked (False: a person decides it): a decision
        carried from auto mode's notice, an earlier "allow for this session", or a rule, each
        on the command read off the screen."""
        request = dialog.request
        carried = None if dialog.leads_on else self._carried.pop(session.session_id, None)
        if request is None:
            return False
        if carried is not None and carried[0] == request.key():
            await self._press(session, dialog, carried[1], carried[2], record=False)
            return True
        if request.key() in self._granted.get(session.session_id, ()):
            answer = Answer(decision="allow")
            detail = f"allowed for this session earlier: {request.summary}"
        elif (rule := self.policy.match(request, session.role, session.cwd)) is not None:
            reason = rule.reason or f"Denied by the office's rule {rule.label()!r}."
            answer = Answer(decision=rule.decision, reason=reason)
            verb = "allowed" if rule.decision == "allow" else "denied"
            detail = f"{verb} by rule {rule.label()!r}: {request.summary}"
        else:
            return False
        await self._press(session, dialog, answer, detail)
        return True

    async def _press(
        self,
        session: AgentSession,
        dialog: PaneDialog,
        answer: Answer,
        detail: str,
        ref: str | None = None,
        *,
        record: bool = True,
    ) -> None:
        """Answer ``dialog`` with keys. Auto mode's notice only asks whether to stay in auto
        mode: Enter (each action is then asked), and the decision is carried to the "Do you
        want to proceed?" that follows for the same command; a deny is that dialog's "No,
        and tell Claude what to do differently" with the reason, so the model reads it as
        the tool's refusal (Escape, and the reason as the next prompt, where it has none)."""
        if answer.decision == "deny" and not answer.reason:
            answer = answer.model_copy(update={"reason": DENIED})
        if dialog.leads_on and dialog.request is not None:
            self._carried[session.session_id] = (dialog.request.key(), answer, detail)
            keys = dialog.keys(Answer(decision="allow"))
        else:
            keys = dialog.keys(answer)
        if record:
            await self._decided(session, detail, ref)
        if session.ended:
            return
        await session.send_keys(keys)
        if keys == "<Esc>" and answer.decision == "deny" and session.profile.reads_prompts:
            session.post(f"[semo] {answer.reason}")

    async def _answer_screen(
        self, session: AgentSession, dialog: PaneDialog, question: UserQuestion
    ) -> None:
        answer = parse_answer(question.answer)
        with contextlib.suppress(StoreError):
            await self.store.mark_answer_delivered(question.id)
        if session.ended:
            return
        reason = f" ({answer.reason})" if answer.reason else ""
        summary = dialog.request.summary if dialog.request is not None else dialog.summary
        detail = f"{_verb(answer)} by a person{reason}: {summary}"
        if answer.decision == "allow_session" and dialog.request is not None:
            self._granted.setdefault(session.session_id, set()).add(dialog.request.key())
            self._grants_changed(session.session_id)
        if answer.reason:  # the agent learns who said it
            answer = answer.model_copy(update={"reason": f"{DENIED[:-1]}: {answer.reason}"})
        await self._press(session, dialog, answer, detail, question.id)
        await self._follow(session, dialog)

    async def _follow(self, session: AgentSession, dialog: PaneDialog) -> None:
        """The next dialog may replace ``dialog`` in the same frame (auto mode's notice is
        followed by "Do you want to proceed?"): the observer sees no change then."""
        await asyncio.sleep(self.screen_grace)
        following = None if session.ended else session.observer.reader.dialog(session.screen_rows())
        if following is not None and following != dialog and session.state.value == "waiting_input":
            self._watch_screen(session)

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._answering.add(task)
        task.add_done_callback(self._answering.discard)

    # -- steps --------------------------------------------------------------------------------

    async def _decided(self, session: AgentSession, detail: str, ref: str | None = None) -> None:
        await self._step("permission_decided", session, detail, ref)

    async def _step(
        self, step: str, session: AgentSession, detail: str, ref: str | None = None
    ) -> None:
        job = await self._job_for(session) if self._job_for is not None else None
        log.info("approvals %s: %s (%s)", step, detail[:300], ref or "-")
        if self.bus is not None:
            self.bus.publish(
                RoutingStep(
                    office_id=self.office_id,
                    step=step,
                    ref_id=ref,
                    session_id=session.session_id,
                    agent_id=session.agent_id,
                    job_id=job,
                    detail=detail,
                )
            )


def _verb(answer: Answer) -> str:
    if answer.decision == "allow_session":
        return f"allowed ({ALLOW_SESSION})"
    return "allowed" if answer.decision == "allow" else "denied"
