"""CommandDispatcher: runs an office's remote commands (`agent_commands` rows) on this engine.

    dispatcher = CommandDispatcher(
        store, manager, office_id=office.id, engine_id="engine-1", bus=bus,
        create_session=pool_create,        # the engine's: goes through the session pool
    )
    dispatcher.start()
    ...
    await dispatcher.stop(grace=10)

How it works: docs/STORE.md, "The command dispatcher, step by step".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from semo.engine.agents.base import AgentSetupError
from semo.engine.events import CommandClaimed, CommandFinished, EventBus
from semo.engine.sessions.agent_session import (
    AgentSession,
    DeliveryFailed,
    SessionError,
    TurnResult,
)
from semo.engine.sessions.manager import SessionManager, UnknownSession
from semo.engine.sessions.pool import PoolError
from semo.engine.sessions.worktrees import WorktreeError
from semo.engine.store.base import NotFound, Store, StoreConflict, StoreError
from semo.engine.store.models import (
    PAYLOADS,
    AgentCommand,
    CreateSessionPayload,
    GetOutputPayload,
    InvalidCommand,
    Payload,
    RunJobPayload,
    SendKeysPayload,
    SendPromptPayload,
    SendTextPayload,
    ShipJobPayload,
    validate_command,
)
from semo.engine.terminal.keys import KeySpecError, parse_keys
from semo.engine.terminal.pty_process import TerminalSpawnError

log = logging.getLogger("semo.routing")

#: the error of commands cancelled because the engine stops
STOPPING = "engine stopping"
#: send_prompt's own timeout is the limit; this much more guards the whole command
PROMPT_GUARD_SECONDS = 1.0

CreateSession = Callable[[CreateSessionPayload], Awaitable[AgentSession]]
RunJob = Callable[[RunJobPayload], Awaitable[dict[str, Any]]]
ShipJob = Callable[[ShipJobPayload], Awaitable[dict[str, Any]]]
Handler = Callable[[AgentCommand, Any], Awaitable[dict[str, Any]]]


class CommandFailed(Exception):
    """A command that cannot be done, with a message for the operator (no traceback logged).
    Handlers raise it, and so may the engine's `create_session` and `run_job`."""


#: failures whose message is for the operator: the command fails with it, no traceback
EXPECTED_ERRORS: tuple[type[BaseException], ...] = (
    CommandFailed,
    InvalidCommand,
    UnknownSession,
    SessionError,
    KeySpecError,
    StoreError,
    AgentSetupError,
    WorktreeError,
    TerminalSpawnError,
    PoolError,
    OSError,
)
#: what the engine's create_session / run_job raise for a request they cannot serve (an
#: unknown role, a full pool...)
CALLBACK_ERRORS: tuple[type[BaseException], ...] = (*EXPECTED_ERRORS, ValueError, LookupError)


@dataclass
class TypeStats:
    claimed: int = 0
    completed: int = 0
    failed: int = 0


@dataclass
class DispatcherStats:
    """Counters for status displays. `completed` / `failed` count outcomes; `unrecorded` the
    results the store would not take (the lease's expiry settles those commands)."""

    claimed: int = 0
    completed: int = 0
    failed: int = 0
    unrecorded: int = 0
    by_type: dict[str, TypeStats] = field(default_factory=dict)

    def of(self, command_type: str) -> TypeStats:
        return self.by_type.setdefault(command_type, TypeStats())

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Outcome:
    success: bool
    result: dict[str, Any] | None = None
    error: str | None = None


@dataclass(eq=False)
class _InFlight:
    command: AgentCommand
    started: float
    task: asyncio.Task[None] | None = None
    #: the handler is done and the result is being written: stop() does not cancel it
    completing: bool = False


