"""A pull request's title and body from a job, with every untrusted text made inert.

    title = pr_title(timeline)
    body = pr_body(timeline, diffstat, secrets=[token])

How it works: docs/JOBS.md, "A pull request's text".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from semo.engine.office.job_ops import JobTimeline
from semo.engine.plain_text import plain

__all__ = ["fenced", "pr_body", "pr_title", "redact"]

TITLE_CHARS = 120
#: One text of the body (the task, an outcome, a result) is cut to this many characters.
TEXT_CHARS = 4000
_BACKTICKS = re.compile(r"`+")
_ZWJ = "\u2060"  # word joiner: invisible, breaks `@name` and `#12` autolinks


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret (of 4 characters or more) replaced by ``[redacted]``."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[redacted]")
    return text


def fenced(text: str) -> str:
    """``text`` as a Markdown code block nothing inside of which renders: a backtick fence one
    longer than the longest backtick run in it (at least three)."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def _clean(text: str, secrets: Iterable[str]) -> str:
    text = plain(redact(text, secrets)).strip()
    return text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "…"


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def pr_title(timeline: JobTimeline, secrets: Iterable[str] = ()) -> str:
    """``semo job 1a2b3c4d: <the task's first line>``, inert and at most 120 characters."""
    job = timeline.job
    task = plain(redact(_first_line(job.task), secrets), one_line=True)
    title = f"semo job {job.id[:8]}: {task}"
    title = title if len(title) <= TITLE_CHARS else title[: TITLE_CHARS - 1] + "…"
    return title.replace("@", "@" + _ZWJ).replace("#", "#" + _ZWJ)


def _outcome(timeline: JobTimeline) -> str:
    done = [e.detail for e in timeline.entries if e.step == "done" and e.detail]
    if done:
        return done[-1]
    job = timeline.job
    return job.failure_reason or job.status


def pr_body(
    timeline: JobTimeline,
    diffstat: str,
    *,
    roles: Mapping[str, str] | None = None,
    secrets: Iterable[str] = (),
) -> str:
    """The body: the job (id, role, status), its task, its outcome, the agents' results (``roles``:
    agent id -> role) and the diffstat, every text from the job in its own inert code block."""
    secrets = list(secrets)
    job = timeline.job
    roles = {job.agent_id: job.role or "?", **(roles or {})}
    parts = [
        f"Work of semo job `{job.id}` (role {plain(job.role or '?', one_line=True)}, "
        f"{job.status}, {job.attempts} attempt(s)).",
        "",
        "**Task**",
        "",
        fenced(_clean(job.task, secrets)),
        "",
        "**Outcome**",
        "",
        fenced(_clean(_outcome(timeline), secrets)),
    ]
    delivered = [r for r in timeline.results if r.status != "cancelled"]
    if delivered:
        parts += ["", "**The agents' results**"]
        for result in delivered:
            sender = plain(roles.get(result.sender_agent_id, "an agent"), one_line=True)
            parts += [
                "",
                f"From {sender} ({result.status}):",
                "",
                fenced(_clean(result.summary, secrets)),
            ]
    parts += ["", "**Diffstat**", "", fenced(_clean(diffstat or "(no changes)", secrets)), ""]
    parts.append("Opened by semo (`semo job ship --pr`).")
    return "\n".join(parts)
