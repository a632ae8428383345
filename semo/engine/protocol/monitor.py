"""Completion and error patterns (seed 004) as signals with priorities and a source.

A signal is evidence, not a verdict: `[SEMO:DONE]` in the model's own text ends a job, while
"All tests passed" printed by a tool (or a `grep` that shows the pattern) only informs. Each
signal says where its line was seen so the job logic can weigh it (`Signal.decisive`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

SignalKind = Literal["completion", "error", "stale"]
Source = Literal["model_text", "tool_output", "screen"]
DEFAULT_PROMPT_PATTERN = r"(^|\s)([\w.]+-\d+(\.\d+)*|[\w.-]+@[\w.-]+:\S*)?[❯$#>%]$"
"""Matched against the cursor row, right-trimmed: `$`, `>`, `❯` after a blank or alone, bash's
default `bash-5.2#` / `sh-5.2$` and Debian's `user@host:~/dir$` (glued to the sign)."""
DEFAULT_STALE_AFTER = 30.0
"""Seconds a busy agent may print nothing before it is reported `stale`."""


@dataclass(frozen=True)
class Pattern:
    name: str
    kind: SignalKind
    priority: int
    regex: re.Pattern[str]


PATTERNS: tuple[Pattern, ...] = (
    # as in the protocol: the marker counts only at the start of a line
    Pattern("semo_done", "completion", 100, re.compile(r"^\s*\[SEMO:DONE\]")),
    Pattern("pull_request", "completion", 80, re.compile(r"Created pull request #(\d+)", re.I)),
    Pattern("commit", "completion", 60, re.compile(r"\[main [a-f0-9]{7}\] .+")),
    Pattern("tests_passed", "completion", 50, re.compile(r"All tests passed", re.I)),
    Pattern("build_ok", "completion", 50, re.compile(r"Build completed successfully", re.I)),
    Pattern("enoent", "error", 90, re.compile(r"ENOENT:")),
    Pattern("permission_denied", "error", 85, re.compile(r"Permission denied", re.I)),
    Pattern("fatal", "error", 70, re.compile(r"fatal:", re.I)),
    Pattern("error", "error", 40, re.compile(r"Error:", re.I)),
)


_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_FENCE_CHARS = ("`", "~")
#: Every pattern above contains one of these literals; a text whose case-folded form holds
#: none of them has no signal, so most lines and batches cost a few C-level substring scans.
_LITERALS = (
    "[semo:done]",
    "created pull request #",
    "[main ",
    "all tests passed",
    "build completed successfully",
    "enoent:",
    "permission denied",
    "fatal:",
    "error:",
)

#: The literals grouped by a character each of them contains: one memchr-fast check for that
#: character skips the group (a substring scan for a short literal like `error:` costs about
#: as much as the case folding; most output has no `#` or `[`, much has no `:`).
_GATED_LITERALS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (":", ("[semo:done]", "enoent:", "fatal:", "error:")),
    ("[", ("[main ",)),
    ("#", ("created pull request #",)),
    ("", ("all tests passed", "build completed successfully", "permission denied")),
)


def _may_match(text: str) -> bool:
    """False only if no pattern can match `text`. Case folding covers what `re.I` equates,
    but for U+0130/U+0131 (an `i` to re.I, `i̇`/`ı` once folded)."""
    folded = text.casefold()
    if "\u0131" in folded or "\u0307" in folded:
        folded = folded.replace("\u0131", "i").replace("\u0307", "")
    return any(
        gate in folded and any(literal in folded for literal in group)
        for gate, group in _GATED_LITERALS
    )


@dataclass(frozen=True)
class Signal:
    kind: SignalKind
    pattern: str
    priority: int
    source: Source
    text: str
    at: float

    @property
    def decisive(self) -> bool:
        """Only the agent's own words can finish or fail a job; tool output merely informs."""
        return self.source != "tool_output"


def scan_line(line: str, source: Source, at: float) -> list[Signal]:
    """Signals in one line, highest priority first; one per pattern family (completion/error)."""
    if not _may_match(line):
        return []
    found: dict[SignalKind, Signal] = {}
    for pattern in PATTERNS:
        if pattern.kind in found:
            continue
        if pattern.regex.search(line):
            found[pattern.kind] = Signal(
                pattern.kind, pattern.name, pattern.priority, source, line.strip()[:200], at
            )
    return sorted(found.values(), key=lambda s: -s.priority)


class OutputMonitor:
    """Scans lines for signals and reports `stale` when output stops for `stale_after` seconds.

    `stale` is reported once per quiet period and never as a completion: a silent agent may be
    thinking, stuck, or done; the caller decides.
    """

    def __init__(self, stale_after: float = DEFAULT_STALE_AFTER) -> None:
        if stale_after <= 0:
            raise ValueError(f"stale_after must be > 0 seconds, got {stale_after}")
        self.stale_after = stale_after
        self.last_activity: float | None = None
        self._stale_reported = False

    @property
    def stale(self) -> bool:
        """`stale` was reported and nothing has happened since."""
        return self._stale_reported

    def activity(self, at: float) -> None:
        self.last_activity = at
        self._stale_reported = False

    def scan(self, lines: list[str], source: Source, at: float) -> list[Signal]:
        """Signals in `lines`; lines inside ``` / ~~~ fences are quotes and are skipped."""
        signals: list[Signal] = []
        fence: str | None = None
        for line in lines:
            opener = _FENCE.match(line) if line.lstrip()[:1] in _FENCE_CHARS else None
            if opener:
                mark = opener.group(1)
                if fence is None:
                    fence = mark
                elif mark[0] == fence[0] and len(mark) >= len(fence):
                    fence = None
                continue
            if fence is None:
                signals.extend(scan_line(line, source, at))
        return signals

    def scan_each(self, lines: list[str], source: Source, at: float) -> list[Signal]:
        """Signals in `lines` taken one by one (a fence line itself is skipped; fences do not
        span lines): what `scan([line])` gives for each, with one prefilter for the batch."""
        if not lines or not _may_match("\n".join(lines)):
            return []
        signals: list[Signal] = []
        for line in lines:
            if line.lstrip()[:1] in _FENCE_CHARS and _FENCE.match(line):
                continue
            signals.extend(scan_line(line, source, at))
        return signals

    def check_stale(self, now: float, *, busy: bool) -> Signal | None:
        """A `stale` signal if the agent is busy and nothing happened for `stale_after` s."""
        if not busy or self.last_activity is None or self._stale_reported:
            return None
        quiet = now - self.last_activity
        if quiet < self.stale_after:
            return None
        self._stale_reported = True
        return Signal("stale", "no_output", 10, "screen", f"no output for {quiet:.0f} s", now)
