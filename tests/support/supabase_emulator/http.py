"""A minimal HTTP/1.1 server on asyncio streams (keep-alive, Content-Length and chunked bodies).

WebSocket upgrades are handed over, with the raw request head, to a separate handler (the
Realtime endpoint drives the `websockets` Sans-I/O protocol on the same stream).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from email.utils import formatdate
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote, urlsplit

MAX_BODY = 64 * 1024 * 1024


@dataclass
class Request:
    method: str
    target: str
    path: str
    query: str
    headers: list[tuple[str, str]]
    body: bytes = b""
    head: bytes = b""

    def header(self, name: str, default: str | None = None) -> str | None:
        name = name.lower()
        for key, value in self.headers:
            if key == name:
                return value
        return default

    def header_all(self, name: str) -> list[str]:
        name = name.lower()
        return [value for key, value in self.headers if key == name]

    def json(self) -> Any:
        return json.loads(self.body or b"null")


@dataclass
class Response:
    status: int
    body: bytes = b""
    headers: list[tuple[str, str]] = field(default_factory=list)

    @classmethod
    def json(cls, status: int, data: Any, content_type: str = "application/json") -> Response:
        body = json.dumps(data, separators=(",", ":")).encode()
        return cls(status, body, [("Content-Type", f"{content_type}; charset=utf-8")])


Handler = Callable[[Request], Awaitable[Response]]
UpgradeHandler = Callable[[Request, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class BadRequest(Exception):
    pass


def parse_head(head: bytes) -> Request:
    try:
        text = head.decode("latin-1")
        lines = text.split("\r\n")
        method, target, version = lines[0].split(" ", 2)
    except ValueError:
        raise BadRequest("malformed request line") from None
    if not version.startswith("HTTP/1."):
        raise BadRequest("unsupported HTTP version")
    headers = []
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise BadRequest("malformed header")
        headers.append((name.strip().lower(), value.strip()))
    split = urlsplit(target)
    return Request(method.upper(), target, unquote(split.path), split.query, headers, head=head)


async def read_body(request: Request, reader: asyncio.StreamReader) -> bytes:
    if (request.header("transfer-encoding") or "").lower() == "chunked":
        chunks = []
        size_total = 0
        while True:
            line = await reader.readuntil(b"\r\n")
            size = int(line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass
                break
            size_total += size
            if size_total > MAX_BODY:
                raise BadRequest("body too large")
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
        return b"".join(chunks)
    length = int(request.header("content-length") or 0)
    if length > MAX_BODY:
        raise BadRequest("body too large")
    return await reader.readexactly(length) if length else b""


def encode_response(response: Response, keep_alive: bool, head_only: bool = False) -> bytes:
    reason = (
        HTTPStatus(response.status).phrase
        if response.status in HTTPStatus._value2member_map_
        else ""
    )
    lines = [f"HTTP/1.1 {response.status} {reason}"]
    names = {name.lower() for name, _ in response.headers}
    headers = list(response.headers)
    if "date" not in names:
        headers.append(("Date", formatdate(usegmt=True)))
    headers.append(("Content-Length", str(len(response.body))))
    headers.append(("Connection", "keep-alive" if keep_alive else "close"))
    lines += [f"{name}: {value}" for name, value in headers]
    data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return data if head_only else data + response.body


class HttpServer:
    def __init__(self, handler: Handler, upgrade: UpgradeHandler) -> None:
        self.handler = handler
        self.upgrade = upgrade
        self.server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self, host: str, port: int) -> int:
        self.server = await asyncio.start_server(self._serve, host, port, limit=1024 * 1024)
        return self.server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        if self.server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 2)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                try:
                    request = parse_head(head)
                    if (request.header("upgrade") or "").lower() == "websocket":
                        await self.upgrade(request, reader, writer)
                        return
                    request.body = await read_body(request, reader)
                except BadRequest as error:
                    writer.write(encode_response(Response(400, str(error).encode()), False))
                    return
                except (asyncio.IncompleteReadError, ConnectionError, ValueError):
                    return
                keep_alive = (request.header("connection") or "").lower() != "close"
                response = await self.handler(request)
                writer.write(encode_response(response, keep_alive, request.method == "HEAD"))
                await writer.drain()
                if not keep_alive:
                    return
        except ConnectionError:
            pass
        finally:
            self._writers.discard(writer)
            if not writer.transport.is_closing():
                writer.close()
