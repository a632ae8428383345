"""Protocol markers as a scripted agent prints them (docs/PROTOCOL.md), for routing tests."""

from __future__ import annotations

import json
from typing import Any


def ask(question: str, *options: str) -> str:
    body = {"type": "choice", "question": question, "options": list(options)}
    return f"[ASK_USER]\n{json.dumps(body)}\n[/ASK_USER]"


def invoke(target: str, task: str, **context: Any) -> str:
    body = {"task": task, "context": context} if context else {"task": task}
    return f"[INVOKE:{target}]\n{json.dumps(body)}\n[/INVOKE]"
