"""Permission requests: the `[approvals]` policy, a request's safe summary, rules, answers.

An agent's Claude Code asks before it runs a tool its permission mode does not allow (the
`PermissionRequest` hook, docs/PROTOCOL.md). semo turns the request into an inbox item (a
question of type ``permission``) unless a rule of ``[approvals]`` decides it first or the
operator allowed the same request for the rest of the session. This module is the pure part:

    request = PermissionRequest.from_hook(payload)      # tool + bounded, inert summary
    rule = policy.match(request, role="FE", worktree=path)   # a rule that decides, or None
    answer = parse_answer("deny: use the test database")     # Answer(decision, reason)

The reference is docs/CONFIG.md (``[approvals]``) and docs/CONSOLE.md (the inbox).
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from semo.engine.plain_text import plain

__all__ = [
    "ALLOW",
    "ALLOW_SESSION",
    "DENY",
    "PERMISSION_OPTIONS",
    "Answer",
    "ApprovalRule",
    "ApprovalsSection",
    "PermissionRequest",
    "bounded",
    "canonical_answer",
    "hook_decision",
    "parse_answer",
]

ALLOW = "allow"
ALLOW_SESSION = "allow for this session"
DENY = "deny"
#: the options of a permission item, in the order digits pick them (1, 2, 3)
PERMISSION_OPTIONS = (ALLOW, ALLOW_SESSION, DENY)

#: Longest command, path or input shown in a summary (the rest is counted, not shown).
SUMMARY_CHARS = 600
#: Longest reason sent back to the agent with a denial.
REASON_CHARS = 2000
#: A tool name as Claude Code spells them (Bash, Edit, mcp__server__tool); others are shown
#: as "unknown tool".
_TOOL_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.:-]{0,127}")
#: Bash commands holding one of these run more than the one command a rule names.
_SHELL_CONTROL = re.compile(r"[;&|`<>\n\r]|\$\(")
_PATH_TOOLS = frozenset({"Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "NotebookRead"})
_SEARCH_TOOLS = frozenset({"Glob", "Grep", "LS"})

Decision = Literal["allow", "allow_session", "deny"]


def bounded(text: str, limit: int = SUMMARY_CHARS) -> str:
    """``text`` made inert (controls visible, one line) and cut at ``limit`` characters."""
    shown = plain(text, one_line=True)
    if len(shown) <= limit:
        return shown
    return f"{shown[:limit]}… (+{len(shown) - limit} characters)"


def _lines(value: Any) -> int:
    if not isinstance(value, str) or not value:
        return 0
    return value.count("\n") + (not value.endswith("\n"))


class PermissionRequest(BaseModel):
    """What an agent asks to run: the tool, the subject (command, file, URL) and a summary.

    ``subject`` is the exact text rules and "allow for this session" match (never shown);
    ``summary`` is bounded and inert (escape sequences visible, one line): what the inbox
    shows. Built from the hook's JSON, which the agent controls."""

    model_config = ConfigDict(frozen=True)

    tool: str
    subject: str
    summary: str

    @classmethod
    def from_hook(cls, payload: dict[str, Any]) -> PermissionRequest:
        raw_tool = payload.get("tool_name")
        tool = raw_tool if isinstance(raw_tool, str) and _TOOL_NAME.fullmatch(raw_tool) else ""
        data = payload.get("tool_input")
        data = data if isinstance(data, dict) else {}
        subject, detail = _subject(tool, data)
        shown = tool or "unknown tool"
        summary = f"{shown}: {bounded(subject)}" if subject else shown
        if detail:
            summary += f" ({detail})"
        return cls(tool=tool or "?", subject=subject, summary=summary)

    def key(self) -> tuple[str, str]:
        """What "allow for this session" remembers: the same tool with the same input."""
        return (self.tool, self.subject)


def _subject(tool: str, data: dict[str, Any]) -> tuple[str, str]:
    """(the text a rule matches, a short detail: the size of the change)."""

    def text(key: str) -> str:
        value = data.get(key)
        return value if isinstance(value, str) else ""

    if tool == "Bash":
        return text("command"), ""
    if tool in _PATH_TOOLS:
        path = text("file_path") or text("notebook_path") or text("path")
        if tool == "Write":
            content = text("content")
            return path, f"{_lines(content)} lines, {len(content.encode('utf-8', 'replace'))} bytes"
        if tool == "Edit":
            return (
                path,
                f"-{_lines(data.get('old_string'))} +{_lines(data.get('new_string'))} lines",
            )
        if tool == "MultiEdit":
            edits = data.get("edits")
            return path, f"{len(edits) if isinstance(edits, list) else 0} edits"
        return path, ""
    if tool in _SEARCH_TOOLS:
        return text("path") or text("pattern"), text(
            "pattern"
        ) and f"pattern {bounded(text('pattern'), 80)}"
    if tool in ("WebFetch", "WebSearch"):
        return text("url") or text("query"), ""
    if not data:
        return "", ""
    try:
        compact = json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        compact = ""
    return compact, ""


