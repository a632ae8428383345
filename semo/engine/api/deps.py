"""What every router of the API shares: the office path, its dependency, documented errors."""

from __future__ import annotations

from typing import Annotated, Any, Protocol

from fastapi import Depends, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from semo.engine.api.errors import ApiError, ErrorBody
from semo.engine.api.schemas import CommandPending
from semo.engine.store.models import Office

PREFIX = "/api/offices/{office_id}"

_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="token",
    description="`Authorization: Bearer <token>`: a token opens the offices it is configured for",
)

OfficeId = Annotated[str, Path(min_length=1, max_length=200, description="the office's id or name")]


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The documented answers other than the route's own: 202 (a `timeout` that ran out) and
    the errors, each with its body's model."""
    described = {
        202: "the `timeout` asked for ran out first: the command is queued or running; poll "
        "GET .../commands/{command_id}",
        400: "the body is not JSON",
        401: "no token, or not a valid one",
        403: "the token is not for this office",
        404: "no such office, session, agent, question or command in this office",
        409: "the command failed, the session has ended (GET .../sessions?all=true lists it), "
        "or the row is not in a state for it",
        413: "the body is too large",
        415: "the body is not sent as application/json",
        422: "the request does not validate",
        503: "the store is unavailable",
        504: "no engine answered within the command's own limit + 5 s (none serves the office, "
        "or it is stuck); the command stays queued: poll GET .../commands/{command_id}",
    }
    return {
        s: {"model": CommandPending if s == 202 else ErrorBody, "description": described[s]}
        for s in statuses
    }


_AUTH = (401, 403, 404, 422, 503)
_BODY = (400, 413, 415)


class OfficeLookup(Protocol):
    """The app's state.api as office_of sees it (api.app's _Api)."""

    async def office(self, key: str, granted: frozenset[str]) -> Office: ...


async def office_of(
    request: Request,
    office_id: OfficeId,
    _: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Office:
    """The office of the path, if the request's token opens it (see Authenticate)."""
    granted: frozenset[str] = getattr(request.state, "semo_offices", frozenset())
    api: OfficeLookup = request.app.state.api
    office = await api.office(office_id, granted)
    route = request.scope.get("route")
    if route is not None:
        known = _query_names(route)
        unknown = sorted(set(request.query_params) - known)
        if unknown:
            raise ApiError(
                422,
                f"unknown query parameter {unknown[0]!r} "
                f"(known: {', '.join(sorted(known)) or 'none'})",
            )
    return office


def _query_names(route: Any) -> frozenset[str]:
    """The query parameters a route declares (its own and its dependencies'), cached on it."""
    names: frozenset[str] | None = getattr(route, "_semo_query_names", None)
    if names is None:
        found: set[str] = set()
        stack = [route.dependant]
        while stack:
            dependant = stack.pop()
            found.update(field.alias for field in dependant.query_params)
            stack.extend(dependant.dependencies)
        names = frozenset(found)
        route._semo_query_names = names
    return names


OfficeDep = Annotated[Office, Depends(office_of)]
