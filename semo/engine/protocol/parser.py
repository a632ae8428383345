"""Incremental, line-oriented parser for protocol markers (grammar: docs/PROTOCOL.md).

`MarkerParser.feed()` takes text in chunks of any size and returns the messages (and errors) whose
last line is complete; `flush()` ends the reply. Every decision is a function of complete lines
(or of a line's first `HEAD_CHARS` characters), so feeding a reply char by char gives exactly what
feeding it whole gives, and each message is reported once. Memory is bounded: a line is buffered
only until it is classified, a block body only up to the 64 KiB payload limit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from enum import Enum, auto
from typing import Any

from pydantic import ValidationError

from semo.engine import safe_json
from semo.engine.protocol.messages import (
    EXCERPT_CHARS,
    MAX_PAYLOAD_BYTES,
    QUESTION_TYPES,
    ROLE_NAME_PATTERN,
    AskUser,
    DeliverResult,
    Done,
    ErrorKind,
    Invoke,
    ParseItem,
    ProtocolError,
    StepComplete,
)

MAX_INDENT = 128
"""Leading whitespace allowed before a marker or a fence; more makes the line plain text."""
HEAD_CHARS = 256
"""A line is classified from at most this many leading characters (a closing fence must fit)."""

_INDENT = re.compile(rf"\s{{0,{MAX_INDENT}}}")
_LINE_TAG = re.compile(r"\[(ASK_USER|STEP_COMPLETE|SEMO:DONE)\]")
_BLOCK_TAG = re.compile(r"\[(INVOKE|DELIVER_RESULT)(?:\]|:([^\]]{0,64})\]|(?=:))")
_CLOSE_TAG = re.compile(
    r"\[/(?:(ASK_USER|STEP_COMPLETE|SEMO:DONE)|(INVOKE|DELIVER_RESULT)(?::([^\]]{0,64}))?)\]"
)
_FENCE = re.compile(r"(`{3,}|~{3,})(.*)")
_ROLE = re.compile(rf"{ROLE_NAME_PATTERN}\Z")
_WHAT = {"ASK_USER": "question", "INVOKE": "task", "DELIVER_RESULT": "result"}


class _Mode(Enum):
    IGNORE = auto()  # the rest of this line means nothing
    ONE_LINE = auto()  # the rest of this line is a one-line payload
    BODY = auto()  # this line is (part of) the open block's body


@dataclass
class _Block:
    tag: str  # ASK_USER, INVOKE or DELIVER_RESULT
    marker: str  # the opening marker as written, e.g. "[INVOKE:BE]"
    target: str | None
    skipping: bool = False  # an error was reported; swallow the body up to the closing tag
    lines: list[str] = field(default_factory=list)
    size: int = 0  # UTF-8 bytes of "\n".join(lines)


def _nbytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _error(kind: ErrorKind, tag: str, detail: str, excerpt: str = "") -> ProtocolError:
    return ProtocolError(kind=kind, tag=tag, detail=detail, excerpt=excerpt)


def _oversize(tag: str, excerpt: str) -> ProtocolError:
    detail = (
        f"the payload of {tag} is larger than 64 KiB ({MAX_PAYLOAD_BYTES} bytes of UTF-8), so "
        "nothing was sent. Put large content in a file in your worktree and send its path instead."
    )
    return _error("oversize", tag, detail, excerpt)


def _fence_open(line: str) -> tuple[str, int] | None:
    """(fence character, run length) if `line` opens a ``` or ~~~ code fence."""
    indent = _INDENT.match(line)
    assert indent is not None
    match = _FENCE.match(line, indent.end())
    if match is None or (match.group(1)[0] == "`" and "`" in match.group(2)):
        return None
    return match.group(1)[0], len(match.group(1))


def _fence_closes(line: str, fence: tuple[str, int]) -> bool:
    run = line.strip()
    return len(run) >= fence[1] and run == fence[0] * len(run) and len(line) <= HEAD_CHARS


def _unwrap_fence(lines: list[str]) -> list[str]:
    """The lines inside a code fence that wraps the whole block body, else `lines`."""
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    if end - start >= 2:
        fence = _fence_open(lines[start])
        if fence is not None and _fence_closes(lines[end - 1], fence):
            return lines[start + 1 : end - 1]
    return lines


class MarkerParser:
    """Turns an agent's text, fed in chunks, into protocol messages and errors, each once.

    One parser reads one reply at a time: call `flush()` at the end of the reply (it reports a
    block still open as `missing_close` and resets the parser for the next reply).
    """

    def __init__(self) -> None:
        self._out: list[ParseItem] = []
        self._fence: tuple[str, int] | None = None
        self._block: _Block | None = None
        self._head: str  # the line's state: set by _reset_line
        self._reset_line()

    @property
    def in_block(self) -> bool:
        """True while a block's opening tag has been read and its closing tag has not."""
        return self._block is not None

    def feed(self, text: str) -> list[ParseItem]:
        """Read more text; returns what the lines completed by it hold, in order."""
        pos = 0
        while True:
            newline = text.find("\n", pos)
            if newline < 0:
                self._line_data(text[pos:])
                break
            if not self._skips(text, pos, newline):
                self._line_data(text[pos:newline])
                self._line_end()
            pos = newline + 1
        return self._take()

    def feed_line(self, line: str, *, cut: bool = False) -> list[ParseItem]:
        """Read one whole line (`line` holds no newline). `cut`: the line went on past `line`
        and was not kept (a screen reader's cap), so a payload on it is over the limit."""
        if not self._skips(line, 0, len(line)):
            self._line_data(line)
            if cut:
                self._cut_line(line)
            self._line_end()
        return self._take()

    def feed_lines(self, lines: list[str], cut: Collection[int] = ()) -> list[ParseItem]:
        """`feed_line` for each of `lines` (`cut`: indexes of lines that were cut). Lines that
        hold no `[`, backtick or `~` at all cannot matter outside a block: when none does, the
        batch costs three scans of its text."""
        if not cut and self._block is None and not self._head and self._mode is None:
            text = "\n".join(lines)
            if "`" not in text and "~" not in text and (self._fence or "[" not in text):
                return []
        for index, line in enumerate(lines):
            if not self._skips(line, 0, len(line)):
                self._line_data(line)
                if index in cut:
                    self._cut_line(line)
                self._line_end()
        return self._take()

    def _skips(self, text: str, start: int, end: int) -> bool:
        """Whether the complete line text[start:end] cannot matter: no line in progress, no
        block open, and its first character after the indent cannot start a marker or fence
        (outside a fence: `[`, a backtick or `~`; inside one, only a closing fence)."""
        if self._block is not None or self._head or self._mode is not None or self._cr:
            return False
        first = text[start : min(end, start + MAX_INDENT + 1)].lstrip()[:1]
        if self._fence is not None:
            return first not in ("`", "~")
        return first not in ("[", "`", "~")

    def _cut_line(self, line: str) -> None:
        if self._mode is None:
            head, self._head = self._head, ""
            self._tail_data(head[self._classify(head[:HEAD_CHARS], complete=False) :])
        if self._mode is _Mode.ONE_LINE:
            self._out.append(_oversize(self._marker, "".join(self._tail)))
            self._ignore_rest()
        elif self._mode is _Mode.BODY and self._block is not None:
            self._oversize_block()

    def flush(self) -> list[ParseItem]:
        """End of the reply: finish the last line, report an unclosed block, reset."""
        if self._head or self._mode is not None:
            self._line_end()
        block = self._block
        if block is not None:
            name = block.tag
            detail = (
                f"{block.marker} was never closed: end the block with a line holding only "
                f"[/{name}]. Nothing was sent, and everything after {block.marker} in this reply "
                "was taken as part of it, so send any later message in it again too."
            )
            self._out.append(_error("missing_close", block.marker, detail, "\n".join(block.lines)))
        self._fence = None
        self._block = None
        self._reset_line()
        return self._take()

    # -- line machinery -------------------------------------------------------------------

    def _take(self) -> list[ParseItem]:
        out, self._out = self._out, []
        return out

    def _reset_line(self) -> None:
        self._head = ""  # the line's start, until it is classified
        self._mode: _Mode | None = None
        self._tail: list[str] = []
        self._tail_bytes = 0
        self._tag = ""  # the one-line tag (ONE_LINE) ...
        self._marker: str = ""  # ... and the marker as written
        self._inline = False  # BODY: this is the rest of the opening tag's own line
        self._cr = False  # a "\r" that ends the data so far (dropped if "\n" follows)

    def _line_data(self, chunk: str) -> None:
        if self._cr and chunk:
            chunk, self._cr = "\r" + chunk, False
        if chunk.endswith("\r"):
            chunk, self._cr = chunk[:-1], True
        if not chunk:
            return
        if self._mode is not None:
            self._tail_data(chunk)
            return
        self._head += chunk
        if len(self._head) > HEAD_CHARS:
            head, self._head = self._head, ""
            self._tail_data(head[self._classify(head[:HEAD_CHARS], complete=False) :])

    def _line_end(self) -> None:
        if self._mode is None:
            head, self._head = self._head, ""
            self._tail_data(head[self._classify(head, complete=True) :])
        if self._mode is _Mode.ONE_LINE:
            self._one_line("".join(self._tail))
        elif self._mode is _Mode.BODY and self._block is not None:
            line = "".join(self._tail)
            if self._inline:
                line = line.lstrip()
            if line or not self._inline:
                block = self._block
                block.size += (1 if block.lines else 0) + _nbytes(line)
                block.lines.append(line)
        self._reset_line()

    def _tail_data(self, text: str) -> None:
        if not text or self._mode is _Mode.IGNORE:
            return
        if len(text) > MAX_PAYLOAD_BYTES:  # over the limit whatever it encodes to
            text = text[: MAX_PAYLOAD_BYTES + 1]
        self._tail.append(text)
        self._tail_bytes += _nbytes(text)
        if self._mode is _Mode.ONE_LINE and self._tail_bytes > MAX_PAYLOAD_BYTES:
            self._out.append(_oversize(self._marker, "".join(self._tail)))
            self._ignore_rest()
        elif self._mode is _Mode.BODY and self._block is not None:
            block = self._block
            if block.size + (1 if block.lines else 0) + self._tail_bytes > MAX_PAYLOAD_BYTES:
                self._oversize_block()

    def _oversize_block(self) -> None:
        block = self._block
        assert block is not None
        head: list[str] = []
        size = 0
        for part in [*block.lines, "".join(self._tail)]:
            head.append(part[:EXCERPT_CHARS])
            size += len(head[-1]) + 1
            if size > EXCERPT_CHARS:
                break
        excerpt = "\n".join(head)
        self._out.append(_oversize(block.marker, excerpt))
        block.skipping, block.lines, block.size = True, [], 0
        self._ignore_rest()

    def _ignore_rest(self) -> None:
        self._mode, self._tail, self._tail_bytes = _Mode.IGNORE, [], 0

    # -- classification -------------------------------------------------------------------

    def _classify(self, head: str, complete: bool) -> int:
        """Decide what the line starting with `head` is; returns where its payload starts."""
        self._mode = _Mode.IGNORE
        indent = _INDENT.match(head)
        assert indent is not None
        start = indent.end()
        if start < len(head) and head[start].isspace():
            start = -1  # indented too deep to be a marker or a fence
        close = _CLOSE_TAG.match(head, start) if start >= 0 else None
        if self._block is not None:
            if close is not None:
                self._close_block(close)
            elif not self._block.skipping:
                self._mode = _Mode.BODY
                return 0
            return len(head)
        if self._fence is not None:
            if complete and _fence_closes(head, self._fence):
                self._fence = None
            return len(head)
        if start < 0:
            return len(head)
        if close is not None:
            self._unexpected_close(close)
            return len(head)
        fence = _fence_open(head)
        if fence is not None:
            self._fence = fence
            return len(head)
        tag = _LINE_TAG.match(head, start)
        if tag is not None:
            self._mode, self._tag, self._marker = _Mode.ONE_LINE, tag.group(1), tag.group(0)
            return tag.end()
        tag = _BLOCK_TAG.match(head, start)
        if tag is not None:
            return self._open_block(tag, head)
        return len(head)

    def _open_block(self, tag: re.Match[str], head: str) -> int:
        name, target = tag.group(1), tag.group(2)
        if tag.group(0).endswith("]") and target is not None and _ROLE.match(target):
            self._block = _Block(name, tag.group(0), target)
            self._mode, self._inline = _Mode.BODY, True
            return tag.end()
        marker = tag.group(0) if tag.group(0).endswith("]") else head[tag.start() :].strip()[:80]
        detail = (
            f"{marker} does not name an agent: write [{name}:ROLE] where ROLE is an agent name "
            "such as BE (a letter, then up to 31 letters, digits, '_' or '-'). Nothing was sent."
        )
        self._out.append(_error("bad_target", marker, detail, head.strip()))
        self._block = _Block(name, marker, None, skipping=True)
        return len(head)

    def _close_block(self, close: re.Match[str]) -> None:
        block, self._block = self._block, None
        assert block is not None
        name, target = close.group(1) or close.group(2), close.group(3)
        mismatch = target is not None and block.target is not None and target != block.target
        if name != block.tag or mismatch:
            detail = (
                f"{close.group(0)} does not close the open {block.marker}, which must end with "
                f"a line holding only [/{block.tag}]; {block.marker} was discarded: send it again."
            )
            self._out.append(
                _error("unexpected_close", close.group(0), detail, close.string.strip())
            )
        elif not block.skipping:
            raw = "\n".join(block.lines)
            inner = "\n".join(_unwrap_fence(block.lines))
            payload = inner if inner.lstrip().startswith("{") else raw
            self._out.append(self._build(block, payload, raw))

    def _unexpected_close(self, close: re.Match[str]) -> None:
        name = close.group(1) or close.group(2)
        if name in ("STEP_COMPLETE", "SEMO:DONE"):
            detail = f"[{name}] is a one-line message with no closing tag: remove {close.group(0)}."
        else:
            detail = (
                f"{close.group(0)} closes nothing: no [{name}] block was open. The opening tag "
                "must start its own line, outside any code block; send the message again."
            )
        self._out.append(_error("unexpected_close", close.group(0), detail, close.string.strip()))

    # -- building messages ----------------------------------------------------------------

    def _one_line(self, text: str) -> None:
        payload = text.strip()
        if self._tag == "ASK_USER" and not payload:
            self._block = _Block("ASK_USER", self._marker, None)
        elif self._tag == "ASK_USER":
            self._out.append(_ask_user(self._marker, payload))
        elif self._tag == "SEMO:DONE":
            self._out.append(Done(text=payload))
        elif payload:
            self._out.append(StepComplete(text=payload))
        else:
            detail = "[STEP_COMPLETE] needs a short description of the step on the same line."
            self._out.append(_error("invalid_payload", self._marker, detail))

    def _build(self, block: _Block, payload: str, raw: str) -> ParseItem:
        text = payload.strip()
        if not text:
            what = _WHAT[block.tag]
            detail = (
                f"{block.marker} has no payload: write the {what} between {block.marker} and "
                f"[/{block.tag}]."
            )
            return _error("invalid_payload", block.marker, detail)
        if block.tag == "ASK_USER":
            return _ask_user(block.marker, text)
        assert block.target is not None
        if block.tag == "INVOKE":
            return _invoke(block.marker, block.target, text, raw)
        return _deliver_result(block.marker, block.target, text)


def _json_object(marker: str, text: str) -> dict[str, Any] | ProtocolError:
    try:
        value = safe_json.loads(text)
    except safe_json.JSONInputError as exc:
        detail = (
            f"the JSON in {marker} is not valid ({exc.detail})"
            "; nothing was sent. Write one JSON object with double-quoted keys and strings, no "
            "comments and no trailing commas, and send the message again."
        )
        return _error("bad_json", marker, detail, text)
    if not isinstance(value, dict):  # pragma: no cover - text starting with "{" parses to a dict
        detail = f"the payload of {marker} starts with '{{' but is not one JSON object."
        return _error("invalid_payload", marker, detail, text)
    return value


def _invalid(marker: str, text: str) -> Callable[[str], ProtocolError]:
    def make(problem: str) -> ProtocolError:
        detail = f"{problem} Nothing was sent; fix {marker} and send it again."
        return _error("invalid_payload", marker, detail, text)

    return make


def _ask_user(marker: str, text: str) -> ParseItem:
    if not text.startswith("{"):
        return AskUser(question=text)
    obj = _json_object(marker, text)
    if isinstance(obj, ProtocolError):
        return obj
    invalid = _invalid(marker, text)
    options = obj.get("options")
    options = [] if options is None else options
    qtype = obj.get("type", "choice" if options else "text")
    if qtype not in QUESTION_TYPES:
        detail = (
            f'"type" must be "text", "choice" or "confirm", not {json.dumps(qtype)}. '
            f"Nothing was sent; fix {marker} and send it again."
        )
        return _error("unknown_question_type", marker, detail, text)
    question = obj.get("question")
    if not isinstance(question, str) or not question.strip():
        return invalid('The JSON needs a non-empty "question" string.')
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        return invalid('"options" must be a list of strings.')
    options = [option.strip() for option in options]
    if qtype == "choice" and (
        len(options) < 2 or not all(options) or len(set(options)) != len(options)
    ):
        return invalid(
            'A "choice" question needs "options": at least 2 different, non-empty strings.'
        )
    if qtype == "confirm" and options and [o.lower() for o in options] != ["yes", "no"]:
        return invalid(
            'A "confirm" question is answered yes or no and takes no "options"; '
            'to offer other answers use "type": "choice".'
        )
    if qtype == "text" and options:
        return invalid(
            'A "text" question takes no "options"; to offer answers use "type": "choice".'
        )
    try:
        return AskUser(question=question.strip(), question_type=qtype, options=options)
    except ValidationError as exc:  # pragma: no cover - the checks above mirror the model's
        return invalid(str(exc))


def _invoke(marker: str, target: str, text: str, raw: str) -> ParseItem:
    if not text.startswith("{"):
        return Invoke(target=target, task=text, raw=raw)
    obj = _json_object(marker, text)
    if isinstance(obj, ProtocolError):
        return obj
    invalid = _invalid(marker, text)
    task, context = obj.get("task"), obj.get("context")
    if not isinstance(task, str) or not task.strip():
        return invalid('The JSON needs a non-empty "task" string.')
    if context is not None and not isinstance(context, dict):
        return invalid('"context" must be a JSON object (or left out).')
    return Invoke(target=target, task=task.strip(), context=context, raw=raw)


def _deliver_result(marker: str, recipient: str, text: str) -> ParseItem:
    if not text.startswith("{"):
        return DeliverResult(recipient=recipient, summary=text, payload=text)
    obj = _json_object(marker, text)
    if isinstance(obj, ProtocolError):
        return obj
    invalid = _invalid(marker, text)
    summary, invocation_id = obj.get("summary"), obj.get("invocation_id")
    if not isinstance(summary, str) or not summary.strip():
        return invalid('The JSON needs a non-empty "summary" string.')
    if isinstance(invocation_id, int) and not isinstance(invocation_id, bool):
        invocation_id = str(invocation_id)
    if invocation_id is not None and (not isinstance(invocation_id, str) or not invocation_id):
        return invalid('"invocation_id" must be the id string you were given (or left out).')
    return DeliverResult(
        recipient=recipient, invocation_id=invocation_id, summary=summary.strip(), payload=obj
    )


def parse_reply(text: str) -> list[ParseItem]:
    """All messages and errors in one complete reply (e.g. the Stop hook's text)."""
    parser = MarkerParser()
    return [*parser.feed(text), *parser.flush()]
