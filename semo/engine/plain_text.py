"""Text from outside (agents, the store) made safe to show on a terminal or in a log.

    print(plain(question.question))            # C0/C1 controls made visible, \\n and \\t kept
    cell = plain(question.question, one_line=True)   # \\n and \\t made visible too
    print(plain_json(rows, indent=2))           # JSON whose strings carry no raw control

How it works: docs/SECURITY.md, "Plain text".
"""

from __future__ import annotations

import json
import re
from typing import Any

#: C0 controls except \\t and \\n, DEL, C1 controls, bidi embeddings/overrides/isolates and
#: marks, line/paragraph separators, lone surrogates.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
    "\ud800-\udfff]"
)
_UNSAFE_ONE_LINE = re.compile(_UNSAFE.pattern[:-1] + "\t\n]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def plain(text: str, *, one_line: bool = False) -> str:
    """`text` with every control character (C0 but tab and newline, DEL, C1), bidi control,
    line/paragraph separator and lone surrogate made visible as its escape (`ESC` -> `\\x1b`).
    With `one_line`, tab and newline are made visible too (a table cell, a title)."""
    pattern = _UNSAFE_ONE_LINE if one_line else _UNSAFE
    if pattern.search(text) is None:
        return text
    return pattern.sub(_visible, text)


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def plain_json(value: Any, **kwargs: Any) -> str:
    """`json.dumps(value, ensure_ascii=False, **kwargs)` with DEL, C1, bidi controls, separators
    and lone surrogates escaped as `\\uXXXX` (json.dumps already escapes C0)."""
    text = json.dumps(value, ensure_ascii=False, **kwargs)
    # outside strings a JSON text is ASCII, so every match is inside a string
    return _UNSAFE.sub(_json_escape, text)
