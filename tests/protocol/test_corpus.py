"""The detection corpus (tests/corpus): every recording, replayed through the pipeline, gives
exactly the messages, protocol errors, states and signals its scenario's author expected.

Recordings are made by ``python -m tests.corpus.record`` (real Claude Code, offline, with
hooks; and generic CLIs); these tests only read them. The screen-only path (Claude Code casts
with their hook markers stripped) is measured, not asserted: its score is printed (``-s``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.corpus.check import (
    cast_path,
    check_recording,
    load_expected,
    scenario_names,
)
from tests.corpus.scenarios import SCENARIOS

NAMES = scenario_names()
CLAUDE = [n for n in NAMES if load_expected(n)["agent"] == "claude"]


def test_corpus_has_at_least_40_scenarios_mostly_real_claude() -> None:
    assert len(NAMES) >= 40
    assert len(CLAUDE) > len(NAMES) / 2
    recorded = set(NAMES)
    assert {s.name for s in SCENARIOS} == recorded, "re-run python -m tests.corpus.record"


@pytest.mark.parametrize("name", NAMES)
def test_expected_json_is_the_scenario_as_written(name: str) -> None:
    scenario = next(s for s in SCENARIOS if s.name == name)
    assert load_expected(name) == json.loads(json.dumps(scenario.expected_json()))


@pytest.mark.parametrize("name", NAMES)
def test_recording_gives_what_its_author_expected(name: str) -> None:
    outcome = check_recording(name)
    assert outcome.ok, f"{name}:\n  " + "\n  ".join(outcome.problems())


@pytest.mark.parametrize("name", NAMES)
def test_asciinema_reads_the_recording(name: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "asciinema", "cat", str(cast_path(name))],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert done.stdout


def test_screen_only_path_score(tmp_path: Path) -> None:
    """Claude Code casts without hook markers: how many expectations the screen alone meets."""
    found = expected = false_positives = passed = 0
    failures: list[str] = []
    for name in CLAUDE:
        outcome = check_recording(name, screen_only=True, scratch=tmp_path)
        found += outcome.found
        expected += outcome.expected_messages
        false_positives += len(outcome.unexpected)
        if outcome.ok:
            passed += 1
        else:
            failures.append(f"{name}: " + "; ".join(outcome.problems()))
    print(
        f"\n[screen-only] {passed}/{len(CLAUDE)} scenarios fully as expected; messages found "
        f"{found}/{expected}; false positives {false_positives}\n  " + "\n  ".join(failures)
    )
    assert expected > 0