class ApprovalRule(BaseModel):
    """One ``[[approvals.rules]]``: decide requests of ``tool`` whose subject matches
    ``pattern`` (a shell-style glob; the command for Bash, the file for file tools) for the
    agents of ``roles`` without asking anyone."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(default="", max_length=100)
    roles: list[str] = Field(default_factory=lambda: ["*"])
    tool: str = Field(min_length=1, max_length=128)
    pattern: str = Field(default="*", max_length=1000)
    #: only paths inside the agent's own worktree (file tools)
    within_worktree: bool = False
    decision: Literal["allow", "deny"]
    reason: str = Field(default="", max_length=REASON_CHARS)

    @field_validator("roles", mode="before")
    @classmethod
    def _one_role(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    def label(self) -> str:
        return self.name or f"{self.decision} {self.tool} {self.pattern}"

    def matches(self, request: PermissionRequest, role: str, worktree: Path | None) -> bool:
        if "*" not in self.roles and role not in self.roles:
            return False
        if not fnmatch.fnmatchcase(request.tool, self.tool):
            return False
        if self.decision == "allow" and request.tool == "Bash":
            # `git status*` must not allow `git status; rm -rf ~`: an allowed command is one
            # command, unless the rule itself names the operator
            extra = set(_SHELL_CONTROL.findall(request.subject))
            if extra - set(_SHELL_CONTROL.findall(self.pattern)):
                return False
        if self.within_worktree and not _inside(request.subject, worktree):
            return False
        return fnmatch.fnmatchcase(request.subject, self.pattern)


def _inside(path: str, worktree: Path | None) -> bool:
    """Whether ``path`` (resolved, symlinks followed) lies in ``worktree``."""
    if worktree is None or not path or "\x00" in path:
        return False
    target = Path(path) if os.path.isabs(path) else Path(worktree) / path
    root = os.path.realpath(worktree)
    real = os.path.realpath(target)
    return real == root or real.startswith(root.rstrip("/") + "/")


class ApprovalsSection(BaseModel):
    """``[approvals]``: how long a permission request waits, and the rules that answer it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: minutes a request waits for a person before it is denied; absent: it waits until
    #: someone answers (or the agent's session ends)
    deny_after_minutes: float | None = Field(default=None, gt=0, le=7 * 24 * 60)
    rules: list[ApprovalRule] = Field(default_factory=list)

    def match(
        self, request: PermissionRequest, role: str, worktree: Path | None
    ) -> ApprovalRule | None:
        """The first rule that decides ``request`` for an agent of ``role``, or None."""
        return next((r for r in self.rules if r.matches(request, role, worktree)), None)

    def hook_timeout(self) -> int:
        """Seconds Claude Code lets semo's PermissionRequest hook wait (past it, its own
        dialog comes up)."""
        if self.deny_after_minutes is None:
            return 7 * 24 * 3600
        return int(self.deny_after_minutes * 60) + 60


class Answer(BaseModel):
    """A person's (or a rule's) decision on a permission request."""

    model_config = ConfigDict(frozen=True)

    decision: Decision
    reason: str = ""


_ALLOW_WORDS = frozenset({"allow", "allow once", "yes", "y", "1"})
_SESSION_WORDS = frozenset(
    {ALLOW_SESSION, "allow session", "allow for session", "session", "always", "2"}
)
_DENY_WORDS = frozenset({"deny", "no", "n", "3"})


def canonical_answer(text: str) -> str:
    """The answer to store for a permission: ``allow``, ``allow for this session``, ``deny``
    or ``deny: <reason>``. ValueError for anything else (a person gets to say it again)."""
    answer = _parse(text)
    if answer is None:
        raise ValueError(
            f'a permission takes "{ALLOW}", "{ALLOW_SESSION}", "{DENY}" or "deny: <reason>"'
        )
    if answer.decision == "allow":
        return ALLOW
    if answer.decision == "allow_session":
        return ALLOW_SESSION
    return f"{DENY}: {answer.reason}" if answer.reason else DENY


def _parse(text: str) -> Answer | None:
    words = " ".join(text.split()).lower()
    if words in _ALLOW_WORDS:
        return Answer(decision="allow")
    if words in _SESSION_WORDS:
        return Answer(decision="allow_session")
    if words in _DENY_WORDS:
        return Answer(decision="deny")
    stripped = text.strip()
    head = stripped[:5].lower()
    if head == "deny:" or (head == "deny " and len(stripped) > 5):
        reason = stripped[5:].strip()
        return Answer(decision="deny", reason=reason[:REASON_CHARS])
    return None


def parse_answer(text: str | None) -> Answer:
    """The decision a stored answer means. Text no person could have meant as a permission
    (a row written around semo's checks) denies, with that text as the reason: never an
    allow by accident."""
    answer = _parse(text or "")
    if answer is not None:
        return answer
    return Answer(decision="deny", reason=(text or "").strip()[:REASON_CHARS])


def hook_decision(answer: Answer, default_reason: str) -> dict[str, Any]:
    """The PermissionRequest hook's output for Claude Code (its stdout, as JSON)."""
    if answer.decision == "deny":
        decision: dict[str, Any] = {
            "behavior": "deny",
            "message": answer.reason or default_reason,
        }
    else:
        decision = {"behavior": "allow"}
    return {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}}
