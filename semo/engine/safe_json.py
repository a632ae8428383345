"""Bounded JSON parsing for everything that comes from outside the engine.

How it works: docs/SECURITY.md, "Bounded JSON".
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any, Literal

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_DEPTH",
    "JSONInputError",
    "check_depth",
    "loads",
]

#: Largest accepted input unless the caller says otherwise.
DEFAULT_MAX_BYTES = 1024 * 1024

#: Deepest accepted nesting of arrays and objects unless the caller says otherwise.
DEFAULT_MAX_DEPTH = 64

Reason = Literal["too_large", "too_deep", "malformed"]

# A JSON string (unrolled loop: linear, no backtracking), or a run of anything that is neither a
# bracket nor a quote. Both are removed; brackets and stray quotes (an unterminated string) stay.
_NOT_BRACKETS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[^\[\]{}"]+', re.DOTALL)
_NOT_BRACKETS_B = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[^\[\]{}"]+', re.DOTALL)
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1, '"': 0}


class JSONInputError(ValueError):
    """JSON from outside that the engine refuses: too large, nested too deep, or not JSON.

    ``reason`` is ``"too_large"``, ``"too_deep"`` or ``"malformed"``; ``detail`` says which limit
    was hit or what is wrong (``"nested deeper than 64 levels"``, ``"Expecting ',' delimiter,
    line 1 column 8"``), and the message is a sentence fit for the sender built from both.
    """

    def __init__(self, reason: Reason, detail: str) -> None:
        message = f"not valid JSON: {detail}" if reason == "malformed" else f"JSON {detail}"
        super().__init__(message)
        self.reason: Reason = reason
        self.detail = detail


def _byte_length(text: str | bytes | bytearray, limit: int) -> int:
    if not isinstance(text, str):
        return len(text)
    if len(text) > limit or len(text) * 4 <= limit:
        return len(text)  # over in characters already, or under even at 4 bytes each
    return len(text.encode("utf-8", "surrogatepass"))


def check_depth(text: str | bytes | bytearray, max_depth: int = DEFAULT_MAX_DEPTH) -> None:
    """Raise :class:`JSONInputError` if ``text`` nests arrays/objects deeper than ``max_depth``.

    Linear in ``len(text)`` and never recursive. Brackets inside JSON strings do not count. For
    text that is not JSON the answer is only an estimate, and parsing it fails anyway.
    """
    if isinstance(text, str):
        if text.count("[") + text.count("{") <= max_depth:
            return  # not that many brackets even counting those in strings
        brackets = _NOT_BRACKETS.sub("", text)
    else:
        if text.count(b"[") + text.count(b"{") <= max_depth:
            return
        # what is left is brackets and stray quotes: ASCII
        brackets = _NOT_BRACKETS_B.sub(b"", text).decode("ascii")
    if brackets.count("[") + brackets.count("{") <= max_depth:
        return
    deepest = max(accumulate(map(_STEP.__getitem__, brackets)))
    if deepest > max_depth:
        raise JSONInputError("too_deep", f"nested deeper than {max_depth} levels")


def loads(
    text: str | bytes | bytearray,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Any:
    """``json.loads`` for input from outside: size and depth checked first, one error type.

    Raises :class:`JSONInputError` when ``text`` is over ``max_bytes`` (UTF-8 bytes), nests
    arrays/objects deeper than ``max_depth``, is not UTF-8 (bytes), or is not JSON (including
    integers longer than Python converts). Never raises :class:`RecursionError`.
    """
    size = _byte_length(text, max_bytes)
    if size > max_bytes:
        raise JSONInputError("too_large", f"larger than {max_bytes} bytes ({size} bytes)")
    check_depth(text, max_depth)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        detail = f"{exc.msg}, line {exc.lineno} column {exc.colno}"
        raise JSONInputError("malformed", detail) from None
    except UnicodeDecodeError as exc:
        raise JSONInputError("malformed", f"not UTF-8 ({exc.reason})") from None
    except RecursionError:  # pragma: no cover - the depth check comes first
        raise JSONInputError("too_deep", f"nested deeper than {max_depth} levels") from None
    except ValueError as exc:  # e.g. an integer with more digits than int() converts
        raise JSONInputError("malformed", str(exc).split(";")[0]) from None
