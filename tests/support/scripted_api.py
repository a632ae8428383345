"""A scripted stand-in for the Anthropic Messages API, served on loopback.

The real Claude Code CLI is pointed at it with ``ANTHROPIC_BASE_URL`` (see ``claude_home``) and
runs fully offline. Requests of the *main conversation* consume a queue of scripted replies in
order; requests the CLI makes on its own are answered with a short fixed text and never consume
the script.

    with ScriptedMessagesAPI(replies=["Hello from the script."]) as api:
        env = claude_env(workdir, home, api)
        ...  # run claude, type "hello"
        req = api.wait_for_main_requests(1)[0]
        assert "hello" in req.last_user_text()

Every request is recorded (path, headers without credentials, parsed JSON body) in
``api.requests``; ``api.main_requests`` / ``api.side_requests`` are the classified views.

What Claude Code 2.1.328 sends (observed): with ``claude_env``'s environment only the main
conversation — ``POST /v1/messages?beta=true``, ``"stream": true``, Claude Code's system prompt,
13 tools, CLAUDE.md inside the first user message as a ``<system-reminder>``. Without
``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC`` it also sends ``HEAD /api/hello`` (connectivity probe)
and, after the first prompt, a session-title request: same model, ``"tools": []``, structured
output (``output_config.format`` = ``json_schema`` ``{"title": string}``). Only the standard
library is used.
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
    "EXHAUSTED_TEXT",
    "SIDE_REPLY_TEXT",
    "RecordedRequest",
    "Reply",
    "ScriptedMessagesAPI",
    "ScriptedReply",
    "ToolUse",
    "classify_messages_request",
    "side_reply_text",
    "synthesize_json",
]

#: What side requests (titles, topic detection, quota probes...) are answered with.
SIDE_REPLY_TEXT = "ok"

#: Answer for a main-conversation request once the script has run out.
EXHAUSTED_TEXT = "(scripted API: no reply left in the script)"

_REDACTED_HEADERS = frozenset({"authorization", "x-api-key", "proxy-authorization", "cookie"})

TextSource = str | Callable[[dict[str, Any]], "str | ScriptedReply"]


@dataclass(frozen=True)
class ToolUse:
    """A ``tool_use`` content block for a scripted reply (e.g. ``ToolUse("Bash", {...})``).

    ``flagged``: the verdict of the server-side auto-mode safety check the CLI asks for (the
    ``safeguards`` field of its request); by default the call is reported ``not_flagged``, so
    auto mode runs it without asking.
    """

    name: str
    input: dict[str, Any]
    id: str = ""  # generated when empty
    flagged: bool = False

    def block(self) -> dict[str, Any]:
        return {
            "type": "tool_use",
            "id": self.id or f"toolu_{uuid.uuid4().hex[:24]}",
            "name": self.name,
            "input": self.input,
        }


@dataclass(frozen=True)
class ScriptedReply:
    """One scripted assistant turn.

    ``text`` is the reply, or a callable taking the request JSON and returning it (or a whole
    ScriptedReply, to choose tool calls by what the model was told); an empty
    text with ``tool_uses`` sends only the tool calls. ``tool_uses`` follow the text and make the
    stop reason ``tool_use`` (the CLI then runs them and sends the results in its next main
    request, which consumes the next reply of the script).
    Streaming splits the text into ``text_delta`` chunks of ``chunk_size`` characters (``None``:
    the whole text in one delta) and sleeps ``chunk_delay`` seconds between chunks, after an
    initial ``first_delay`` (time before the first byte of the response, e.g. to see a spinner).
    """

    text: TextSource = ""
    chunk_size: int | None = None
    chunk_delay: float = 0.0
    first_delay: float = 0.0
    tool_uses: tuple[ToolUse, ...] = ()

    def resolve(self, body: dict[str, Any]) -> ScriptedReply:
        """This reply for `body`: a callable text may answer with a whole ScriptedReply (tool
        calls chosen by what the model was just told); it is called once."""
        if not callable(self.text):
            return self
        produced: Any = self.text(body)
        if isinstance(produced, ScriptedReply):
            return produced.resolve(body)
        return ScriptedReply(
            produced, self.chunk_size, self.chunk_delay, self.first_delay, self.tool_uses
        )

    def render(self, body: dict[str, Any]) -> str:
        text = self.text(body) if callable(self.text) else self.text
        if not isinstance(text, str):
            raise TypeError(f"scripted reply produced {type(text).__name__}, not str")
        return text

    def chunks(self, text: str) -> list[str]:
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
    kind: str  # "main" | "subagent" | "side" | "count_tokens" | "probe" | "unknown"
    reason: str = ""  # why it was classified that way
    reply_text: str | None = None
    status: int = 200
    received_at: float = field(default_factory=time.monotonic)

    # -- conveniences for assertions -------------------------------------------------------

    @property
    def model(self) -> str | None:
        return self.body.get("model") if isinstance(self.body, dict) else None

    def body_text(self) -> str:
        """Every string anywhere in the JSON body, newline-joined (what the model would see, and
        more); unlike ``raw_body`` it has no JSON escaping, so text can be searched verbatim."""
        out: list[str] = []

        def walk(v: Any) -> None:
            if isinstance(v, str):
                out.append(v)
            elif isinstance(v, list):
                for item in v:
                    walk(item)
            elif isinstance(v, dict):
                for item in v.values():
                    walk(item)

        walk(self.body)
        return "\n".join(out)

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
        return last_user_text(self.body) if isinstance(self.body, dict) else ""


def last_user_text(body: dict[str, Any]) -> str:
    """Every text of a Messages API request body's last user message (what was just typed, or
    a tool result)."""
    for m in reversed(body.get("messages") or []):
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
    """Return ``("main" | "subagent" | "side", reason)`` for a ``POST /v1/messages`` body.

    The main conversation is the agent loop: Claude Code's own system prompt ("You are Claude
    Code...") and its tool set. The requests the CLI sends by itself differ: the session-title
    request has ``"tools": []``; small-model helpers and the quota probe of older versions
    (``max_tokens`` 1) carry no tools or a tiny ``max_tokens``; anything whose system prompt is
    not Claude Code's is not the conversation either. Sub-agents (the Agent tool) run their own
    tool loop, in the background and concurrently with the main one; their system prompt's
    billing line says ``cc_is_subagent=true``, and they get their own script.
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
    if "cc_is_subagent=true" in system:
        return "subagent", f"{len(tools)} tools, sub-agent (cc_is_subagent=true)"
    return "main", f"{len(tools)} tools, Claude Code system prompt"


