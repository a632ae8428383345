"""`semo parse`: replays a recording through the pipeline and prints what it found."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def semo(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "semo.engine.cli", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=60,
    )


def test_parse_prints_messages_signals_and_states():
    result = semo("parse", str(CORPUS / "ask_user_block_choice.cast"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(" message  ask_user " in line and "[model_text]" in line for line in lines)
    assert any(" state    waiting_input " in line for line in lines)


def test_parse_json_from_stdin_matches_the_file():
    path = CORPUS / "ask_user_block_choice.cast"
    from_file = semo("parse", "--json", str(path)).stdout
    from_stdin = semo("parse", "--json", "-", stdin=path.read_text()).stdout
    events = [json.loads(line) for line in from_file.splitlines()]
    (ask,) = [e for e in events if e["type"] == "message"]
    assert ask["kind"] == "ask_user" and ask["question_type"] == "choice"
    assert from_stdin.replace(str(path.parent), "") == from_file.replace(str(path.parent), "")


def test_parse_generic_profile_on_a_generic_recording():
    result = semo("parse", "--json", "--profile", "generic", str(CORPUS / "gen_split_writes.cast"))
    kinds = [json.loads(line).get("kind") for line in result.stdout.splitlines()]
    assert "ask_user" in kinds


def test_parse_bad_input_is_a_clear_error(tmp_path):
    missing = semo("parse", str(tmp_path / "nope.cast"))
    assert missing.returncode == 2 and "no such file" in missing.stderr
    bad = tmp_path / "bad.cast"
    bad.write_text('{"version": 2, "width": 80, "height": 24}\n[0.1, "o"\n')
    broken = semo("parse", str(bad))
    assert broken.returncode == 2 and "line 2" in broken.stderr
    assert "Traceback" not in missing.stderr + broken.stderr
