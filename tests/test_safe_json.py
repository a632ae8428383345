"""semo.engine.safe_json: bounded JSON for input from outside (size, depth, one error type)."""

from __future__ import annotations

import json

import pytest

from semo.engine.safe_json import JSONInputError, check_depth, loads


def test_valid_json_parses_like_json_loads() -> None:
    text = '{"a": [1, 2.5, {"b": "[[[{{{ not brackets \\" ]]"}], "c": null, "d": true}'
    assert loads(text) == json.loads(text)
    assert loads(text.encode()) == json.loads(text)


def test_depth_at_the_limit_is_accepted_and_one_more_is_refused() -> None:
    assert loads("[" * 64 + "]" * 64, max_depth=64) is not None
    with pytest.raises(JSONInputError) as info:
        loads("[" * 65 + "]" * 65, max_depth=64)
    assert info.value.reason == "too_deep"
    assert str(info.value) == "JSON nested deeper than 64 levels"


def test_many_brackets_side_by_side_are_not_deep() -> None:
    text = json.dumps([[i, {"k": [i]}] for i in range(10_000)])
    assert len(loads(text, max_depth=4)) == 10_000
    with pytest.raises(JSONInputError):
        loads(text, max_depth=3)


@pytest.mark.parametrize("depth", [1_000, 100_000, 1_000_000])
def test_very_deep_nesting_is_a_clear_error_not_a_recursion_error(depth: int) -> None:
    for text in ("[" * depth, '{"a":' * depth + "1" + "}" * depth):
        with pytest.raises(JSONInputError, match="nested deeper than 64 levels"):
            loads(text, max_bytes=10 * depth)


def test_brackets_inside_strings_do_not_count() -> None:
    text = json.dumps({"s": "[" * 10_000, "t": '\\"' + "{" * 500})
    check_depth(text, 1)
    assert loads(text)["s"] == "[" * 10_000


def test_size_is_counted_in_utf8_bytes() -> None:
    text = json.dumps("é" * 600, ensure_ascii=False)  # 602 characters, 1202 bytes
    assert loads(text, max_bytes=1202) == "é" * 600
    with pytest.raises(JSONInputError) as info:
        loads(text, max_bytes=1201)
    assert info.value.reason == "too_large"


@pytest.mark.parametrize(
    "text",
    ['{"a": 1', "", "not json", b"\xff\x00\xfe", "1" * 5000, '{"a": 1} trailing'],
)
def test_everything_else_wrong_is_the_same_error_type(text: str | bytes) -> None:
    with pytest.raises(JSONInputError) as info:
        loads(text)
    assert info.value.reason == "malformed"
    assert isinstance(info.value, ValueError)
