"""The Sessions REST API (seed 001 Phase 8, seed 003 TASK-SE09) as a FastAPI app over a Store.

    app = create_app(store, settings)       # store: open; settings: resolve_settings(...)

Writes insert an `agent_commands` row and wait for its `agent_command_results` row (an engine
serving the office runs it); reads come straight from the store. The app needs nothing but a
store, so it runs inside `semo engine --http` or on its own (`semo api`) against the store an
engine serves. docs/API.md is the reference.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Path, Query, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from semo.engine.api.deps import _AUTH, _BODY, PREFIX, OfficeDep, _errors
from semo.engine.api.errors import ApiError, error_response, install_error_handlers
from semo.engine.api.job_work import build_job_work_router
from semo.engine.api.jobs import build_jobs_router
from semo.engine.api.responses import PlainJSONResponse
from semo.engine.api.schemas import (
    Answer,
    CommandDone,
    CommandPending,
    CommandState,
    CreateSession,
    Health,
    Output,
    SendPrompt,
    Session,
    SessionCreated,
)
from semo.engine.api.settings import ApiSettings
from semo.engine.api.ship import build_ship_router
from semo.engine.api.waiter import ResultWaiter
from semo.engine.office.operations import LOST, answer_question, check_input_reaches, lost_sessions
from semo.engine.store.base import NotFound, Store
from semo.engine.store.literals import CommandType
from semo.engine.store.models import (
    COMMAND_ENDED,
    AgentCommandResult,
    AgentSession,
    Office,
    UserQuestion,
)

API_VERSION = "1"
#: seconds a command gets beyond its own limit (send_prompt's `timeout`, else the engines'
#: command_timeout) before the API gives up: the engine's outcome, even "timed out", wins
COMMAND_WAIT_MARGIN = 5.0

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

SessionId = Annotated[str, Path(min_length=1, max_length=200)]
Timeout = Annotated[
    float | None,
    Query(
        gt=0,
        le=3600,
        description="seconds to wait for the command's result; when they run out first, 202 "
        "with the command id to poll. Default: past the command's own limit (send_prompt's "
        "`timeout`, else the engine's command_timeout) + 5 s, at least [api] wait_timeout, so "
        "the engine's outcome is the answer (504 when no engine answered in that time)",
    ),
]


_WRITE = (202, *_AUTH, 409, 504)


class BodyLimit:
    """ASGI middleware: request bodies over `limit` bytes get 413 (by Content-Length, or while
    a chunked body streams in); a body that is not JSON gets 415. The rest of a refused body is
    read and dropped (up to DRAIN_BYTES) before the answer, so the client reads the answer
    rather than a connection reset."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = _header(scope, b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            if length.isdigit() and int(length) <= self.limit + DRAIN_BYTES:
                await _drain(receive, int(length))
            await self._reject(scope, receive, send)
            return
        chunked = "chunked" in (_header(scope, b"transfer-encoding") or "").lower()
        if (chunked or (length or "0") != "0") and not _is_json(_header(scope, b"content-type")):
            await _drain(receive, self.limit + DRAIN_BYTES)
            response = error_response(415, "the body must be JSON (Content-Type: application/json)")
            await response(scope, receive, send)
            return
        seen = 0
        started = False

        async def limited() -> MutableMapping[str, Any]:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    if message.get("more_body", False):
                        await _drain(receive, DRAIN_BYTES)
                    raise _TooLarge(self.limit)
            return message

        async def tracking(message: MutableMapping[str, Any]) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited, tracking)
        except _TooLarge:
            if not started:
                await self._reject(scope, receive, send)

    async def _reject(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(
            413, f"the body is larger than {self.limit} bytes", headers={"Connection": "close"}
        )
        await response(scope, receive, send)


#: how much of a refused body is read and dropped before answering
DRAIN_BYTES = 8 * 1024 * 1024


async def _drain(receive: Receive, budget: int) -> None:
    while budget > 0:
        message = await receive()
        if message["type"] != "http.request":
            return
        budget -= len(message.get("body", b""))
        if not message.get("more_body", False):
            return


class _TooLarge(StarletteHTTPException):
    """Raised from `receive`: FastAPI passes HTTP exceptions through (others become 400)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the body is larger than {limit} bytes", {"Connection": "close"})


class Authenticate:
    """ASGI middleware: every /api/offices request needs a valid bearer token (401 before the
    body is even read); which offices it opens goes into the request's state."""

    def __init__(self, app: ASGIApp, tokens: dict[str, bytes]) -> None:
        self.app = app
        self.tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/api/offices"):
            await self.app(scope, receive, send)
            return
        header = _header(scope, b"authorization")
        scheme, _, token = (header or "").partition(" ")
        token = token.strip()
        if not header or scheme.lower() != "bearer" or not token:
            await self._reject(scope, receive, send, "this API needs `Authorization: Bearer TOKEN`")
            return
        given = token.encode("utf-8", "surrogateescape")
        granted = frozenset(
            office
            for office, secret in self.tokens.items()  # every one compared: constant time
            if hmac.compare_digest(secret, given)
        )
        if not granted:
            await self._reject(scope, receive, send, "the token is not valid")
            return
        scope.setdefault("state", {})["semo_offices"] = granted
        await self.app(scope, receive, send)

    @staticmethod
    async def _reject(scope: Scope, receive: Receive, send: Send, message: str) -> None:
        response = error_response(401, message, headers={"WWW-Authenticate": 'Bearer realm="semo"'})
        await response(scope, receive, send)


def _is_json(content_type: str | None) -> bool:
    kind = (content_type or "").split(";", 1)[0].strip().lower()
    return kind == "application/json" or (
        kind.startswith("application/") and kind.endswith("+json")
    )


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


class CommandStillRunning(Exception):
    """The wait a request asked for ran out before the command's result came: 202."""

    def __init__(self, body: CommandPending) -> None:
        super().__init__(body.message)
        self.body = body


class _Api:
    """The store-side logic behind the routes."""

    def __init__(self, store: Store, settings: ApiSettings) -> None:
        self.store = store
        self.settings = settings
        self.waiter = ResultWaiter(store)
        self._offices: dict[str, Office] = {}  # by id and by name (offices are never deleted)
        self._roles: dict[str, tuple[str, str]] = {}  # agent id -> (role, name)

    # -- offices and authorisation -------------------------------------------------------------

    async def office(self, key: str, granted: frozenset[str]) -> Office:
        """The office `key` (id or name) if the token opens it: 403 otherwise (whether or not
        it exists), 404 when it is the token's own office but not in the store."""
        office = self._offices.get(key)
        if office is None and "\0" not in key:
            for candidate in await self.store.list_offices():
                self._offices[candidate.id] = self._offices[candidate.name] = candidate
            office = self._offices.get(key)
        if office is not None and (office.id in granted or office.name in granted):
            return office
        if office is None and key in granted:
            raise ApiError(404, f"no office {key!r} in the store")
        raise ApiError(403, f"this token is not for office {key!r}")

    # -- sessions --------------------------------------------------------------------------------

    async def session(self, office: Office, session_id: str) -> Session:
        row = await self._session_row(office, session_id)
        return (await self._with_roles(office, [row]))[0]

    async def sessions(self, office: Office, include_terminated: bool) -> list[Session]:
        rows = await self.store.list_sessions(office.id, include_terminated=include_terminated)
        return await self._with_roles(office, rows)

    async def live_session(self, office: Office, session_id: str) -> AgentSession:
        row = await self._session_row(office, session_id)
        if row.status == "terminated":
            why = f" ({row.end_reason})" if row.end_reason else ""
            raise ApiError(
                409,
                f"session {session_id} has ended{why}; GET .../sessions?all=true lists it",
                code="session_ended",
            )
        return row

    async def _session_row(self, office: Office, session_id: str) -> AgentSession:
        try:
            row = None if "\0" in session_id else await self.store.get_session(session_id)
        except NotFound:
            row = None
        if row is None or row.office_id != office.id:
            raise ApiError(404, f"no session {session_id!r} in office {office.name!r}")
        return row

    async def _with_roles(self, office: Office, rows: list[AgentSession]) -> list[Session]:
        """The rows with their agent's role and name, and their state ("lost" when the
        engine running one is not running: `lost_sessions`, as `semo sessions` says)."""
        if any(row.agent_id not in self._roles for row in rows):
            for agent in await self.store.list_agents(office.id):
                self._roles[agent.id] = (agent.role, agent.name)
        lost = await lost_sessions(self.store, office.id, rows)
        out = []
        for row in rows:
            role, name = self._roles.get(row.agent_id, (None, None))
            why = lost.get(row.session_id)
            state = row.status if why is None else LOST
            out.append(
                Session(
                    **row.model_dump(), role=role, agent_name=name, state=state, lost_reason=why
                )
            )
        return out

    async def check_agent(self, office: Office, payload: CreateSession) -> None:
        """404 when the office has no such agent (a well-formed reference to nothing)."""
        agents = await self.store.list_agents(office.id)
        if payload.agent_id is not None and not any(a.id == payload.agent_id for a in agents):
            raise ApiError(404, f"office {office.name!r} has no agent {payload.agent_id!r}")
        if payload.role is not None and not any(a.role == payload.role for a in agents):
            roles = ", ".join(a.role for a in agents) or "none"
            raise ApiError(
                404, f"office {office.name!r} has no agent with role {payload.role!r} ({roles})"
            )

    # -- commands --------------------------------------------------------------------------------

    def default_wait(self, command_limit: float) -> float:
        """How long a write waits when the request does not say: beyond the limit the engine
        gives the command (`command_limit`), so that its outcome, not a 504, is the answer."""
        return max(self.settings.wait_timeout, command_limit + COMMAND_WAIT_MARGIN)

    async def session_command(
        self,
        office: Office,
        session_id: str,
        command_type: CommandType,
        payload: dict[str, Any],
        timeout: float | None,
        *,
        command_limit: float | None = None,
    ) -> CommandDone:
        """A command for a live session of the office, run to its result."""
        await self.live_session(office, session_id)
        command_id, result = await self.run(
            office,
            command_type,
            payload,
            session_id=session_id,
            timeout=timeout,
            command_limit=command_limit,
        )
        return CommandDone(
            command_id=command_id, command_type=command_type, result=result.result or {}
        )

    async def run(
        self,
        office: Office,
        command_type: str,
        payload: dict[str, Any],
        *,
        session_id: str | None = None,
        timeout: float | None = None,
        command_limit: float | None = None,
    ) -> tuple[str, AgentCommandResult]:
        """Insert the command and wait for its result, `timeout` seconds or by default past
        the limit the engine gives it (`command_limit`, else command_timeout): 202
        (`CommandStillRunning`) when the `timeout` asked for runs out, 504 when no engine
        answered in the default wait, 409 command_failed when the engine reports a failure."""
        own_limit = command_limit or self.settings.command_timeout
        limit = timeout or self.default_wait(own_limit)
        await check_input_reaches(self.store, command_type, session_id)  # 409: engine gone
        command = await self.store.insert_command(
            office.id, command_type, payload, session_id=session_id
        )
        result = await self.waiter.wait(office.id, command.id, limit)
        poll = f"/api/offices/{office.id}/commands/{command.id}"
        claimed = result is None and (await self.store.get_command(command.id)).status == (
            "processing"
        )
        if claimed and timeout is None:
            # claimed late (a busy engine's queue): its limit started at the claim, so its
            # outcome comes within one more limit
            extra = own_limit + COMMAND_WAIT_MARGIN
            limit += extra
            result = await self.waiter.wait(office.id, command.id, extra)
        if result is None and timeout is not None:
            status = (await self.store.get_command(command.id)).status
            result = await self.store.get_result(command.id)  # it may have come meanwhile
        if result is None and timeout is not None:
            raise CommandStillRunning(
                CommandPending(
                    command_id=command.id,
                    status=status,
                    poll=poll,
                    message=f"no result within the {limit:g} s asked for; the command is "
                    f"{status}: poll GET {poll}",
                )
            )
        if result is None:
            raise ApiError(
                504,
                f"no engine answered within {limit:g} s (the command's own limit + 5 s, and "
                f"again once it was claimed); the command is still queued or running: poll "
                f"GET {poll}",
                command_id=command.id,
            )
        if not result.success:
            raise ApiError(
                409,
                result.error or f"{command_type} failed",
                code="command_failed",
                command_id=command.id,
            )
        return command.id, result


def create_app(store: Store, settings: ApiSettings) -> FastAPI:
    """The API over an open `store`; `app.state.api.waiter.close()` when done."""
    app = FastAPI(
        title="semo Sessions API",
        version=API_VERSION,
        description=(
            "Drive an office's agent sessions: every write inserts an agent_commands row and "
            "waits for its agent_command_results row; reads come from the store. Errors are "
            '`{"error": {"status", "code", "message", "command_id", "details"}}`.'
        ),
        docs_url=None,
        redoc_url=None,
        default_response_class=PlainJSONResponse,
    )
    api = _Api(store, settings)
    app.state.api = api
    install_error_handlers(app)

    @app.exception_handler(CommandStillRunning)
    async def _still_running(request: Request, pending: CommandStillRunning) -> JSONResponse:
        return PlainJSONResponse(pending.body.model_dump(), status_code=202)

    tokens = {office: t.get_secret_value().encode() for office, t in settings.tokens.items()}
    # the last added runs first: no token, no further look at the request
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    app.add_middleware(Authenticate, tokens=tokens)

    @app.get("/api/health", response_model=Health, tags=["meta"])
    async def health() -> Health:
        """Whether the API is up (no token needed)."""
        return Health(store=store.backend)

    @app.get(
        f"{PREFIX}/sessions",
        response_model=list[Session],
        responses=_errors(*_AUTH),
        tags=["sessions"],
    )
    async def list_sessions(
        office: OfficeDep,
        all: Annotated[bool, Query(description="include terminated sessions")] = False,
    ) -> list[Session]:
        """The office's sessions (live ones unless `all`)."""
        return await api.sessions(office, all)

    @app.post(
        f"{PREFIX}/sessions",
        status_code=201,
        response_model=SessionCreated,
        responses=_errors(*_WRITE, *_BODY),
        tags=["sessions"],
    )
    async def create_session(
        office: OfficeDep, body: CreateSession, timeout: Timeout = None
    ) -> SessionCreated:
        """A session of the agent (by `role` or `agent_id`) from the office's pool: a create_session
        command."""
        await api.check_agent(office, body)
        command_id, result = await api.run(
            office, "create_session", body.model_dump(exclude_none=True), timeout=timeout
        )
        session_id = str((result.result or {}).get("session_id", ""))
        return SessionCreated(command_id=command_id, session=await api.session(office, session_id))

    @app.get(
        f"{PREFIX}/sessions/{{session_id}}",
        response_model=Session,
        responses=_errors(*_AUTH, 409),
        tags=["sessions"],
    )
    async def get_session(office: OfficeDep, session_id: SessionId) -> Session:
        """One live session (an ended one, e.g. after its DELETE, is 409 session_ended:
        `GET .../sessions?all=true` lists it with its end reason)."""
        await api.live_session(office, session_id)
        return await api.session(office, session_id)

    @app.delete(
        f"{PREFIX}/sessions/{{session_id}}",
        response_model=CommandDone,
        responses=_errors(*_WRITE),
        tags=["sessions"],
    )
    async def terminate_session(
        office: OfficeDep, session_id: SessionId, timeout: Timeout = None
    ) -> CommandDone:
        """End the session: a terminate command."""
        return await api.session_command(office, session_id, "terminate", {}, timeout)

    @app.post(
        f"{PREFIX}/sessions/{{session_id}}/prompt",
        response_model=CommandDone,
        responses=_errors(*_WRITE, *_BODY),
        tags=["sessions"],
    )
    async def send_prompt(
        office: OfficeDep, session_id: SessionId, body: SendPrompt, timeout: Timeout = None
    ) -> CommandDone:
        """Queue a prompt; it is typed when the agent is ready. With `wait`, the result is the
        turn's (state, text, message kinds) and the API waits `timeout` + 5 s by default."""
        return await api.session_command(
            office,
            session_id,
            "send_prompt",
            body.model_dump(),
            timeout,
            command_limit=body.timeout,  # the engine's limit for it, waiting or not
        )

    @app.post(
        f"{PREFIX}/sessions/{{session_id}}/cancel",
        response_model=CommandDone,
        responses=_errors(*_WRITE),
        tags=["sessions"],
    )
    async def cancel(
        office: OfficeDep, session_id: SessionId, timeout: Timeout = None
    ) -> CommandDone:
        """Interrupt the agent's turn (Ctrl+C / Esc, per agent kind): a cancel command."""
        return await api.session_command(office, session_id, "cancel", {}, timeout)

    @app.get(
        f"{PREFIX}/sessions/{{session_id}}/output",
        response_model=Output,
        responses=_errors(*_WRITE),
        tags=["sessions"],
    )
    async def output(
        office: OfficeDep,
        session_id: SessionId,
        lines: Annotated[
            int | None,
            Query(gt=0, le=10_000, description="the last N lines of scrollback + screen"),
        ] = None,
        timeout: Timeout = None,
    ) -> Output:
        """What the session's terminal shows (kept in the engine's memory: a get_output
        command)."""
        await api.live_session(office, session_id)
        payload = {} if lines is None else {"lines": lines}
        command_id, result = await api.run(
            office, "get_output", payload, session_id=session_id, timeout=timeout
        )
        data = result.result or {}
        return Output(
            command_id=command_id,
            lines=list(data.get("lines", [])),
            cols=int(data.get("cols", 0)),
            rows=int(data.get("rows", 0)),
            cursor=list(data.get("cursor", [0, 0])),
            state=str(data.get("state", "")),
        )

    @app.get(
        f"{PREFIX}/commands/{{command_id}}",
        response_model=CommandState,
        responses=_errors(*_AUTH),
        tags=["commands"],
    )
    async def get_command(
        office: OfficeDep, command_id: Annotated[str, Path(min_length=1, max_length=200)]
    ) -> CommandState:
        """A command and its result once it has one (poll this after a 504)."""
        try:
            command = None if "\0" in command_id else await store.get_command(command_id)
        except NotFound:
            command = None
        if command is None or command.office_id != office.id:
            raise ApiError(404, f"no command {command_id!r} in office {office.name!r}")
        result = await store.get_result(command_id)
        if result is not None and command.status not in COMMAND_ENDED:
            # it ended between the two reads (status and result are written together)
            command = await store.get_command(command_id)
        return CommandState(command=command, result=result)

    @app.get(
        f"{PREFIX}/questions",
        response_model=list[UserQuestion],
        responses=_errors(*_AUTH),
        tags=["questions"],
    )
    async def list_questions(
        office: OfficeDep,
        status: Literal["pending", "answered", "cancelled", "all"] = "pending",
    ) -> list[UserQuestion]:
        """The office's ASK_USER questions (pending ones by default)."""
        return await store.list_questions(office.id, status=None if status == "all" else status)

    @app.post(
        f"{PREFIX}/questions/{{question_id}}/answer",
        response_model=UserQuestion,
        responses=_errors(*_AUTH, 409, *_BODY),
        tags=["questions"],
    )
    async def answer(
        office: OfficeDep,
        question_id: Annotated[str, Path(min_length=1, max_length=200)],
        body: Answer,
    ) -> UserQuestion:
        """Answer a pending question; the engine types the answer into the asking session."""
        try:
            question = None if "\0" in question_id else await store.get_question(question_id)
        except NotFound:
            question = None
        if question is None or question.office_id != office.id:
            raise ApiError(404, f"no question {question_id!r} in office {office.name!r}")
        try:
            return await answer_question(store, question_id, text=body.text, option=body.option)
        except ValueError as error:
            # the schema cannot know the question's options: an answer that does not fit
            # them conflicts with the question, like one to a question already answered
            raise ApiError(409, str(error), code="invalid_answer") from None

    app.include_router(build_jobs_router(store))
    app.include_router(build_ship_router(store, settings.ship))
    app.include_router(build_job_work_router(store, settings.git))
    return app
