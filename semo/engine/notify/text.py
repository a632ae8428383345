"""Untrusted text made inert for a notification: bounded, one line, no controls, no secrets.

Agents write the questions, errors and summaries that notifications carry (docs/SECURITY.md):
`clean` removes every control character (C0, DEL, C1: so no escape sequence, no CR/LF for a
mail header), bidi controls, separators and lone surrogates, folds whitespace runs to one
space and cuts the result to a bound. `slack_text` also escapes Slack's markup (`&`, `<`, `>`:
no `<!channel>`, `<@U1>` or `<url|label>`), breaks `@here`-style mentions and defangs bare
links so that a chat shows them as text. `redact` replaces known secrets by `***`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from semo.engine.logs import MIN_SECRET

#: C0 and C1 controls, DEL, bidi embeddings/overrides/isolates and marks, line/paragraph
#: separators, zero-width characters, lone surrogates
_CONTROLS = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]+"
)
_SPACES = re.compile(r"\s+")
_MENTION = re.compile(r"@(?=(here|channel|everyone|all)\b)", re.IGNORECASE)
_LINK = re.compile(r"\b([a-z][a-z0-9+.-]{1,15})://", re.IGNORECASE)


def clean(text: object, limit: int) -> str:
    """`text` as one line of at most `limit` characters (an ellipsis when cut): controls
    removed (whitespace controls become a space), whitespace runs folded, ends stripped."""
    value = str(text)
    value = value.replace("\r", " ").replace("\n", " ").replace("\t", " ")
    value = _CONTROLS.sub("", value)
    value = _SPACES.sub(" ", value).strip()
    if len(value) > limit:
        value = value[: max(0, limit - 1)].rstrip() + "…"
    return value


def slack_text(text: str) -> str:
    """Already `clean` text made inert in Slack's mrkdwn: `&<>` escaped, `@here`, `@channel`,
    `@everyone` broken (a fullwidth ＠), `scheme://` defanged to `scheme[:]//`."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MENTION.sub("＠", text)
    return _LINK.sub(r"\1[:]//", text)


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with each secret (of at least MIN_SECRET characters) replaced by `***`."""
    for secret in secrets:
        if len(secret) >= MIN_SECRET and secret in text:
            text = text.replace(secret, "***")
    return text
