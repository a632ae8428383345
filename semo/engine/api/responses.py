"""The API's JSON responses: agent text stays escaped in every body.

FastAPI's `JSONResponse` writes `json.dumps(..., ensure_ascii=False)`: C0 controls are escaped,
but C1 controls (U+0080-U+009F, e.g. the 8-bit CSI U+009B), DEL, bidi embedding/override/isolate
controls and line separators go out raw, so an agent's question read with `curl` reached the
operator's terminal as a control. `PlainJSONResponse` escapes them as `\\uXXXX`
(`semo.engine.plain_text.plain_json`, as the CLI's `--json`): still JSON that reads back to the
exact text.
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from semo.engine.plain_text import plain_json


class PlainJSONResponse(JSONResponse):
    def render(self, content: Any) -> bytes:
        return plain_json(content, allow_nan=False, separators=(",", ":")).encode("utf-8")
