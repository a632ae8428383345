"""Routing between agents and people: ASK_USER, INVOKE and DELIVER_RESULT (seed 002).

How it works: docs/ROUTING.md, "The router".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from semo.engine.events import EventBus, RoutingStep
from semo.engine.office.operations import answer_question
from semo.engine.protocol.messages import MAX_PAYLOAD_BYTES, AskUser, DeliverResult, Done, Invoke
from semo.engine.protocol.observer import MalformedMessage, MessageFound
from semo.engine.protocol.state import AgentState, StateChange
from semo.engine.routing.budgets import AgentBudgets
from semo.engine.sessions.agent_session import AgentSession, SessionError, SessionEvent
from semo.engine.sessions.manager import SessionManager
from semo.engine.sessions.pool import PoolError, SessionPoolManager
from semo.engine.store.base import Store, StoreError, StoreUnavailable
from semo.engine.store.models import (
    Agent,
    AgentInvocation,
    AgentResult,
    JobWorkCancelled,
    UserQuestion,
)

if TYPE_CHECKING:
    from semo.engine.routing.approvals import Approvals

log = logging.getLogger("semo.routing")

#: How often answered questions and undelivered results are looked for without a wake-up.
SWEEP_SECONDS = 2.0


class RoutingError(Exception):
    """An operator action the router cannot do (unknown question, ended session...)."""


@dataclass
class _Work:
    session: AgentSession
    item: MessageFound | MalformedMessage
    #: the session's turn the message was printed in (`Router._turns` when it was found)
    turn: int = 0


class Router:
    def __init__(
        self,
        store: Store,
        manager: SessionManager,
        pool: SessionPoolManager | None,
        *,
        office_id: str,
        agents: Mapping[str, Agent],
        bus: EventBus | None = None,
        wait_for_change: Callable[[str, float], Awaitable[bool]] | None = None,
        reads_prompts: Callable[[Agent], bool] | None = None,
        budgets: AgentBudgets | None = None,
    ) -> None:
        self.store = store
        #: what each agent may make semo store and queue over time ([budgets])
        self.budgets = budgets or AgentBudgets()
        #: whether an agent reads what is typed as a prompt for a model (its profile): another
        #: agent's task or result is typed only into such an agent (a shell would run it)
        self._reads_prompts = reads_prompts or (lambda _agent: True)
        self._wait_for_change = wait_for_change or store.wait_for_change
        self.manager = manager
        self.pool = pool
        self.office_id = office_id
        self.agents = agents  # by role
        self.bus = bus
        self._inbox: asyncio.Queue[_Work] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._sessions_by_agent: dict[str, str] = {}  # agent id -> session id the router uses
        self._current: dict[str, str] = {}  # target agent id -> invocation id in progress
        self._waiting: dict[str, list[str]] = {}  # target agent id -> invocation ids queued
        self._callers: dict[str, str] = {}  # invocation id -> caller agent id
        self._answers_sent: set[str] = set()
        self._results_sending: set[str] = set()
        self._results_skipped: set[str] = set()  # pending rows this router cannot deliver
        self._warned: set[str] = set()  # rows whose failure was logged
        self._turns: dict[str, int] = {}  # session id -> turns begun (into executing)
        self._sent: dict[str, tuple[str, int]] = {}  # invocation id -> (session, its turn then)
        self._handling_turn = 0  # the turn of the message being handled
        self._sweep_lock = asyncio.Lock()
        self._confirming: set[asyncio.Task[None]] = set()
        #: the job a session runs (the JobRunner sets it): what that session causes, and what
        #: the agents it invokes cause, carries the job's id
        self.job_of_session: Callable[[str], str | None] = lambda _session_id: None
        #: (session, role, job id): before an invocation of a job is typed into a session, its
        #: worktree goes on the role's branch for the job (set by the JobRunner;
        #: semo/engine/jobwork)
        self.enter_job: Callable[[AgentSession, str, str], Awaitable[None]] | None = None
        #: sessions of a dead engine whose Claude Code conversation this engine resumed: old
        #: session id -> the session that resumed it (`resumed`); what was waiting for the old
        #: one (an answer, a result) is typed into the new one
        self._resumed: dict[str, str] = {}
        #: pending results and running invocations found by `resume` (from before the start):
        #: typed with a note that semo restarted
        self._from_before: set[str] = set()
        #: resumed conversations whose interrupted invocation is typed again: agent id -> what
        #: else the restart note says (questions asked again); one turn carries both
        self._restart_notes: dict[str, str] = {}
        #: decides permission requests; answered ones are handed to it (never typed)
        self.approvals: Approvals | None = None

    # -- life cycle ----------------------------------------------------------------------------

    def start(self) -> None:
        self.manager.add_listener(self._on_session_event)
        self._tasks = [
            asyncio.create_task(self._work(), name="router"),
            asyncio.create_task(self._sweep_loop(), name="router sweep"),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    def resumed(self, old_session_id: str, session_id: str) -> None:
        """Session `session_id` resumed the Claude Code conversation of `old_session_id` (a
        dead engine's): the answers to its questions and the results for the invocations it
        made are typed into the new session."""
        self._resumed[old_session_id] = session_id

    async def _open_invocations(self) -> tuple[list[AgentInvocation], set[str]]:
        """The office's pending and running invocations, and those of them with a result."""
        open_ = await self.store.list_invocations(self.office_id, statuses=("pending", "running"))
        results = await self.store.list_results(
            self.office_id, invocation_ids=[i.id for i in open_]
        )
        return open_, {r.invocation_id for r in results if r.invocation_id}

    async def interrupted_agents(self) -> set[str]:
        """Agents whose invocation was being worked on when the last engine stopped and that
        `resume` sends again, with a note that semo restarted."""
        open_, answered = await self._open_invocations()
        return {i.target_agent_id for i in open_ if i.status == "running" and i.id not in answered}

    def restart_note(self, agent_id: str, note: str) -> None:
        """`agent_id`'s conversation was resumed and gets its interrupted invocation again: the
        restart note goes in that one prompt (with `note`), not in a turn of its own."""
        self._restart_notes[agent_id] = note

    async def resume(self) -> None:
        """After a restart: re-send invocations that never delivered, deliver pending results
        (both with a note that semo restarted). A row that cannot be handled is marked or
        skipped with the reason (`_pump`, `_deliver_result`); only a store that cannot be
        reached makes this raise."""
        open_, answered = await self._open_invocations()
        self._from_before.update(i.id for i in open_ if i.status == "running")
        pending = await self.store.list_results(self.office_id, status="pending")
        self._from_before.update(r.id for r in pending)
        queued = set(self._current.values()).union(*self._waiting.values())
        for invocation in open_:
            self._callers[invocation.id] = invocation.caller_agent_id
            if invocation.id in answered:
                continue  # done, or its result exists: delivering it is the sweep's job
            if invocation.id in queued:
                continue
            self._waiting.setdefault(invocation.target_agent_id, []).append(invocation.id)
        for target in list(self._waiting):
            await self._guarded(f"resuming the invocations of agent {target}", self._pump(target))
        await self.sweep()

    # -- the operator's side -------------------------------------------------------------------

    async def answer(
        self, question_id: str, *, text: str | None = None, option: int | None = None
    ) -> UserQuestion:
        """Answer a pending question and type the answer into its session (console path)."""
        question = await answer_question(self.store, question_id, text=text, option=option)
        await self._deliver_answer(question)
        return question

    # -- input from sessions -------------------------------------------------------------------

    def _on_session_event(self, session: AgentSession, event: SessionEvent) -> None:
        sid = session.session_id
        if isinstance(event, StateChange):
            if event.state == AgentState.EXECUTING and event.previous != AgentState.EXECUTING:
                self._turns[sid] = self._turns.get(sid, 0) + 1  # a turn begins
        elif isinstance(event, MessageFound | MalformedMessage):
            refused = self.budgets.take(session.agent_id, "messages")
            if refused is not None:  # dropped at the door: no work, no memory
                self._over_budget(session, refused, "message")
                return
            self._inbox.put_nowait(_Work(session, event, self._turns.get(sid, 0)))

    async def _work(self) -> None:
        while True:
            work = await self._inbox.get()
            try:
                self._handling_turn = work.turn
                await self._handle(work.session, work.item)
            except StoreError as error:
                # e.g. a store that is away: the agent learns its message was not recorded
                self._step("store_refused", work.session, str(error))
                self._tell(
                    work.session,
                    f"[semo] Your message could not be recorded ({error}); send it again later.",
                )
            except Exception:
                log.exception("routing a message of session %s failed", work.session.session_id)

    async def _handle(self, session: AgentSession, item: MessageFound | MalformedMessage) -> None:
        if isinstance(item, MalformedMessage):
            self._step("malformed", session, item.error.for_agent())
            self._tell(session, item.error.for_agent())
            return
        message = item.message
        if isinstance(message, AskUser):
            await self._ask(session, message)
        elif isinstance(message, Invoke):
            await self._invoke(session, message)
        elif isinstance(message, DeliverResult):
            await self._result(
                session, message.recipient, message.summary, message.payload, message.invocation_id
            )
        elif isinstance(message, Done):
            invocation_id = self._answerable(session)
            invocation = await self._find_invocation(invocation_id) if invocation_id else None
            caller = self._agent(invocation.caller_agent_id) if invocation else None
            if invocation is not None and caller is not None:
                summary = message.text or "done"
                await self._result(session, caller.role, summary, summary, invocation.id)

    # -- ASK_USER ------------------------------------------------------------------------------

    async def _ask(self, session: AgentSession, message: AskUser) -> None:
        size = _text_size(message.question, *message.options)
        refused = self.budgets.take(session.agent_id, "questions", size)
        if refused is not None:
            self._over_budget(session, refused, "ASK_USER")
            return
        question = await self.store.create_question(
            UserQuestion(
                office_id=self.office_id,
                agent_id=session.agent_id,
                session_id=session.session_id,
                question_type=message.question_type,
                question=message.question,
                options=message.options,
            )
        )
        job = await self._job_for(session)
        self._step("question_asked", session, message.question, ref=question.id, job=job)

    async def _deliver_answer(self, question: UserQuestion) -> None:
        if question.id in self._answers_sent or question.answer is None:
            return
        if question.question_type == "permission":
            # never typed: the agent's hook waits for it (semo/engine/routing/approvals.py)
            self._answers_sent.add(question.id)
            if self.approvals is None or not self.approvals.answered(question):
                log.info("permission %s answered, but no request waits for it", question.id)
            return
        asked_in = question.session_id or ""
        resumed = self._resumed.get(asked_in)
        session = self.manager.sessions.get(resumed or asked_in)
        if session is None or session.ended:
            raise RoutingError(
                f"question {question.id} was answered, but its session {question.session_id} "
                "has ended on this engine"
            )
        self._answers_sent.add(question.id)
        if session.profile.reads_prompts:
            options = f" (options were: {', '.join(question.options)})" if question.options else ""
            waited = " (it was waiting for you when semo restarted)" if resumed else ""
            prompt = (
                f"[semo] Answer to your question {question.id}{waited}: {question.answer}{options}"
            )
        else:
            prompt = _answer_for_a_program(question)
        delivered = session.submit(prompt, kind="answer")
        task = asyncio.create_task(self._confirm_answer(question.id, delivered))
        self._confirming.add(task)
        task.add_done_callback(self._confirming.discard)
        job = await self._job_for(session)
        self._step("question_answered", session, question.answer, ref=question.id, job=job)

    async def _confirm_answer(self, question_id: str, delivered: asyncio.Future[Any]) -> None:
        """Once the agent took the answer, mark it delivered in the store: the sweep reads only
        undelivered answers, and an engine that restarts never types it again."""
        try:
            await delivered
        except SessionError as error:
            self._answers_sent.discard(question_id)
            log.warning("answer to question %s not delivered: %s", question_id, error)
            return
        try:
            await self.store.mark_answer_delivered(question_id)
        except StoreError as error:
            # typed; this engine remembers it, a restarted one would type it again
            log.warning(
                "answer to question %s typed but not recorded delivered: %s", question_id, error
            )

    # -- INVOKE --------------------------------------------------------------------------------

    async def _invoke(self, session: AgentSession, message: Invoke) -> None:
        caller = self._agent_by_id(session.agent_id)
        target = self._agent_by_role(message.target)
        if target is None:
            known = ", ".join(sorted(self.agents)) or "none"
            self._refuse(session, f"there is no agent {message.target} (known: {known})")
            return
        if target.id == caller.id:
            self._refuse(session, "an agent cannot invoke itself")
            return
        if not self._reads_prompts(target):
            self._refuse(session, _NOT_A_READER.format(role=target.role))
            return
        chain = self._wait_chain(target.id, caller.id)
        if chain is not None:
            names = " -> ".join(self._role_of(a) for a in [caller.id, *chain])
            self._refuse(session, f"that would wait on itself ({names})")
            return
        size = _text_size(message.task) + _size(message.context or "")
        refused = self.budgets.take(caller.id, "invocations", size)
        if refused is not None:
            self._over_budget(session, refused, "INVOKE")
            return
        invocation = await self.store.create_invocation(
            AgentInvocation(
                office_id=self.office_id,
                caller_agent_id=caller.id,
                caller_session_id=session.session_id,
                target_agent_id=target.id,
                task=message.task,
                context=message.context,
                job_id=await self._job_for(session),
            )
        )
        self._callers[invocation.id] = caller.id
        self._step(
            "invoked",
            session,
            f"{caller.role} -> {target.role}: {message.task}",
            ref=invocation.id,
            job=invocation.job_id,
        )
        self._waiting.setdefault(target.id, []).append(invocation.id)
        await self._pump(target.id)

    def _over_budget(self, session: AgentSession, reason: str, what: str) -> None:
        """A message over the agent's budget is dropped; once per window the bus gets an
        `over_budget` step (with how many were dropped) and the agent a note."""
        count = self.budgets.note_due(session.agent_id)
        if count is None:
            return
        role = self._role_of(session.agent_id)
        self._step("over_budget", session, f"{role}'s {what} refused: {reason} ({count} refused)")
        self._tell(
            session,
            f"[semo] Your {what} was refused: you are {reason}. What you send until the "
            "budget refills is dropped; send less, or wait.",
        )

    def _refuse(self, session: AgentSession, reason: str, what: str = "INVOKE") -> None:
        """Tell `session` (and the bus: `invoke_refused` / `result_refused`) why its message
        was not honoured."""
        self._step("invoke_refused" if what == "INVOKE" else "result_refused", session, reason)
        self._tell(session, f"[semo] Your {what} was refused: {reason}.")

    def _wait_chain(self, start: str, goal: str) -> list[str] | None:
        """The agents from `start` to `goal` along "waits on" edges (caller -> target of an
        invocation in progress or queued), if `goal` can be reached."""
        edges: dict[str, set[str]] = {}
        for target, invocation_id in self._current.items():
            caller = self._callers.get(invocation_id)
            if caller:
                edges.setdefault(caller, set()).add(target)
        for target, queued in self._waiting.items():
            for invocation_id in queued:
                caller = self._callers.get(invocation_id)
                if caller:
                    edges.setdefault(caller, set()).add(target)
        path = [start]
        seen = {start}

        def walk(node: str) -> bool:
            if node == goal:
                return True
            for nxt in edges.get(node, ()):
                if nxt not in seen:
                    seen.add(nxt)
                    path.append(nxt)
                    if walk(nxt):
                        return True
                    path.pop()
            return False

        return path if walk(start) else None

    async def _pump(self, target_id: str) -> None:
        """Send the target its next invocation if it is not working on one (one that cannot be
        sent is marked failed with the reason, and the next one is tried)."""
        while target_id not in self._current and self._waiting.get(target_id):
            await self._send_next(target_id)

    async def _send_next(self, target_id: str) -> None:
        invocation_id = self._waiting[target_id].pop(0)
        invocation = await self._find_invocation(invocation_id)
        if invocation is None:
            log.warning("invocation %s is no longer in the store; not sent", invocation_id)
            return
        target, caller = self._agent(target_id), self._agent(invocation.caller_agent_id)
        if target is None or caller is None:
            missing = target_id if target is None else invocation.caller_agent_id
            await self._fail_invocation(
                invocation, f"agent {missing} is not an agent of this office (any more)"
            )
            return
        if not self._reads_prompts(target):
            await self._fail_invocation(invocation, _NOT_A_READER.format(role=target.role))
            return
        try:
            session = await self._session_for(target)
        except (PoolError, SessionError) as error:
            await self._fail_invocation(invocation, str(error))
            self._tell_agent(caller.id, f"[semo] Your INVOKE of {target.role} failed: {error}.")
            return
        self._current[target_id] = invocation_id
        if invocation.job_id is not None and self.enter_job is not None:
            await self._guarded(
                f"entering job {invocation.job_id}",
                self.enter_job(session, target.role, invocation.job_id),
            )
        # running before the task is typed: the answer may come back at once
        await self.store.update_invocation(invocation_id, status="running")
        context = f" Context: {json.dumps(invocation.context)}" if invocation.context else ""
        again = ""
        if invocation_id in self._from_before:
            extra = self._restart_notes.pop(target_id, "")
            again = (
                "[semo] semo was restarted while this invocation was being worked on: check "
                f"what is already done before you continue it.{' ' + extra if extra else ''}\n"
            )
        prompt = (
            f"{again}"
            f"[semo] Invocation {invocation_id} from {caller.role}: {invocation.task}{context}\n"
            f"When it is finished, reply with a [DELIVER_RESULT:{caller.role}] block whose JSON "
            f'has "invocation_id": "{invocation_id}" and a "summary".'
        )
        self._sent[invocation_id] = (session.session_id, self._turns.get(session.session_id, 0))
        session.post(prompt)
        self._step(
            "invocation_sent", session, invocation.task, ref=invocation_id, job=invocation.job_id
        )

    def _answerable(self, session: AgentSession) -> str | None:
        """The invocation `session`'s agent works on, if the message being handled can be its
        answer: printed in a turn that began after the task was sent. A `[SEMO:DONE]` (or a
        result without `invocation_id`) printed in the turn that delivered the previous
        invocation's result is not taken for the next one, which the agent has not read."""
        current = self._current.get(session.agent_id)
        sent = self._sent.get(current or "")
        if current is None or sent is None:
            return current
        sent_to, sent_in = sent
        return current if session.session_id == sent_to and self._handling_turn > sent_in else None

    async def _fail_invocation(self, invocation: AgentInvocation, reason: str) -> None:
        log.warning("invocation %s failed: %s", invocation.id, reason)
        await self.store.update_invocation(invocation.id, status="failed", error=reason)
        self._step("invocation_failed", None, reason, ref=invocation.id, job=invocation.job_id)

    # -- DELIVER_RESULT ------------------------------------------------------------------------

    async def _result(
        self,
        session: AgentSession,
        recipient_role: str,
        summary: str,
        payload: dict[str, Any] | str,
        invocation_id: str | None,
    ) -> None:
        sender = self._agent_by_id(session.agent_id)
        recipient = self._agent_by_role(recipient_role)
        if recipient is None:
            known = ", ".join(sorted(self.agents)) or "none"
            self._refuse(session, f"no agent {recipient_role} (known: {known})", "DELIVER_RESULT")
            return
        if recipient.id == sender.id:
            self._refuse(session, "an agent cannot deliver a result to itself", "DELIVER_RESULT")
            return
        if not self._reads_prompts(recipient):
            reason = _NOT_A_READER.format(role=recipient.role)
            self._refuse(session, reason, "DELIVER_RESULT")
            return
        if _size(payload) > MAX_PAYLOAD_BYTES:
            reason = f"its payload is larger than {MAX_PAYLOAD_BYTES} bytes"
            self._refuse(session, reason, "DELIVER_RESULT")
            return
        current = self._answerable(session)
        if invocation_id is None and current is not None:
            invocation = await self._find_invocation(current)
            if invocation is not None and invocation.caller_agent_id == recipient.id:
                invocation_id = current
        if invocation_id is not None:
            invocation = await self._find_invocation(invocation_id)
            refused = self._foreign(invocation_id, invocation, sender, recipient)
            if refused is None and invocation is not None:
                refused = await self._not_open(invocation)
            if refused is not None:
                self._refuse(session, refused, "DELIVER_RESULT")
                return
        refused = self.budgets.take(sender.id, "results", _text_size(summary) + _size(payload))
        if refused is not None:
            self._over_budget(session, refused, "DELIVER_RESULT")
            return
        result = await self.store.create_result(
            AgentResult(
                office_id=self.office_id,
                invocation_id=invocation_id,
                sender_agent_id=sender.id,
                recipient_agent_id=recipient.id,
                summary=summary,
                payload=payload,
                job_id=await self._job_for(session),
            )
        )
        self._step("result_created", session, summary, ref=result.id, job=result.job_id)
        if invocation_id is not None and self._current.get(sender.id) == invocation_id:
            del self._current[sender.id]
            self._sent.pop(invocation_id, None)
            await self._pump(sender.id)
        await self._deliver_result(result)

    def _foreign(
        self,
        invocation_id: str,
        invocation: AgentInvocation | None,
        sender: Agent,
        recipient: Agent,
    ) -> str | None:
        """Why `sender` may not deliver a result of `invocation` to `recipient` (the store's
        facts: who was invoked, by whom), or None."""
        if invocation is None:
            return f"there is no invocation {invocation_id[:100]!r} in this office"
        if invocation.target_agent_id != sender.id:
            target = self._agent(invocation.target_agent_id)
            invoked = target.role if target else invocation.target_agent_id
            return (
                f"invocation {invocation_id} was sent to {invoked}, not to you: only the invoked "
                "agent delivers its result"
            )
        if invocation.caller_agent_id != recipient.id:
            caller = self._agent(invocation.caller_agent_id)
            name = caller.role if caller else invocation.caller_agent_id
            return f"invocation {invocation_id} came from {name}: deliver its result to {name}"
        return None

    async def _not_open(self, invocation: AgentInvocation) -> str | None:
        """Why `invocation` takes no result now (not sent yet, finished, answered), or None."""
        if invocation.status == "pending":
            return f"invocation {invocation.id} has not been sent to you yet"
        if invocation.status != "running":
            return f"invocation {invocation.id} is {invocation.status}: it takes no result"
        for result in await self.store.list_results(self.office_id, invocation_ids=[invocation.id]):
            return f"invocation {invocation.id} already has a result ({result.id})"
        return None

    async def _deliver_result(self, result: AgentResult) -> None:
        if result.id in self._results_sending or result.id in self._results_skipped:
            return
        recipient = self._agent(result.recipient_agent_id)
        reason = None
        if recipient is None:
            reason = f"its recipient {result.recipient_agent_id} is not an agent of this office"
        elif not self._reads_prompts(recipient):
            reason = _NOT_A_READER.format(role=recipient.role)
        if recipient is None or reason is not None:
            self._results_skipped.add(result.id)
            log.warning("result %s is not delivered: %s", result.id, reason)
            self._step("result_skipped", None, reason or "", ref=result.id)
            return
        sender = self._agent(result.sender_agent_id)
        sender_name = sender.role if sender else f"agent {result.sender_agent_id}"
        # a row stored by an older version or around the engine: its invocation is checked
        # again; one that does not check out is delivered as a plain message, the invocation
        # left alone
        invocation = None
        note = ""
        if result.invocation_id is not None:
            invocation = await self._find_invocation(result.invocation_id)
            reason = (
                "its sender is not an agent of this office"
                if sender is None
                else self._foreign(result.invocation_id, invocation, sender, recipient)
            )
            if reason is not None:
                invocation = None
                note = f" (not taken as the result of invocation {result.invocation_id}: {reason})"
                if result.id not in self._results_sending:
                    log.warning("result %s%s", result.id, note)
        try:
            session = await self._session_for(
                recipient, prefer=invocation.caller_session_id if invocation else None
            )
        except (PoolError, SessionError) as error:
            log.warning("result %s waits: no session for %s (%s)", result.id, recipient.role, error)
            return
        if session.queued >= self.budgets.config.queued_prompts:
            return  # stays pending in the store: the sweep types it once the queue drains
        self._results_sending.add(result.id)
        payload = result.payload if isinstance(result.payload, str) else json.dumps(result.payload)
        about = f" of invocation {invocation.id}" if invocation else ""
        if result.id in self._from_before:
            note += " (it was waiting for you when semo restarted)"
        prompt = f"[semo] Result{about} from {sender_name}{note}: {result.summary}\n{payload}"
        delivered = session.submit(prompt)
        task = asyncio.create_task(
            self._confirm_result(result, invocation.id if invocation else None, delivered, session)
        )
        self._confirming.add(task)
        task.add_done_callback(self._confirming.discard)

    async def _confirm_result(
        self,
        result: AgentResult,
        invocation_id: str | None,
        delivered: asyncio.Future[Any],
        session: AgentSession,
    ) -> None:
        try:
            await delivered
        except SessionError as error:
            self._results_sending.discard(result.id)
            log.warning("result %s not delivered: %s; it stays pending", result.id, error)
            return
        try:
            await self.store.mark_result_delivered(result.id)
            if invocation_id is not None:
                await self.store.update_invocation(invocation_id, status="delivered")
        except StoreError as error:
            self._results_sending.discard(result.id)
            log.warning("result %s was typed but not recorded delivered: %s", result.id, error)
            return
        self._step("result_delivered", session, result.summary, ref=result.id, job=result.job_id)

    # -- a job's work ----------------------------------------------------------------------------

    async def cancel_job_work(self, job_id: str, reason: str) -> JobWorkCancelled:
        """The job's attempt failed (or it ended): its open invocations and results are
        cancelled in the store, dropped here, and the agents working on them interrupted and
        told; the next queued invocation of each freed agent is sent."""
        cancelled = await self.store.cancel_job_work(job_id, reason)
        freed: set[str] = set()
        for invocation in cancelled.invocations:
            target = invocation.target_agent_id
            if invocation.id in self._waiting.get(target, []):
                self._waiting[target].remove(invocation.id)
            if self._current.get(target) == invocation.id:
                del self._current[target]
                freed.add(target)
                await self._stop_work(target, invocation.id, reason)
            self._step("invocation_cancelled", None, reason, ref=invocation.id, job=job_id)
        for result in cancelled.results:
            self._results_skipped.add(result.id)
            self._step("result_cancelled", None, reason, ref=result.id, job=job_id)
        for target in freed:
            await self._guarded(f"sending agent {target} its next invocation", self._pump(target))
        return cancelled

    async def settle(self, timeout: float = 5.0) -> None:
        """Wait (up to `timeout` seconds) until the results being typed now are recorded
        delivered: a job that ends right after its agent read a result keeps that result."""
        confirming = set(self._confirming)
        if confirming:
            await asyncio.wait(confirming, timeout=timeout)

    async def _stop_work(self, agent_id: str, invocation_id: str, reason: str) -> None:
        session = self.manager.sessions.get(self._sessions_by_agent.get(agent_id, ""))
        if session is None or session.ended:
            return
        if session.state == "executing":
            with contextlib.suppress(SessionError):
                await session.cancel()
        self._tell(
            session,
            f"[semo] Invocation {invocation_id} was cancelled ({reason}). Stop working on it "
            "and do not deliver a result for it.",
        )

    async def _job_for(self, session: AgentSession) -> str | None:
        """The job `session`'s messages belong to: the job it runs, else the job of the
        invocation its agent works on."""
        job = self.job_of_session(session.session_id)
        if job is not None:
            return job
        current = self._current.get(session.agent_id)
        invocation = await self._find_invocation(current) if current else None
        return invocation.job_id if invocation else None

    # -- sweeping the store --------------------------------------------------------------------

    async def _sweep_loop(self) -> None:
        while True:
            try:
                await self._wait_for_change(self.office_id, SWEEP_SECONDS)
                await self.sweep()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("routing sweep failed")
                await asyncio.sleep(SWEEP_SECONDS)

    async def sweep(self) -> None:
        """Answers written to the store by others, and results not yet delivered."""
        async with self._sweep_lock:
            # only the questions of this engine's sessions: the others are not delivered here
            mine = list(self.manager.sessions)
            mine += [old for old, new in self._resumed.items() if new in self.manager.sessions]
            # answered and not yet delivered (marked when the agent took it), page by page
            answered = await self.store.list_questions(
                self.office_id, status="answered", session_ids=mine, undelivered=True
            )
            for question in answered:
                if question.id in self._answers_sent:
                    continue
                asked_in = question.session_id or ""
                if self._resumed.get(asked_in, asked_in) in self.manager.sessions:
                    await self._guarded(
                        f"delivering the answer to question {question.id}",
                        self._deliver_answer(question),
                    )
            for result in await self.store.list_results(self.office_id, status="pending"):
                await self._guarded(f"delivering result {result.id}", self._deliver_result(result))

    async def _guarded(self, what: str, step: Awaitable[None]) -> None:
        """Run one row's step; a failure is logged and the row left, so that one bad row never
        stops the others, the sweep or an engine's start. An unreachable store is raised."""
        try:
            await step
        except StoreUnavailable:
            raise
        except RoutingError as error:
            log.debug("%s: %s", what, error)
        except Exception as error:
            if what not in self._warned:  # once per row and run: the sweep comes every 2 s
                self._warned.add(what)
                log.warning("%s failed: %s: %s", what, type(error).__name__, error)

    # -- helpers -------------------------------------------------------------------------------

    async def job_for(self, session: AgentSession) -> str | None:
        """The job whose work `session` does now (None: none)."""
        return await self._job_for(session)

    async def _session_for(self, agent: Agent, prefer: str | None = None) -> AgentSession:
        prefer = self._resumed.get(prefer or "", prefer)
        for session_id in (prefer, self._sessions_by_agent.get(agent.id)):
            session = self.manager.sessions.get(session_id or "")
            if session is not None and not session.ended:
                return session
        for session in self.manager.sessions.values():
            if session.agent_id == agent.id and not session.ended:
                self._sessions_by_agent[agent.id] = session.session_id
                return session
        if self.pool is None:
            raise SessionError(f"no session of {agent.role} and no pool to start one")
        pooled = await self.pool.acquire(agent_id=agent.id)
        self._sessions_by_agent[agent.id] = pooled.session_id
        return pooled.session

    async def _find_invocation(self, invocation_id: str) -> AgentInvocation | None:
        """The office's invocation `invocation_id`, or None (agents may name any id)."""
        for invocation in await self.store.list_invocations(self.office_id, ids=[invocation_id]):
            if invocation.id == invocation_id:
                self._callers[invocation.id] = invocation.caller_agent_id
                return invocation
        return None

    def _agent(self, agent_id: str) -> Agent | None:
        return next((a for a in self.agents.values() if a.id == agent_id), None)

    def _role_of(self, agent_id: str) -> str:
        agent = self._agent(agent_id)
        return agent.role if agent else agent_id

    def _agent_by_role(self, role: str) -> Agent | None:
        agent = self.agents.get(role)
        if agent is None:
            agent = next((a for r, a in self.agents.items() if r.lower() == role.lower()), None)
        return agent

    def _agent_by_id(self, agent_id: str) -> Agent:
        for agent in self.agents.values():
            if agent.id == agent_id:
                return agent
        raise RoutingError(f"no agent {agent_id} in this office")

    def _tell(self, session: AgentSession, text: str) -> None:
        """Feedback for the agent, typed only into one that reads prompts (the step event
        was published by the caller either way)."""
        if session.ended:
            return
        if not session.profile.reads_prompts:
            log.info("session %s does not read prompts; not typed: %s", session.session_id, text)
            return
        if session.queued >= self.budgets.config.queued_prompts:
            log.info("session %s has a full queue; not typed: %s", session.session_id, text[:200])
            return
        session.post(text)

    def _tell_agent(self, agent_id: str, text: str) -> None:
        session = self.manager.sessions.get(self._sessions_by_agent.get(agent_id, ""))
        if session is not None:
            self._tell(session, text)

    def _step(
        self,
        step: str,
        session: AgentSession | None,
        detail: str,
        *,
        ref: str | None = None,
        job: str | None = None,
    ) -> None:
        log.info("routing %s: %s (%s)", step, detail[:200], ref or "-")
        if self.bus is not None:
            self.bus.publish(
                RoutingStep(
                    office_id=self.office_id,
                    step=step,
                    ref_id=ref,
                    session_id=session.session_id if session else None,
                    agent_id=session.agent_id if session else None,
                    job_id=job,
                    detail=detail,
                )
            )


_NOT_A_READER = (
    "{role} does not read prompts (not a model: [[agents]] reads_prompts is off), so no other "
    "agent's text is typed into it"
)


def _text_size(*texts: str) -> int:
    """UTF-8 bytes of `texts` together."""
    return sum(len(text.encode("utf-8", "surrogatepass")) for text in texts)


def _size(payload: dict[str, Any] | str) -> int:
    """UTF-8 bytes of a payload (JSON written compactly: never more than the agent wrote)."""
    if not isinstance(payload, str):
        payload = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return len(payload.encode("utf-8", "surrogatepass"))


def _answer_for_a_program(question: UserQuestion) -> str:
    """What is typed into an agent that is not a model (a shell) to answer its question: only
    the operator's own answer, or the number of the option they picked. Never semo's wording,
    the question or the option texts: those are the agent's text (a repository file it printed)
    and a shell would run them (an option "b\\ntouch x #" ran `touch x` on any answer)."""
    answer = question.answer or ""
    if answer in question.options:
        return str(question.options.index(answer) + 1)
    return answer
