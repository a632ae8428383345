"""Every error of the API is one JSON shape, whatever raised it:

    {"error": {"status": 404, "code": "not_found", "message": "no session 'x' in office 'demo'",
               "command_id": null, "details": null}}

`code` is stable (clients branch on it), `message` is a sentence for a person, `command_id` is
set when a command was inserted (a 504 timeout: poll GET .../commands/{command_id}; a 409
command_failed), `details` lists the problems of a request that failed validation.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from semo.engine.api.responses import PlainJSONResponse
from semo.engine.store.base import NotFound, StoreConflict, StoreError, StoreUnavailable
from semo.engine.store.models import InvalidCommand

log = logging.getLogger("semo.api")

#: status -> the code of errors that have no more specific one
CODES: dict[int, str] = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    500: "internal",
    503: "store_unavailable",
    504: "timeout",
}


class ProblemDetail(BaseModel):
    loc: list[str | int]
    msg: str
    type: str


class ErrorInfo(BaseModel):
    status: int
    code: str
    message: str
    command_id: str | None = None
    details: list[ProblemDetail] | None = None


class ErrorBody(BaseModel):
    error: ErrorInfo


class ApiError(Exception):
    """Raised by handlers; becomes the error body with `status`."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        command_id: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code or CODES.get(status, "error")
        self.message = message
        self.command_id = command_id
        self.headers = headers


def error_response(
    status: int,
    message: str,
    *,
    code: str | None = None,
    command_id: str | None = None,
    details: list[dict[str, Any]] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    info = ErrorInfo(
        status=status,
        code=code or CODES.get(status, "error"),
        message=message,
        command_id=command_id,
        details=[ProblemDetail(**d) for d in details] if details is not None else None,
    )
    return PlainJSONResponse(
        ErrorBody(error=info).model_dump(mode="json"), status_code=status, headers=headers
    )


def _details(error: RequestValidationError) -> list[dict[str, Any]]:
    return [
        {
            "loc": [p if isinstance(p, int) else str(p) for p in e.get("loc", ())],
            "msg": str(e.get("msg", "")),
            "type": str(e.get("type", "")),
        }
        for e in error.errors()
    ]


def _sentence(details: list[dict[str, Any]]) -> str:
    parts = [f"{'.'.join(str(p) for p in d['loc']) or 'request'}: {d['msg']}" for d in details]
    text = "; ".join(parts[:5])
    return text + (f" (and {len(parts) - 5} more)" if len(parts) > 5 else "")


def _allowed(request: Request) -> str:
    """Every method some route serves at this path (Starlette names only the first route's)."""
    methods: set[str] = set()
    for route in request.app.routes:
        match, _ = route.matches({**request.scope, "method": "\0"})
        if match is not Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    return ", ".join(sorted(methods))


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(request: Request, error: ApiError) -> JSONResponse:
        return error_response(
            error.status,
            error.message,
            code=error.code,
            command_id=error.command_id,
            headers=error.headers,
        )

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        details = _details(error)
        if any(d["type"] == "json_invalid" for d in details):
            return error_response(
                400, f"the body is not valid JSON: {_sentence(details)}", code="bad_json"
            )
        return error_response(422, _sentence(details), details=details)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, error: StarletteHTTPException) -> JSONResponse:
        message = error.detail if isinstance(error.detail, str) else str(error.detail)
        if error.status_code == 404 and message == "Not Found":
            message = f"no such endpoint: {request.method} {request.url.path}"
        headers = error.headers
        if error.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path}"
            headers = {**(headers or {}), "Allow": _allowed(request)}
        return error_response(error.status_code, message, headers=headers)

    @app.exception_handler(InvalidCommand)
    async def _invalid_command(request: Request, error: InvalidCommand) -> JSONResponse:
        return error_response(422, str(error))

    @app.exception_handler(StoreError)
    async def _store(request: Request, error: StoreError) -> JSONResponse:
        if isinstance(error, NotFound):
            return error_response(404, str(error))
        if isinstance(error, StoreConflict):
            return error_response(409, str(error))
        if isinstance(error, StoreUnavailable):
            log.warning("%s %s: store unavailable: %s", request.method, request.url.path, error)
            return error_response(503, f"the store is unavailable: {error}")
        log.warning("%s %s: store error: %s", request.method, request.url.path, error)
        return error_response(409, str(error), code="store_error")

    @app.exception_handler(Exception)
    async def _internal(request: Request, error: Exception) -> JSONResponse:
        log.exception("%s %s failed", request.method, request.url.path)
        return error_response(500, f"internal error: {type(error).__name__}")
