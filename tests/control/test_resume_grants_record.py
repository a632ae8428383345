"""The "allow for this session" grants read back from the record of a killed engine's
conversations (engine/control/resume.py): only (tool, input) pairs of strings are kept."""

from __future__ import annotations

from semo.engine.control.resume import MAX_GRANTS, grants_of


def test_only_well_formed_pairs_are_kept() -> None:
    entry = {
        "grants": [
            ["Bash", "touch a.txt"],
            ["Bash"],
            ["Bash", 3],
            "Bash touch b.txt",
            ["", "x"],
            ["T" * 129, "x"],
            ["Edit", "/w/a.py", "extra"],
            ["Edit", "/w/a.py"],
        ]
    }
    assert grants_of(entry) == [("Bash", "touch a.txt"), ("Edit", "/w/a.py")]
    assert grants_of({}) == [] and grants_of({"grants": {"Bash": "x"}}) == []
    many = {"grants": [["Bash", str(n)] for n in range(MAX_GRANTS + 10)]}
    assert len(grants_of(many)) == MAX_GRANTS
