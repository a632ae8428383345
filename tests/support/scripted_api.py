"""A scripted stand-in for the Anthropic Messages API, served on loopback.

The real Claude Code CLI is pointed at it with ``ANTHROPIC_BASE_URL`` (see ``claude_home``) and
runs fully offline. Requests of the *main conversation* consume a queue of scripted replies in
order; requests the CLI makes on its own (quota probes, title / topic generation, small-model
helpers) are answered with a short fixed text and never consume the script.

    with ScriptedMessagesAPI(replies=["Hello from the script."]) as api:
        env = claude_env(workdir, home, api)
        ...
        assert "hello" in api.main_requests[0].user_text()

Every request is recorded (path, headers without credentials, parsed JSON body) in
``api.requests``; ``api.main_requests`` / ``api.side_requests`` are the classified views.
Only the standard library is used.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "SIDE_REPLY_TEXT",
    "RecordedRequest",
    "Reply",
    "ScriptedMessagesAPI",
    "ScriptedReply",
    "classify_messages_request",
]

#: What side requests (titles, topic detection, quota probes...) are answered with.
SIDE_REPLY_TEXT = "ok"

#: Answer for a main-conversation request once the script has run out.
EXHAUSTED_TEXT = "(scripted API: no reply left in the script)"

_REDACTED_HEADERS = frozenset({"authorization", "x-api-key", "proxy-authorization", "cookie"})

TextSource = str | Callable[[dict[str, Any]], str]


@dataclass(frozen=True)
class ScriptedReply:
    """One scripted assistant turn.

    ``text`` is the reply, or a callable taking the request JSON and returning it.
    Streaming splits it into ``text_delta`` chunks of ``chunk_size`` characters (``None``: the
    whole text in one delta) and sleeps ``chunk_delay`` seconds between chunks, after an initial
    ``first_delay`` (time before the first byte of the response, e.g. to observe a spinner).
    """

    text: TextSource
    chunk_size: int | None = None
    chunk_delay: float = 0.0
    first_delay: float = 0.0

    def render(self, body: dict[str, Any]) -> str:
        text = self.text(body) if callable(self.text) else self.text
        if not isinstance(text, str):
            raise TypeError(f"scripted reply produced {type(text).__name__}, not str")
        return text

    def chunks(self, text: str) -> list[str]:
        if not text:
            return [""]
        if not self.chunk_size or self.chunk_size <= 0:
            return [text]
        n = self.chunk_size
        return [text[i : i + n] for i in range(0, len(text), n)]


Reply = str | Callable[[dict[str, Any]], str] | ScriptedReply


def _as_reply(reply: Reply) -> ScriptedReply:
    if isinstance(reply, ScriptedReply):
        return reply
    if isinstance(reply, str) or callable(reply):
        return ScriptedReply(reply)
    raise TypeError(f"not a reply: {reply!r}")


@dataclass
class RecordedRequest:
    """One HTTP request the CLI made, as the stand-in saw it."""

    seq: int
    method: str
    path: str  # without the query string
    query: str
    headers: dict[str, str]  # lower-cased names; credentials removed
    body: Any  # parsed JSON, or None
    raw_body: bytes
    kind: str  # "main" | "side" | "count_tokens" | "unknown"
    reason: str = ""  # why it was classified that way
    reply_text: str | None = None
    status: int = 200
    received_at: float = field(default_factory=time.monotonic)

    # -- conveniences for assertions -------------------------------------------------------

    @property
    def model(self) -> str | None:
        return self.body.get("model") if isinstance(self.body, dict) else None

    def body_text(self) -> str:
        """The raw request body decoded as text (everything the model would see, and more)."""
        return self.raw_body.decode("utf-8", "replace")

    def system_text(self) -> str:
        return _flatten_text(self.body.get("system") if isinstance(self.body, dict) else None)

    def messages_text(self) -> str:
        return _flatten_text(self.body.get("messages") if isinstance(self.body, dict) else None)

    def user_text(self) -> str:
        """Text of all user-role messages, concatenated."""
        if not isinstance(self.body, dict):
            return ""
        msgs = self.body.get("messages") or []
        return "\n".join(_flatten_text(m.get("content")) for m in msgs if m.get("role") == "user")

    def last_user_text(self) -> str:
        if not isinstance(self.body, dict):
            return ""
        for m in reversed(self.body.get("messages") or []):
            if m.get("role") == "user":
                return _flatten_text(m.get("content"))
        return ""


def _flatten_text(value: Any) -> str:
    """All ``text`` strings inside a system / messages / content structure, newline-joined."""
    out: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, list):
            for item in v:
                walk(item)
        elif isinstance(v, dict):
            if isinstance(v.get("text"), str):
                out.append(v["text"])
            for key in ("content", "messages"):
                if key in v:
                    walk(v[key])

    walk(value)
    return "\n".join(out)


# -- classification ----------------------------------------------------------------------------


def classify_messages_request(body: Any) -> tuple[str, str]:
    """Return ``("main" | "side", reason)`` for a ``POST /v1/messages`` body.

    The main conversation is the agent loop: its system prompt is Claude Code's own
    ("You are Claude Code...") and it offers the tool set. Everything else the CLI sends by
    itself — the startup quota probe (``max_tokens`` 1, user text "quota"), session-title and
    topic generation, other small-model helpers — carries no tools, its own short system prompt,
    and/or a tiny ``max_tokens``.
    """
    if not isinstance(body, dict):
        return "side", "body is not a JSON object"
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, int) and max_tokens <= 8:
        return "side", f"max_tokens={max_tokens}"
    tools = body.get("tools") or []
    if not tools:
        return "side", "no tools offered"
    system = _flatten_text(body.get("system"))
    if "Claude Code" not in system and "Claude Agent SDK" not in system:
        return "side", "system prompt is not Claude Code's"
    return "main", f"{len(tools)} tools, Claude Code system prompt"


# -- the server --------------------------------------------------------------------------------


class ScriptedMessagesAPI:
    """Loopback HTTP server speaking enough of the Messages API for Claude Code.

    ``replies``: the script — strings, callables ``(request_json) -> str`` or
    :class:`ScriptedReply` — consumed in order by main-conversation requests.
    ``side_reply``: text for requests the CLI makes on its own.
    ``wait_for_reply``: seconds a main request waits for :meth:`add_reply` when the script is
    empty, before it is answered with ``exhausted_text``.
    ``classify``: override of :func:`classify_messages_request`.
    """

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        side_reply: str = SIDE_REPLY_TEXT,
        exhausted_text: str = EXHAUSTED_TEXT,
        wait_for_reply: float = 0.0,
        model: str = "claude-sonnet-4-5-20250929",
        classify: Callable[[Any], tuple[str, str]] = classify_messages_request,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self._script: deque[ScriptedReply] = deque(_as_reply(r) for r in replies)
        self.side_reply = side_reply
        self.exhausted_text = exhausted_text
        self.wait_for_reply = wait_for_reply
        self.model = model
        self.classify = classify
        self._host = host
        self._port = port
        self._cond = threading.Condition()
        self._requests: list[RecordedRequest] = []
        self._seq = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        #: Main requests answered after the script ran out (tests may assert it stays empty).
        self.exhausted: list[RecordedRequest] = []
        #: Requests to paths the stand-in does not know.
        self.unknown: list[RecordedRequest] = []

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> ScriptedMessagesAPI:
        if self._server is not None:
            return self
        handler = type("_BoundHandler", (_Handler,), {"api": self})
        server = ThreadingHTTPServer((self._host, self._port), handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.name = f"scripted-api:{server.server_address[1]}"
        self._thread.start()
        return self

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._cond:
            self._cond.notify_all()

    def __enter__(self) -> ScriptedMessagesAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("ScriptedMessagesAPI is not running")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self.port}"

    # -- script ------------------------------------------------------------------------------

    def add_reply(
        self,
        text: TextSource | ScriptedReply,
        *,
        chunk_size: int | None = None,
        chunk_delay: float = 0.0,
        first_delay: float = 0.0,
    ) -> None:
        """Append a reply to the script (wakes a main request waiting for one)."""
        if isinstance(text, ScriptedReply):
            reply = text
        else:
            reply = ScriptedReply(text, chunk_size, chunk_delay, first_delay)
        with self._cond:
            self._script.append(reply)
            self._cond.notify_all()

    @property
    def pending_replies(self) -> int:
        with self._cond:
            return len(self._script)

    def _next_reply(self) -> ScriptedReply | None:
        deadline = time.monotonic() + self.wait_for_reply
        with self._cond:
            while not self._script:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._server is None:
                    return None
                self._cond.wait(remaining)
            return self._script.popleft()

    # -- records -----------------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._cond:
            return list(self._requests)

    @property
    def main_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.kind == "main"]

    @property
    def side_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.kind == "side"]

    def _record(self, req: RecordedRequest) -> None:
        with self._cond:
            self._requests.append(req)
            self._cond.notify_all()

    def wait_for(
        self, predicate: Callable[[list[RecordedRequest]], bool], timeout: float = 30.0
    ) -> bool:
        """Block until ``predicate(requests)`` holds (re-checked on every new request)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(list(self._requests)):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(min(remaining, 0.2))
            return True

    def wait_for_main_requests(self, n: int = 1, timeout: float = 30.0) -> list[RecordedRequest]:
        """Wait until at least ``n`` main requests arrived; return them (raises on timeout)."""
        ok = self.wait_for(lambda rs: sum(r.kind == "main" for r in rs) >= n, timeout)
        if not ok:
            raise TimeoutError(
                f"expected {n} main request(s) within {timeout}s; got: "
                + ", ".join(f"{r.method} {r.path} [{r.kind}: {r.reason}]" for r in self.requests)
            )
        return self.main_requests

    def describe(self) -> str:
        """One line per recorded request (for assertion messages)."""
        lines = []
        for r in self.requests:
            lines.append(
                f"#{r.seq} {r.method} {r.path}{'?' + r.query if r.query else ''} -> {r.status} "
                f"[{r.kind}: {r.reason}] model={r.model} reply={r.reply_text!r}"
            )
        return "\n".join(lines)

    # -- message construction ----------------------------------------------------------------

    def _message(self, body: dict[str, Any], text: str) -> dict[str, Any]:
        return {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model") or self.model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": _usage(body, text),
        }


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _usage(body: dict[str, Any], text: str) -> dict[str, Any]:
    return {
        "input_tokens": _estimate_tokens(json.dumps(body.get("messages", ""))),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": _estimate_tokens(text),
        "service_tier": "standard",
    }