# -- answers for side requests -------------------------------------------------------------------


def synthesize_json(schema: Any, text: str) -> Any:
    """A small value satisfying a JSON schema (strings become ``text``)."""
    if not isinstance(schema, dict):
        return text
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return synthesize_json(schema[key][0], text)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        props = schema.get("properties") or {}
        required = schema.get("required") or list(props)
        return {name: synthesize_json(props.get(name, {}), text) for name in required}
    if kind == "array":
        n = int(schema.get("minItems") or 0)
        return [synthesize_json(schema.get("items", {}), text) for _ in range(n)]
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return text


def side_reply_text(body: Any, text: str) -> str:
    """The fixed answer, as JSON when the request asks for structured output."""
    fmt = None
    if isinstance(body, dict) and isinstance(body.get("output_config"), dict):
        fmt = body["output_config"].get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        return json.dumps(synthesize_json(fmt.get("schema"), text))
    return text


# -- the server --------------------------------------------------------------------------------


class ScriptedMessagesAPI:
    """Loopback HTTP server speaking enough of the Messages API for Claude Code.

    ``replies``: the script — strings, callables ``(request_json) -> str`` or
    :class:`ScriptedReply` — consumed in order by main-conversation requests.
    ``subagent_replies``: the script for sub-agents started with the Agent tool (they run
    concurrently with the main loop, so they cannot share its queue); when it is empty they get
    ``side_reply``.
    ``side_reply``: text for requests the CLI makes on its own (sent as schema-shaped JSON when
    the request asks for structured output, as session-title generation does).
    ``wait_for_reply``: seconds a main request waits for :meth:`add_reply` when the script is
    empty, before it is answered with ``exhausted_text`` (and recorded in ``exhausted``).
    ``classify``: override of :func:`classify_messages_request`.
    ``safeguards``: answer the auto-mode safety check (False: as a gateway that does not pass
    it through, after which Claude Code stops at "Auto mode can't check actions in this
    session" before an action that needs the check).
    """

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        subagent_replies: Iterable[Reply] = (),
        side_reply: str = SIDE_REPLY_TEXT,
        exhausted_text: str = EXHAUSTED_TEXT,
        wait_for_reply: float = 0.0,
        classify: Callable[[Any], tuple[str, str]] = classify_messages_request,
        host: str = "127.0.0.1",
        port: int = 0,
        safeguards: bool = True,
    ) -> None:
        self.safeguards = safeguards
        self._scripts: dict[str, deque[ScriptedReply]] = {
            "main": deque(_as_reply(r) for r in replies),
            "subagent": deque(_as_reply(r) for r in subagent_replies),
        }
        self.side_reply = side_reply
        self.exhausted_text = exhausted_text
        self.wait_for_reply = wait_for_reply
        self.classify = classify
        self._host = host
        self._port = port
        self._cond = threading.Condition()
        self._requests: list[RecordedRequest] = []
        self._seq = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._closing = False
        #: Main requests answered after the script ran out (tests may assert it stays empty).
        self.exhausted: list[RecordedRequest] = []
        #: Requests to paths the stand-in does not know (answered 404).
        self.unknown: list[RecordedRequest] = []
        #: Errors raised while answering (e.g. a reply callable that failed).
        self.errors: list[str] = []

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> ScriptedMessagesAPI:
        if self._server is not None:
            return self
        handler = type("_BoundHandler", (_Handler,), {"api": self})
        server = ThreadingHTTPServer((self._host, self._port), handler)
        server.daemon_threads = True
        self._server = server
        self._closing = False
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"scripted-api:{server.server_address[1]}",
            daemon=True,
        )
        self._thread.start()
        return self

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()  # release main requests waiting for a reply
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

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
        text: TextSource | ScriptedReply = "",
        *,
        chunk_size: int | None = None,
        chunk_delay: float = 0.0,
        first_delay: float = 0.0,
        tool_uses: Iterable[ToolUse] = (),
        subagent: bool = False,
    ) -> None:
        """Append a reply to the main script (or the sub-agent one); wakes a waiting request."""
        if isinstance(text, ScriptedReply):
            reply = text
        else:
            reply = ScriptedReply(text, chunk_size, chunk_delay, first_delay, tuple(tool_uses))
        with self._cond:
            self._scripts["subagent" if subagent else "main"].append(reply)
            self._cond.notify_all()

    @property
    def pending_replies(self) -> int:
        """Replies of the main script not consumed yet."""
        with self._cond:
            return len(self._scripts["main"])

    def _next_reply(self, kind: str) -> ScriptedReply | None:
        script = self._scripts[kind]
        deadline = time.monotonic() + (self.wait_for_reply if kind == "main" else 0.0)
        with self._cond:
            while not script:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._closing:
                    return None
                self._cond.wait(remaining)
            return script.popleft()

    # -- records -----------------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._cond:
            return list(self._requests)

    @property
    def main_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.kind == "main"]

    @property
    def subagent_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.kind == "subagent"]

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
        if not self.wait_for(lambda rs: sum(r.kind == "main" for r in rs) >= n, timeout):
            raise TimeoutError(
                f"expected {n} main request(s) within {timeout}s; got:\n{self.describe()}"
            )
        return self.main_requests

    def describe(self) -> str:
        """One line per recorded request (for assertion messages)."""
        return (
            "\n".join(
                f"#{r.seq} {r.method} {r.path}{'?' + r.query if r.query else ''} -> {r.status} "
                f"[{r.kind}: {r.reason}] model={r.model} reply={r.reply_text!r}"
                for r in self.requests
            )
            or "(no requests)"
        )


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _usage(body: dict[str, Any], output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": _estimate_tokens(json.dumps(body.get("messages", ""))),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }


def _safeguard_results(
    body: dict[str, Any], tool_uses: tuple[ToolUse, ...], blocks: list[dict[str, Any]]
) -> dict[str, Any]:
    """Verdicts for the auto-mode safety check (``safeguards: [{type: dangerous_tool_use}]``).

    Without them the CLI in auto mode stops at "Auto mode can't check actions in this session"
    before running e.g. the Agent tool. They ride on ``message_delta.delta.safeguard_results``.
    """
    wanted = body.get("safeguards")
    if not tool_uses or not isinstance(wanted, list):
        return {}
    if not any(isinstance(g, dict) and g.get("type") == "dangerous_tool_use" for g in wanted):
        return {}
    verdicts = {
        block["id"]: {"type": "evaluated", "outcome": "flagged" if t.flagged else "not_flagged"}
        for t, block in zip(tool_uses, blocks, strict=True)
    }
    status = {"type": "available", "tool_uses": verdicts}
    return {"safeguard_results": [{"type": "dangerous_tool_use", "status": status}]}


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


class _Handler(BaseHTTPRequestHandler):
    api: ScriptedMessagesAPI  # set on the bound subclass
    protocol_version = "HTTP/1.1"
    server_version = "ScriptedMessagesAPI/1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # -- plumbing ----------------------------------------------------------------------------

    def _read_request(self) -> RecordedRequest:
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
            kind="unknown",
        )

    def _send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", f"req_{uuid.uuid4().hex[:24]}")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self.wfile.flush()

    def _answer_other(self, req: RecordedRequest) -> None:
        if req.path == "/api/hello":  # connectivity probe (HEAD), sent without the env flag
            req.kind, req.reason = "probe", "connectivity check"
            self.api._record(req)
            self._send_json(200, {"message": "hello"})
            return
        req.kind, req.status, req.reason = "unknown", 404, "no such endpoint"
        self.api.unknown.append(req)
        self.api._record(req)
        self._send_json(404, _error("not_found_error", f"{req.method} {req.path}"))

    # -- verbs -------------------------------------------------------------------------------

    def do_GET(self) -> None:
        self._answer_other(self._read_request())

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
            self._answer_other(req)

    # -- /v1/messages ------------------------------------------------------------------------

    def _messages(self, req: RecordedRequest) -> None:
        api = self.api
        if not isinstance(req.body, dict):
            req.kind, req.status, req.reason = "unknown", 400, "body is not a JSON object"
            api._record(req)
            self._send_json(400, _error("invalid_request_error", "body must be a JSON object"))
            return
        body: dict[str, Any] = req.body
        req.kind, req.reason = api.classify(body)
        api._record(req)  # before waiting, so tests see a request whose reply is pending
        if req.kind == "main":
            reply = api._next_reply("main")
            if reply is None:
                api.exhausted.append(req)
                reply = ScriptedReply(api.exhausted_text)
        elif req.kind == "subagent":
            reply = api._next_reply("subagent") or ScriptedReply(api.side_reply)
        else:
            reply = ScriptedReply(side_reply_text(body, api.side_reply))
        try:
            reply = reply.resolve(body)
            text = reply.render(body)
        except Exception as exc:  # a broken callable must not hang the CLI
            text = f"(scripted API: reply callable failed: {exc!r})"
            api.errors.append(f"request #{req.seq}: {exc!r}")
        req.reply_text = text
        blocks: list[dict[str, Any]] = []
        if text or not reply.tool_uses:
            blocks.append({"type": "text", "text": text})
        tool_blocks = [t.block() for t in reply.tool_uses]
        blocks.extend(tool_blocks)
        stop_reason = "tool_use" if reply.tool_uses else "end_turn"
        extra = _safeguard_results(body, reply.tool_uses, tool_blocks) if api.safeguards else {}
        if reply.first_delay > 0:
            time.sleep(reply.first_delay)
        try:
            if body.get("stream"):
                self._stream(body, blocks, stop_reason, reply, extra)
            else:
                self._send_json(200, self._message(body, blocks, stop_reason) | extra)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the CLI hung up (e.g. the user pressed Esc)

    @staticmethod
    def _message(
        body: dict[str, Any], blocks: list[dict[str, Any]], stop_reason: str | None
    ) -> dict[str, Any]:
        out_tokens = _estimate_tokens(json.dumps(blocks))
        return {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model") or "claude-scripted",
            "content": blocks,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": _usage(body, out_tokens),
        }

    def _stream(
        self,
        body: dict[str, Any],
        blocks: list[dict[str, Any]],
        stop_reason: str,
        reply: ScriptedReply,
        extra: dict[str, Any],
    ) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.send_header("request-id", f"req_{uuid.uuid4().hex[:24]}")
        self.end_headers()
        self.close_connection = True

        final = self._message(body, blocks, stop_reason)
        start = dict(final, content=[], stop_reason=None)
        start["usage"] = dict(final["usage"], output_tokens=1)

        def event(name: str, data: dict[str, Any]) -> None:
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()

        event("message_start", {"type": "message_start", "message": start})
        event("ping", {"type": "ping"})
        for index, block in enumerate(blocks):

            def block_event(kind: str, index: int = index, **fields: Any) -> None:
                event(kind, {"type": kind, "index": index, **fields})

            if block["type"] == "text":
                block_event("content_block_start", content_block={"type": "text", "text": ""})
                for n, chunk in enumerate(reply.chunks(block["text"])):
                    if n and reply.chunk_delay > 0:
                        time.sleep(reply.chunk_delay)
                    block_event("content_block_delta", delta={"type": "text_delta", "text": chunk})
            else:
                block_event("content_block_start", content_block=dict(block, input={}))
                partial = json.dumps(block["input"])
                block_event(
                    "content_block_delta",
                    delta={"type": "input_json_delta", "partial_json": partial},
                )
            block_event("content_block_stop")
        delta = {"stop_reason": stop_reason, "stop_sequence": None, **extra}
        usage = {"output_tokens": final["usage"]["output_tokens"]}
        event("message_delta", {"type": "message_delta", "delta": delta, "usage": usage})
        event("message_stop", {"type": "message_stop"})
