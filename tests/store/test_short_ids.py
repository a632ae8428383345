"""Short ids (engine/store/short_ids.py): a prefix names one row, or the error says why not."""

from __future__ import annotations

import pytest

from semo.engine.store.base import NotFound
from semo.engine.store.short_ids import pick

IDS = [
    "1a2b3c4d-0000-4000-8000-000000000001",
    "1a2b9999-0000-4000-8000-000000000002",
    "ffff0000-0000-4000-8000-000000000003",
]


def test_a_prefix_names_one_row() -> None:
    assert pick("1a2b3c4d", IDS, "job") == IDS[0]
    assert pick("FFFF", IDS, "job") == IDS[2]  # as typed, upper case
    assert pick(IDS[1], [], "job") == IDS[1]  # a full id is taken as it is


def test_an_ambiguous_or_unknown_prefix_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="1a2b is the start of 2 job ids"):
        pick("1a2b", IDS, "job")
    with pytest.raises(NotFound, match="no question id starts with abcd"):
        pick("abcd", IDS, "question")
    # no id's start: left to the store ("no job no-such-job")
    assert pick("no-such-job", IDS, "job") == "no-such-job"
    assert pick("1a2", IDS, "job") == "1a2"