class _Handler(BaseHTTPRequestHandler):
    api: ScriptedMessagesAPI  # set on the bound subclass
    protocol_version = "HTTP/1.1"
    server_version = "ScriptedMessagesAPI/1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    # -- plumbing ----------------------------------------------------------------------------

    def _read_request(self, kind_hint: str | None = None) -> RecordedRequest:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        parts = urlsplit(self.path)
        headers = {
            k.lower(): v for k, v in self.headers.items() if k.lower() not in _REDACTED_HEADERS
        }
        return RecordedRequest(
            seq=next(self.api._seq),
            method=self.command,
            path=parts.path,
            query=parts.query,
            headers=headers,
            body=body,
            raw_body=raw,
            kind=kind_hint or "unknown",
        )

    def _send_json(self, status: int, payload: Any, extra: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", f"req_{uuid.uuid4().hex[:24]}")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self.wfile.flush()

    def _not_found(self, req: RecordedRequest) -> None:
        req.kind, req.status, req.reason = "unknown", 404, "no such endpoint"
        self.api.unknown.append(req)
        self.api._record(req)
        self._send_json(
            404,
            {
                "type": "error",
                "error": {"type": "not_found_error", "message": f"{req.method} {req.path}"},
            },
        )

    # -- verbs -------------------------------------------------------------------------------

    def do_GET(self) -> None:
        self._not_found(self._read_request())

    do_HEAD = do_GET
    do_PUT = do_GET
    do_DELETE = do_GET
    do_PATCH = do_GET

    def do_POST(self) -> None:
        req = self._read_request()
        if req.path == "/v1/messages":
            self._messages(req)
        elif req.path == "/v1/messages/count_tokens":
            req.kind, req.reason = "count_tokens", "token count"
            self.api._record(req)
            body = req.body if isinstance(req.body, dict) else {}
            self._send_json(200, {"input_tokens": _estimate_tokens(json.dumps(body))})
        else:
            self._not_found(req)

    # -- /v1/messages ------------------------------------------------------------------------

    def _messages(self, req: RecordedRequest) -> None:
        api = self.api
        body = req.body if isinstance(req.body, dict) else {}
        req.kind, req.reason = api.classify(req.body)
        reply: ScriptedReply
        if req.kind == "main":
            # Record before waiting, so tests see the request while its reply is pending.
            api._record(req)
            nxt = api._next_reply()
            if nxt is None:
                api.exhausted.append(req)
                reply = ScriptedReply(api.exhausted_text)
            else:
                reply = nxt
        else:
            api._record(req)
            reply = ScriptedReply(api.side_reply)
        try:
            text = reply.render(body)
        except Exception as exc:  # a broken callable must not hang the CLI
            text = f"(scripted API: reply callable failed: {exc!r})"
        req.reply_text = text
        if reply.first_delay > 0:
            time.sleep(reply.first_delay)
        if body.get("stream"):
            self._stream(body, text, reply)
        else:
            self._send_json(200, api._message(body, text))

    def _stream(self, body: dict[str, Any], text: str, reply: ScriptedReply) -> None:
        api = self.api
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.send_header("request-id", f"req_{uuid.uuid4().hex[:24]}")
        self.end_headers()
        self.close_connection = True

        message = api._message(body, text)
        usage = message["usage"]
        start = dict(message, content=[], stop_reason=None, usage=dict(usage, output_tokens=1))

        def event(name: str, data: dict[str, Any]) -> None:
            payload = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
            self.wfile.write(payload)
            self.wfile.flush()

        try:
            event("message_start", {"type": "message_start", "message": start})
            event(
                "content_block_start",
                {"type": "content_block_start", "index": 0,
                 "content_block": {"type": "text", "text": ""}},
            )  # fmt: skip
            event("ping", {"type": "ping"})
            for i, chunk in enumerate(reply.chunks(text)):
                if i and reply.chunk_delay > 0:
                    time.sleep(reply.chunk_delay)
                event(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": 0,
                     "delta": {"type": "text_delta", "text": chunk}},
                )  # fmt: skip
            event("content_block_stop", {"type": "content_block_stop", "index": 0})
            event(
                "message_delta",
                {"type": "message_delta",
                 "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                 "usage": {"output_tokens": usage["output_tokens"]}},
            )  # fmt: skip
            event("message_stop", {"type": "message_stop"})
        except (BrokenPipeError, ConnectionResetError):
            pass  # the CLI hung up (e.g. the user pressed Esc); nothing to do
