"""Detection accuracy and latency over the corpus (tests/corpus).

    python bench/detection.py [--repeat 20]

Accuracy: every recording is replayed (engine.agents.replay) and compared with its scenario's
hand-written expectation: expected messages found, missing (false negatives), unexpected
(false positives), and whole scenarios as expected (messages, protocol errors, final state,
state order, decisive / informational signals). Three sources:

- hooks: Claude Code recordings as recorded (Stop hook + transcript, screen for dialogs);
- screen-only: the same recordings with their hook markers stripped (the fallback path);
- generic: CLIs without hooks (the screen is all there is).

Latency: a replay loop of its own feeds each recording into an AgentObserver and times, with
time.perf_counter, the observer call that turns the decisive input into events: the Stop hook
(claude; the call returns the messages and the state change), or the output chunk whose final
line completes a message (generic; timed from feeding the bytes to the terminal to the events).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from semo.engine.agents import registry
from semo.engine.agents.replay import EXIT_PREFIX, HOOK_PREFIX
from semo.engine.protocol.observer import (
    AgentObserver,
    MalformedMessage,
    MessageFound,
)
from semo.engine.protocol.state import StateChange
from semo.engine.terminal.asciicast import read_asciicast
from semo.engine.terminal.stream import make_screen_and_stream
from tests.corpus.check import CORPUS, Outcome, check_recording, load_expected, scenario_names


@dataclass
class Tally:
    scenarios: int = 0
    as_expected: int = 0
    expected: int = 0
    found: int = 0
    false_positives: int = 0
    failures: list[str] = field(default_factory=list)

    def add(self, outcome: Outcome) -> None:
        self.scenarios += 1
        self.as_expected += outcome.ok
        self.expected += outcome.expected_messages
        self.found += outcome.found
        self.false_positives += len(outcome.unexpected)
        if not outcome.ok:
            self.failures.append(f"{outcome.name}: " + "; ".join(outcome.problems()))

    def row(self, label: str) -> str:
        accuracy = 100.0 * self.found / self.expected if self.expected else 100.0
        missing = self.expected - self.found
        return (
            f"{label:<12} {self.scenarios:>9} {self.as_expected:>11}"
            f" {self.found:>5}/{self.expected:<5} {accuracy:>8.1f}%"
            f" {self.false_positives:>5} {missing:>5}"
        )


def accuracy(names: list[str]) -> dict[str, Tally]:
    tallies = {"hooks": Tally(), "screen-only": Tally(), "generic": Tally()}
    with tempfile.TemporaryDirectory() as scratch:
        for name in names:
            if load_expected(name)["agent"] == "claude":
                tallies["hooks"].add(check_recording(name))
                tallies["screen-only"].add(
                    check_recording(name, screen_only=True, scratch=Path(scratch))
                )
            else:
                tallies["generic"].add(check_recording(name))
    return tallies


def latencies(name: str) -> list[float]:
    """Seconds spent from the decisive input to the events it produces, for one replay."""
    cast = CORPUS / f"{name}.cast"
    header, events = read_asciicast(cast)
    profile = load_expected(name)["agent"]
    screen, stream = make_screen_and_stream(header.width, header.height)
    adapter = registry.adapter(profile)
    observer = AgentObserver(
        adapter.screen_reader(adapter.profile()),
        read_transcript=lambda path: adapter.recorded_turn_text(str(CORPUS / path)),
        screen=screen,
    )
    out: list[float] = []
    for event in events:
        if event.kind == "o":
            start = time.perf_counter()
            stream.feed(event.data)
            produced = observer.on_screen(screen, event.time)
            took = time.perf_counter() - start
            if profile == "generic" and any(
                isinstance(e, MessageFound | MalformedMessage) for e in produced
            ):
                out.append(took)
        elif event.kind == "r":
            width, _, height = event.data.partition("x")
            screen.resize(int(height), int(width))
        elif event.kind == "m" and event.data.startswith(HOOK_PREFIX):
            hook = json.loads(event.data.removeprefix(HOOK_PREFIX))
            start = time.perf_counter()
            produced = observer.on_hook(hook["event"], hook.get("payload") or {}, event.time)
            took = time.perf_counter() - start
            if hook["event"] == "Stop" and any(isinstance(e, StateChange) for e in produced):
                out.append(took)
        elif event.kind == "m" and event.data.startswith(EXIT_PREFIX):
            status = json.loads(event.data.removeprefix(EXIT_PREFIX))
            observer.on_exit(status.get("code"), status.get("signal"), event.time)
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[index]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=20, help="replays of the corpus (latency)")
    args = parser.parse_args()
    names = scenario_names()
    if not names:
        print("no recordings in tests/corpus (python -m tests.corpus.record)")
        return 1

    tallies = accuracy(names)
    print(f"corpus: {len(names)} recordings in {CORPUS}")
    print(
        f"{'source':<12} {'scenarios':>9} {'as expected':>11} {'found':>11} {'accuracy':>9}"
        f" {'FP':>5} {'FN':>5}"
    )
    for label, tally in tallies.items():
        print(tally.row(label))
    for label, tally in tallies.items():
        for failure in tally.failures:
            print(f"  [{label}] {failure}")

    by_profile: dict[str, list[float]] = {"claude": [], "generic": []}
    for _ in range(args.repeat):
        for name in names:
            by_profile[load_expected(name)["agent"]].extend(latencies(name))
    print(f"\nlatency, input -> events in the observer, {args.repeat} replays of the corpus")
    print(f"{'trigger':<36} {'n':>6} {'median ms':>10} {'p99 ms':>8} {'max ms':>8}")
    labels = {
        "claude": "Stop hook -> messages + state",
        "generic": "final byte -> message (screen)",
    }
    for profile, values in by_profile.items():
        if not values:
            continue
        print(
            f"{labels[profile]:<36} {len(values):>6} {statistics.median(values) * 1000:>10.3f}"
            f" {percentile(values, 99) * 1000:>8.3f} {max(values) * 1000:>8.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