def _message(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    if isinstance(error, InvalidCommand):
        return f"rejected: {text}"
    if isinstance(error, DeliveryFailed):
        return f"delivery failed: {text}"
    if isinstance(error, KeySpecError):
        return f"bad key spec: {text}"
    return text


class CommandDispatcher:
    #: pauses between attempts to write a result the store refused (StoreError)
    complete_backoff: tuple[float, ...] = (0.1, 0.5, 1.0, 2.0)
    #: how long stop() waits for cancelled commands to write their "engine stopping" result
    finish_timeout: float = 30.0

    def __init__(
        self,
        store: Store,
        manager: SessionManager,
        *,
        office_id: str,
        engine_id: str,
        bus: EventBus | None,
        create_session: CreateSession,
        run_job: RunJob | None = None,
        ship_job: ShipJob | None = None,
        command_timeout: float = 30.0,
        lease_seconds: float = 30.0,
        max_concurrent: int = 8,
        max_jobs: int | None = None,
        poll_interval: float = 5.0,
        job_timeout: float | None = None,
        wait_for_change: Callable[[str, float], Awaitable[bool]] | None = None,
    ) -> None:
        if not command_timeout > 0:
            raise ValueError(f"command_timeout must be positive, not {command_timeout!r}")
        if not lease_seconds > 0:
            raise ValueError(f"lease_seconds must be positive, not {lease_seconds!r}")
        if max_concurrent < 1:
            raise ValueError(f"max_concurrent must be at least 1, not {max_concurrent!r}")
        if max_jobs is not None and max_jobs < 1:
            raise ValueError(f"max_jobs must be at least 1 or None, not {max_jobs!r}")
        if not poll_interval > 0:
            raise ValueError(f"poll_interval must be positive, not {poll_interval!r}")
        if job_timeout is not None and not job_timeout > 0:
            raise ValueError(f"job_timeout must be positive or None, not {job_timeout!r}")
        self.store = store
        #: whose wake-ups to wait on (a ChangeCursor when several loops share the store)
        self._wait_for_change = wait_for_change or store.wait_for_change
        self.manager = manager
        self.office_id = office_id
        self.engine_id = engine_id
        self.bus = bus
        self.create_session = create_session
        self.run_job = run_job
        #: ships a job's work (semo/engine/ship via the engine); None: not on this engine
        self.ship_job = ship_job
        self.command_timeout = command_timeout
        self.lease_seconds = lease_seconds
        #: commands other than run_job at once
        self.max_concurrent = max_concurrent
        #: run_job commands at once, a budget of their own: jobs run long (and wait for a free
        #: session of the pool), so they never hold the slots that cancel, terminate and the
        #: other commands need (those free the sessions the jobs wait for)
        self.max_jobs = max_concurrent if max_jobs is None else max_jobs
        self.poll_interval = poll_interval
        #: run_job's limit (None: none; a job runs as long as its runner says)
        self.job_timeout = job_timeout
        self.stats = DispatcherStats()
        self._handlers: dict[str, Handler] = {
            "create_session": self._create_session,
            "send_prompt": self._send_prompt,
            "send_text": self._send_text,
            "send_keys": self._send_keys,
            "get_output": self._get_output,
            "cancel": self._cancel,
            "terminate": self._terminate,
            "run_job": self._run_job,
            "ship_job": self._ship_job,
        }
        self._in_flight: set[_InFlight] = set()
        self._input_locks: dict[str, asyncio.Lock] = {}
        self._claimer: asyncio.Task[None] | None = None
        self._renewer: asyncio.Task[None] | None = None
        self._stopping = False
        self._stop_event = asyncio.Event()
        self._slot_free = asyncio.Event()

    # -- life cycle ----------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._claimer is not None and not self._claimer.done()

    @property
    def in_flight(self) -> int:
        """Commands claimed and not yet completed."""
        return len(self._in_flight)

    def start(self) -> None:
        """Start claiming (needs a running loop); a no-op when already running."""
        if self.running:
            return
        self._stopping = False
        self._stop_event = asyncio.Event()
        self._slot_free = asyncio.Event()
        loop = asyncio.get_running_loop()
        self._claimer = loop.create_task(self._claim_loop(), name=f"semo-dispatch {self.office_id}")
        if self._renewer is None or self._renewer.done():
            self._renewer = loop.create_task(self._renew_loop(), name="semo-lease-renewal")
        log.info(
            "dispatcher for office %s started (engine %s, at most %d commands at once)",
            self.office_id,
            self.engine_id,
            self.max_concurrent,
        )

    async def stop(self, grace: float = 10.0) -> None:
        """Stop claiming; let running commands finish for `grace` seconds, then cancel them
        (each is completed failed, "engine stopping"); then stop renewing leases."""
        self._stopping = True
        self._stop_event.set()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, grace)
        claimer, self._claimer = self._claimer, None
        if claimer is not None:
            # the loop leaves at its next step; only a store call that hangs keeps it
            await asyncio.wait({claimer}, timeout=max(1.0, deadline - loop.time()))
            if not claimer.done():
                log.warning("dispatcher: a claim did not return; its command is left to its lease")
                await _cancel_and_wait(claimer)
        entries = set(self._in_flight)
        if entries:
            await asyncio.wait(_tasks(entries), timeout=max(0.0, deadline - loop.time()))
            cancelled = [e for e in self._in_flight if not e.completing]
            for entry in cancelled:
                assert entry.task is not None
                entry.task.cancel()
            if cancelled:
                log.info("dispatcher: %d command(s) cancelled: %s", len(cancelled), STOPPING)
            rest = _tasks(self._in_flight)
            if rest:
                _, pending = await asyncio.wait(rest, timeout=self.finish_timeout)
                for task in pending:
                    log.error(
                        "dispatcher: %s did not finish; its command is left to its lease",
                        task.get_name(),
                    )
                    await _cancel_and_wait(task)
        renewer, self._renewer = self._renewer, None
        if renewer is not None:
            await _cancel_and_wait(renewer)
        log.info("dispatcher for office %s stopped", self.office_id)

    async def __aenter__(self) -> CommandDispatcher:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- claiming ------------------------------------------------------------------------------

    async def _claim_loop(self) -> None:
        failures = 0
        while not self._stopping:
            try:
                await self._claim_available()
                failures = 0
            except StoreError as error:
                failures += 1
                delay = self._backoff(failures)
                log.warning(
                    "dispatcher: claiming commands of office %s failed (%s); again in %.1f s",
                    self.office_id,
                    error,
                    delay,
                )
                await self._pause(delay)
                continue
            except Exception:
                failures += 1
                log.exception("dispatcher: claim loop error (continuing)")
                await self._pause(self._backoff(failures))
                continue
            if self._stopping:
                break
            if self._skip_types() is None:  # both budgets full
                self._slot_free.clear()
                await self._until(self._slot_free.wait())
                continue
            try:
                await self._until(self._wait_for_change(self.office_id, self.poll_interval))
            except StoreError as error:
                # cannot listen: fall back to polling (claims still work, or fail above)
                failures += 1
                delay = self._backoff(failures)
                log.warning(
                    "dispatcher: waiting for changes of office %s failed (%s); polling in %.1f s",
                    self.office_id,
                    error,
                    delay,
                )
                await self._pause(delay)

    async def _claim_available(self) -> None:
        while not self._stopping and (skip := self._skip_types()) is not None:
            command = await self.store.claim_next_command(
                self.office_id, self.engine_id, self.lease_seconds, skip_types=skip
            )
            if command is None:
                return
            self._launch(command)

    def _skip_types(self) -> tuple[str, ...] | None:
        """The command types not to claim now because their budget is full (run_job's, or the
        others'); None when both are full."""
        jobs = sum(entry.command.command_type == "run_job" for entry in self._in_flight)
        jobs_full = jobs >= self.max_jobs
        others_full = len(self._in_flight) - jobs >= self.max_concurrent
        if jobs_full and others_full:
            return None
        if jobs_full:
            return ("run_job",)
        if others_full:
            return tuple(kind for kind in PAYLOADS if kind != "run_job")
        return ()

    def _backoff(self, failures: int) -> float:
        return min(self.poll_interval, 0.1 * 2 ** min(failures, 8), 5.0)

    async def _until(self, awaitable: Awaitable[Any]) -> None:
        """Await `awaitable` unless stop() comes first (then it is cancelled)."""
        work = asyncio.ensure_future(awaitable)
        stop = asyncio.ensure_future(self._stop_event.wait())
        try:
            await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for future in (work, stop):
                if not future.done():
                    await _cancel_and_wait(future)
        if work.done() and not work.cancelled():
            work.result()  # raises the wait's error

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop_event.wait(), seconds)

    def _launch(self, command: AgentCommand) -> None:
        self.stats.claimed += 1
        self.stats.of(command.command_type).claimed += 1
        entry = _InFlight(command, time.monotonic())
        self._in_flight.add(entry)
        log.info(
            "command %s (%s%s) claimed",
            command.id,
            command.command_type,
            f", session {command.session_id}" if command.session_id else "",
        )
        self._publish(
            CommandClaimed(
                office_id=command.office_id,
                command_id=command.id,
                command_type=command.command_type,
                session_id=command.session_id,
            )
        )
        entry.task = asyncio.get_running_loop().create_task(
            self._run(entry), name=f"semo-command {command.command_type} {command.id}"
        )

    # -- leases --------------------------------------------------------------------------------

    async def _renew_loop(self) -> None:
        interval = self.lease_seconds / 3
        while True:
            await asyncio.sleep(interval)
            if not self._in_flight:
                continue
            try:
                held = [entry.command.id for entry in self._in_flight]
                await self.store.renew_leases(self.engine_id, self.lease_seconds, held)
            except StoreError as error:
                log.warning("dispatcher: renewing leases of %s failed: %s", self.engine_id, error)
            except Exception:
                log.exception("dispatcher: renewing the leases of %s failed", self.engine_id)

    # -- running one command -------------------------------------------------------------------

    async def _run(self, entry: _InFlight) -> None:
        command = entry.command
        try:
            try:
                outcome = await self._execute(command)
            except asyncio.CancelledError:
                # stop() gave up on it (or the loop is shutting down): it still gets its result
                outcome = _Outcome(False, error=STOPPING)
            entry.completing = True
            await self._complete(command, outcome, time.monotonic() - entry.started)
        finally:
            self._in_flight.discard(entry)
            self._slot_free.set()

    async def _execute(self, command: AgentCommand) -> _Outcome:
        """The command's outcome; never raises (except CancelledError)."""
        kind = command.command_type
        limit: float | None = None
        try:
            payload = self._payload(command)
            handler = self._handlers.get(kind)
            if handler is None:
                raise CommandFailed(f"this engine cannot run {kind} commands")
            limit, guard = self._limits(kind, payload)
            async with asyncio.timeout(guard):
                result = await handler(command, payload)
            return _Outcome(True, result=result)
        except TimeoutError:
            after = f" after {limit:g} s" if limit is not None else ""
            return _Outcome(False, error=f"{kind} timed out{after}")
        except EXPECTED_ERRORS as error:
            return _Outcome(False, error=_message(error))
        except Exception as error:
            log.exception("command %s (%s) failed unexpectedly", command.id, kind)
            return _Outcome(False, error=f"internal error: {type(error).__name__}: {error}")

    @staticmethod
    def _payload(command: AgentCommand) -> Payload:
        """The payload as its model (InvalidCommand when a row written around the store's
        validation is bad)."""
        if not isinstance(command.payload, dict):
            raise InvalidCommand(
                f"the payload must be a JSON object, not {type(command.payload).__name__}"
            )
        validate_command(command.command_type, command.payload, command.session_id)
        return PAYLOADS[command.command_type].model_validate(command.payload)

    def _limits(self, kind: str, payload: Payload) -> tuple[float | None, float | None]:
        """(the limit an error names, the limit enforced)."""
        if isinstance(payload, SendPromptPayload):
            return payload.timeout, payload.timeout + PROMPT_GUARD_SECONDS
        if kind == "run_job":
            return self.job_timeout, self.job_timeout
        return self.command_timeout, self.command_timeout

    async def _complete(self, command: AgentCommand, outcome: _Outcome, took: float) -> None:
        recorded = await self._write_result(command, outcome)
        type_stats = self.stats.of(command.command_type)
        if outcome.success:
            self.stats.completed += 1
            type_stats.completed += 1
            log.info("command %s (%s) completed in %.2f s", command.id, command.command_type, took)
        else:
            self.stats.failed += 1
            type_stats.failed += 1
            log.info(
                "command %s (%s) failed in %.2f s: %s",
                command.id,
                command.command_type,
                took,
                outcome.error,
            )
        if not recorded:
            self.stats.unrecorded += 1
        self._publish(
            CommandFinished(
                office_id=command.office_id,
                command_id=command.id,
                command_type=command.command_type,
                success=outcome.success,
                error=outcome.error,
                result=outcome.result,
            )
        )

    async def _write_result(self, command: AgentCommand, outcome: _Outcome) -> bool:
        """complete_command, retried on StoreError; whether the store has our result."""
        attempts = len(self.complete_backoff) + 1
        for attempt in range(attempts):
            try:
                await self.store.complete_command(
                    command.id,
                    self.engine_id,
                    success=outcome.success,
                    result=outcome.result,
                    error=outcome.error,
                )
                return True
            except StoreConflict as error:
                if attempt > 0 and await self._already_written(command, outcome):
                    return True  # an attempt that "failed" had landed
                log.warning("command %s: result not recorded: %s", command.id, error)
                return False
            except NotFound as error:
                log.warning("command %s: result not recorded: %s", command.id, error)
                return False
            except StoreError as error:
                if attempt + 1 >= attempts:
                    log.error(
                        "command %s: result not recorded after %d attempts (%s); it is left "
                        "to its lease's expiry (recover_expired)",
                        command.id,
                        attempts,
                        error,
                    )
                    return False
                delay = self.complete_backoff[attempt]
                log.warning(
                    "command %s: writing the result failed (%s); again in %.1f s",
                    command.id,
                    error,
                    delay,
                )
                await asyncio.sleep(delay)
            except Exception as error:
                if outcome.result is None:
                    log.exception("command %s: result not recorded", command.id)
                    return False
                # e.g. a result the store cannot encode: record the failure instead
                log.exception("command %s: the result could not be recorded", command.id)
                outcome.success, outcome.result = False, None
                outcome.error = (
                    f"internal error: the result could not be recorded "
                    f"({type(error).__name__}: {error})"
                )
        return False

    async def _already_written(self, command: AgentCommand, outcome: _Outcome) -> bool:
        try:
            existing = await self.store.get_result(command.id)
        except StoreError:
            return False
        return (
            existing is not None
            and existing.success == outcome.success
            and existing.error == outcome.error
        )

    def _publish(self, event: CommandClaimed | CommandFinished) -> None:
        if self.bus is not None:
            self.bus.publish(event)

    # -- handlers ------------------------------------------------------------------------------

    async def _create_session(
        self, command: AgentCommand, payload: CreateSessionPayload
    ) -> dict[str, Any]:
        try:
            session = await self.create_session(payload)
        except CommandFailed:
            raise
        except CALLBACK_ERRORS as error:
            raise CommandFailed(f"could not create the session: {_message(error)}") from error
        return {"session_id": session.session_id, "role": session.role, "state": str(session.state)}

    async def _send_prompt(
        self, command: AgentCommand, payload: SendPromptPayload
    ) -> dict[str, Any]:
        outcome = await self.manager.execute(
            _session_id(command), payload.prompt, wait=payload.wait, timeout=payload.timeout
        )
        if isinstance(outcome, TurnResult):
            return {
                "state": str(outcome.state),
                "text": outcome.text,
                "messages": [message.kind for message in outcome.messages],
            }
        return {"delivered": True, "waited_s": round(outcome.waited, 3)}

    async def _send_text(self, command: AgentCommand, payload: SendTextPayload) -> dict[str, Any]:
        session_id = _session_id(command)
        async with self._input_lock(session_id):
            self.manager.send_text(session_id, payload.text)
        return {"chars": len(payload.text)}

    async def _send_keys(self, command: AgentCommand, payload: SendKeysPayload) -> dict[str, Any]:
        session_id = _session_id(command)
        parse_keys(payload.keys)  # a bad spec fails now, not after the keys queued before it
        async with self._input_lock(session_id):
            await self.manager.send_keys(session_id, payload.keys)
        return {"keys": payload.keys}

    async def _get_output(self, command: AgentCommand, payload: GetOutputPayload) -> dict[str, Any]:
        output = self.manager.get_output(_session_id(command), payload.lines)
        return {
            "lines": output.lines,
            "cols": output.cols,
            "rows": output.rows,
            "cursor": list(output.cursor),
            "state": str(output.state),
        }

    async def _cancel(self, command: AgentCommand, payload: Payload) -> dict[str, Any]:
        session_id = _session_id(command)
        async with self._input_lock(session_id):
            await self.manager.cancel(session_id, by_operator=True)  # a person's command
        return {"cancelled": True}

    async def _terminate(self, command: AgentCommand, payload: Payload) -> dict[str, Any]:
        session_id = _session_id(command)
        await self.manager.terminate(session_id, reason=f"terminate command {command.id}")
        self._input_locks.pop(session_id, None)
        return {"terminated": True}

    async def _run_job(self, command: AgentCommand, payload: RunJobPayload) -> dict[str, Any]:
        if self.run_job is None:
            raise CommandFailed(
                f"jobs are not enabled on this engine (no job runner): job {payload.job_id} "
                "was not run"
            )
        try:
            result = await self.run_job(payload)
        except CommandFailed:
            raise
        except CALLBACK_ERRORS as error:
            raise CommandFailed(f"job {payload.job_id} failed: {_message(error)}") from error
        if not isinstance(result, dict):
            raise TypeError(f"the job runner returned {type(result).__name__}, not a dict")
        return result

    async def _ship_job(self, command: AgentCommand, payload: ShipJobPayload) -> dict[str, Any]:
        if self.ship_job is None:
            raise CommandFailed(
                f"shipping is not enabled on this engine: job {payload.job_id} was not shipped"
            )
        try:
            result = await self.ship_job(payload)
        except CommandFailed:
            raise
        except CALLBACK_ERRORS as error:
            message = _message(error)
            raise CommandFailed(f"job {payload.job_id} was not shipped: {message}") from error
        return result

    def _input_lock(self, session_id: str) -> asyncio.Lock:
        lock = self._input_locks.get(session_id)
        if lock is None:
            if len(self._input_locks) > 1000:  # forget sessions that are gone
                self._input_locks = {
                    sid: held
                    for sid, held in self._input_locks.items()
                    if sid in self.manager.sessions or held.locked()
                }
            lock = self._input_locks[session_id] = asyncio.Lock()
        return lock


def _session_id(command: AgentCommand) -> str:
    assert command.session_id is not None  # validate_command checked it
    return command.session_id


def _tasks(entries: set[_InFlight]) -> set[asyncio.Task[None]]:
    return {entry.task for entry in entries if entry.task is not None}


async def _cancel_and_wait(future: asyncio.Future[Any]) -> None:
    future.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await future
