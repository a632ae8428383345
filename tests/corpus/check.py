"""Compare what the pipeline finds in a corpus recording with the scenario's expectation.

Used by tests/protocol/test_corpus.py and bench/detection.py. Only reads files: recording is
tests/corpus/record.py's job.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from semo.engine.agents.replay import HOOK_PREFIX, describe_event, replay
from semo.engine.protocol.monitor import Signal
from semo.engine.protocol.observer import MalformedMessage, MessageFound, ObserverEvent
from semo.engine.protocol.state import AgentState, StateChange

CORPUS = Path(__file__).resolve().parent
#: Marker written by the recorder right before it shuts the agent down.
END_MARKER = "corpus:end"


def expected_files() -> list[Path]:
    return sorted(CORPUS.glob("*.expected.json"))


def load_expected(name: str) -> dict[str, Any]:
    return json.loads((CORPUS / f"{name}.expected.json").read_text(encoding="utf-8"))


def cast_path(name: str) -> Path:
    return CORPUS / f"{name}.cast"


def scenario_names() -> list[str]:
    return [p.name.removesuffix(".expected.json") for p in expected_files()]


def strip_hooks(cast: Path, out: Path) -> Path:
    """A copy of `cast` without its hook markers (the screen-only path), next to `out`'s
    transcripts: `out` must be in a folder of its own (nothing refers to transcripts then)."""
    lines = cast.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [lines[0]]
    for line in lines[1:]:
        event = json.loads(line)
        if event[1] == "m" and str(event[2]).startswith(HOOK_PREFIX):
            continue
        kept.append(line)
    out.write_text("".join(kept), encoding="utf-8")
    return out


def message_matches(found: dict[str, Any], expected: dict[str, Any]) -> bool:
    return all(found.get(key) == value for key, value in expected.items())


def end_time(cast: Path) -> float | None:
    """When the recorder started shutting the agent down (its END_MARKER), if marked."""
    for line in cast.read_text(encoding="utf-8").splitlines()[1:]:
        at, kind, data = json.loads(line)
        if kind == "m" and data == END_MARKER:
            return float(at)
    return None


def final_state(events: list[ObserverEvent], end: float | None = None) -> str:
    """The state when the scenario's last turn was over: at the END_MARKER, or else before the
    session was shut down (SessionEnd hook, or the process ending)."""
    state = AgentState.CREATING
    for event in events:
        if not isinstance(event, StateChange):
            continue
        if end is not None and event.at > end:
            break
        if event.source == "process" or event.state == AgentState.TERMINATED:
            break
        state = event.state
    return str(state)


@dataclass
class Outcome:
    """One recording replayed and compared (lists hold what went wrong; empty = as expected)."""

    name: str
    expected_messages: int
    found: int = 0  # expected messages found
    missing: list[dict[str, Any]] = field(default_factory=list)  # false negatives
    unexpected: list[dict[str, Any]] = field(default_factory=list)  # false positives
    error_mismatch: str = ""
    state_mismatch: str = ""
    sequence_mismatch: str = ""
    signal_problems: list[str] = field(default_factory=list)
    events: list[ObserverEvent] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.missing
            or self.unexpected
            or self.error_mismatch
            or self.state_mismatch
            or self.sequence_mismatch
            or self.signal_problems
        )

    def problems(self) -> list[str]:
        out = [f"missing message {m}" for m in self.missing]
        out += [f"unexpected message {m}" for m in self.unexpected]
        out += [p for p in (self.error_mismatch, self.state_mismatch, self.sequence_mismatch) if p]
        return out + self.signal_problems


def compare(
    name: str, expected: dict[str, Any], events: list[ObserverEvent], end: float | None = None
) -> Outcome:
    outcome = Outcome(name, len(expected["messages"]), events=events)
    found = [describe_event(e) for e in events if isinstance(e, MessageFound)]
    left = list(found)
    for want in expected["messages"]:
        match = next((f for f in left if message_matches(f, want)), None)
        if match is None:
            outcome.missing.append(want)
        else:
            left.remove(match)
            outcome.found += 1
    outcome.unexpected = [{k: v for k, v in f.items() if k not in ("at", "type")} for f in left]
    errors = [e.error.kind for e in events if isinstance(e, MalformedMessage)]
    if errors != expected["errors"]:
        outcome.error_mismatch = f"protocol errors {errors}, expected {expected['errors']}"
    state = final_state(events, end)
    if state != expected["final_state"]:
        outcome.state_mismatch = f"final state {state}, expected {expected['final_state']}"
    states = [str(e.state) for e in events if isinstance(e, StateChange)]
    if not _subsequence(expected["state_sequence"], states):
        outcome.sequence_mismatch = (
            f"states {states} do not contain {expected['state_sequence']} in order"
        )
    signals = [e for e in events if isinstance(e, Signal)]
    for pattern in expected["decisive"]:
        if not any(s.pattern == pattern and s.decisive for s in signals):
            outcome.signal_problems.append(f"no decisive {pattern} signal")
    for pattern in expected["not_decisive"]:
        bad = [s for s in signals if s.pattern == pattern and s.decisive]
        if bad:
            outcome.signal_problems.append(
                f"{pattern} reported as decisive ({bad[0].source}): {bad[0].text!r}"
            )
    return outcome


def _subsequence(want: list[str], have: list[str]) -> bool:
    it = iter(have)
    return all(any(h == w for h in it) for w in want)


def check_recording(
    name: str, *, screen_only: bool = False, scratch: Path | None = None
) -> Outcome:
    """Replay one recording (with its hooks, or without them: `screen_only`) and compare."""
    expected = load_expected(name)
    cast = cast_path(name)
    if screen_only:
        if scratch is None:
            raise ValueError("screen_only needs a scratch folder")
        cast = strip_hooks(cast, scratch / cast.name)
        result = replay(cast, profile=expected["agent"])
    else:
        result = replay(cast)
    return compare(name, expected, result.events, end_time(cast))
