from __future__ import annotations

import json
import re
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from semo.engine.protocol.messages import (
    EXCERPT_CHARS,
    MAX_PAYLOAD_BYTES,
    AskUser,
    DeliverResult,
    Done,
    Invoke,
    ParseItem,
    ProtocolError,
    ProtocolMessage,
    StepComplete,
)
from semo.engine.protocol.parser import HEAD_CHARS, MAX_INDENT, MarkerParser, parse_reply

PROTOCOL_MD = Path(__file__).resolve().parents[2] / "docs" / "PROTOCOL.md"


def kinds(items: list[ParseItem]) -> list[str]:
    return [f"error:{i.kind}" if isinstance(i, ProtocolError) else i.kind for i in items]


def feed_chunks(chunks: list[str]) -> list[ParseItem]:
    parser = MarkerParser()
    out: list[ParseItem] = []
    for chunk in chunks:
        out += parser.feed(chunk)
    return out + parser.flush()


def one(text: str) -> ParseItem:
    items = parse_reply(text)
    assert len(items) == 1, items
    return items[0]


def error(text: str) -> ProtocolError:
    item = one(text)
    assert isinstance(item, ProtocolError), item
    assert item.detail and len(item.excerpt) <= EXCERPT_CHARS
    return item


# -- every message in every form ------------------------------------------------------------


def test_ask_user_one_line() -> None:
    assert one("[ASK_USER] Which database should I use?\n") == AskUser(
        question="Which database should I use?", question_type="text", options=[]
    )


def test_ask_user_block_choice() -> None:
    text = (
        "[ASK_USER]\n"
        '{"type": "choice", "question": "Which DB?", "options": ["postgres", "sqlite"]}\n'
        "[/ASK_USER]\n"
    )
    assert one(text) == AskUser(
        question="Which DB?", question_type="choice", options=["postgres", "sqlite"]
    )


def test_ask_user_block_confirm_has_implicit_yes_no() -> None:
    item = one('[ASK_USER]\n{"type": "confirm", "question": "Drop it?"}\n[/ASK_USER]')
    assert item == AskUser(question="Drop it?", question_type="confirm", options=["yes", "no"])


def test_ask_user_block_text_json_and_multiline_free_text() -> None:
    assert one('[ASK_USER]\n{"type": "text", "question": "Name?"}\n[/ASK_USER]') == AskUser(
        question="Name?"
    )
    item = one("[ASK_USER]\nWhich port?\nThe default 8080 is taken.\n[/ASK_USER]")
    assert item == AskUser(question="Which port?\nThe default 8080 is taken.")


def test_ask_user_type_defaults() -> None:
    item = one('[ASK_USER]\n{"question": "Pick", "options": ["a", "b"]}\n[/ASK_USER]')
    assert isinstance(item, AskUser) and item.question_type == "choice"
    item = one('[ASK_USER]\n{"question": "Why?"}\n[/ASK_USER]')
    assert isinstance(item, AskUser) and item.question_type == "text"


def test_ask_user_one_line_json_payload() -> None:
    item = one('[ASK_USER] {"type": "choice", "question": "Q?", "options": ["x", "y"]}')
    assert item == AskUser(question="Q?", question_type="choice", options=["x", "y"])


def test_ask_user_json_pretty_printed_over_lines() -> None:
    text = (
        '[ASK_USER]\n{\n  "type": "choice",\n  "question": "Q",\n'
        '  "options": ["a", "b"]\n}\n[/ASK_USER]'
    )
    assert one(text) == AskUser(question="Q", question_type="choice", options=["a", "b"])


def test_invoke_json() -> None:
    body = '{"task": "Add /health endpoint", "context": {"files": ["api.py"], "n": 1}}'
    item = one(f"[INVOKE:BE]\n{body}\n[/INVOKE]\n")
    assert item == Invoke(
        target="BE",
        task="Add /health endpoint",
        context={"files": ["api.py"], "n": 1},
        raw=body,
    )


def test_invoke_free_text_keeps_raw() -> None:
    item = one("[INVOKE:QA]\n  Run the tests.\n\n  Report failures.\n[/INVOKE]")
    assert item == Invoke(
        target="QA",
        task="Run the tests.\n\n  Report failures.",
        context=None,
        raw="  Run the tests.\n\n  Report failures.",
    )


def test_invoke_without_context_and_role_names() -> None:
    item = one('[INVOKE:be-2_x]\n{"task": "t"}\n[/INVOKE]')
    assert item == Invoke(target="be-2_x", task="t", context=None, raw='{"task": "t"}')
    name = "A" + "b" * 31
    assert isinstance(one(f"[INVOKE:{name}]\nx\n[/INVOKE]"), Invoke)


def test_invoke_text_after_opening_tag_is_first_body_line() -> None:
    item = one("[INVOKE:BE] Add the endpoint\nwith tests\n[/INVOKE]")
    assert isinstance(item, Invoke) and item.task == "Add the endpoint\nwith tests"


def test_deliver_result_json() -> None:
    body = '{"invocation_id": "inv-1", "summary": "done", "files": ["a.py"]}'
    item = one(f"[DELIVER_RESULT:FE]\n{body}\n[/DELIVER_RESULT]")
    assert item == DeliverResult(
        recipient="FE", invocation_id="inv-1", summary="done", payload=json.loads(body)
    )


def test_deliver_result_free_text_and_integer_id() -> None:
    item = one("[DELIVER_RESULT:FE]\nAll green.\n[/DELIVER_RESULT]")
    assert item == DeliverResult(
        recipient="FE", invocation_id=None, summary="All green.", payload="All green."
    )
    item = one('[DELIVER_RESULT:FE]\n{"invocation_id": 7, "summary": "ok"}\n[/DELIVER_RESULT]')
    assert isinstance(item, DeliverResult) and item.invocation_id == "7"


def test_step_complete_and_done() -> None:
    assert one("[STEP_COMPLETE] migrations written") == StepComplete(text="migrations written")
    assert one("[SEMO:DONE]") == Done(text="")
    assert one("[SEMO:DONE] all tests pass  \n") == Done(text="all tests pass")
    assert one("[SEMO:DONE]. Bye") == Done(text=". Bye")


def test_leading_whitespace_allowed() -> None:
    assert one("   \t[SEMO:DONE]") == Done()
    assert isinstance(one("  [INVOKE:BE]\n  task\n  [/INVOKE]"), Invoke)
    assert parse_reply(" " * (MAX_INDENT + 1) + "[SEMO:DONE]") == []
    assert parse_reply(" " * MAX_INDENT + "[SEMO:DONE]") == [Done()]


def test_several_messages_in_one_reply_in_order() -> None:
    reply = (
        "I'll start.\n"
        "[STEP_COMPLETE] read the code\n"
        "[INVOKE:BE]\n"
        '{"task": "x"}\n'
        "[/INVOKE]\n"
        "Some prose in between.\n"
        "[ASK_USER] Which port?\n"
        "[DELIVER_RESULT:FE]\nok\n[/DELIVER_RESULT]\n"
        "[SEMO:DONE]"
    )
    assert kinds(parse_reply(reply)) == [
        "step_complete",
        "invoke",
        "ask_user",
        "deliver_result",
        "done",
    ]


# -- what is not a message ------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "Done: [SEMO:DONE]",
        "- [SEMO:DONE]",
        "> [SEMO:DONE]",
        "`[SEMO:DONE]`",
        "**[SEMO:DONE]**",
        "I will [ASK_USER] later",
        "see [INVOKE:BE] below",
        "[semo:done]",
        "[SEMO:DONE",
        "[INVOKES]",
        "[ASK_USER:BE] hi",
        "[SEMO:FOO]",
    ],
)
def test_markers_mid_line_or_misspelt_are_not_taken(line: str) -> None:
    assert parse_reply(line + "\n") == []


def test_opening_marker_inside_block_is_body_text() -> None:
    item = one("[INVOKE:BE]\nPlease handle:\n[INVOKE:QA]\n[ASK_USER] hi\n[SEMO:DONE]\n[/INVOKE]")
    assert isinstance(item, Invoke)
    assert item.task == "Please handle:\n[INVOKE:QA]\n[ASK_USER] hi\n[SEMO:DONE]"


# -- code fences ----------------------------------------------------------------------------


@pytest.mark.parametrize("fence", ["```", "~~~", "````", "```python", "~~~ text", "  ```"])
def test_markers_in_fences_are_not_messages(fence: str) -> None:
    close = re.match(r"\s*([`~]+)", fence).group(1)  # type: ignore[union-attr]
    reply = (
        f"Example:\n{fence}\n[ASK_USER] quoted?\n[INVOKE:BE]\n{{}}\n[/INVOKE]\n[SEMO:DONE]\n"
        f"[/ASK_USER]\n{close}\n[SEMO:DONE] real\n"
    )
    assert parse_reply(reply) == [Done(text="real")]


def test_fence_needs_same_char_and_length_to_close() -> None:
    reply = "````\n```\n[SEMO:DONE] inside\n~~~~\n````\n[STEP_COMPLETE] after\n"
    assert parse_reply(reply) == [StepComplete(text="after")]


def test_fence_close_with_trailing_text_does_not_close() -> None:
    reply = "```\n``` not a close\n[SEMO:DONE] inside\n```\n[SEMO:DONE] out\n"
    assert parse_reply(reply) == [Done(text="out")]


def test_inline_triple_backticks_are_not_a_fence() -> None:
    assert parse_reply("```x = 1```\n[SEMO:DONE]\n") == [Done()]


def test_unclosed_fence_runs_to_end_of_reply_and_resets() -> None:
    parser = MarkerParser()
    assert parser.feed("```\n[SEMO:DONE]\n") == []
    assert parser.flush() == []
    assert parser.feed("[SEMO:DONE]\n") == [Done()]


def test_fenced_json_body_is_unwrapped() -> None:
    body = '```json\n{"task": "t", "context": {"a": 1}}\n```'
    item = one(f"[INVOKE:BE]\n{body}\n[/INVOKE]")
    assert item == Invoke(target="BE", task="t", context={"a": 1}, raw=body)
    item = one("[INVOKE:BE]\n```\nprint(1)\n```\n[/INVOKE]")
    assert isinstance(item, Invoke) and item.task == "```\nprint(1)\n```"


def test_fence_inside_block_is_body_text() -> None:
    item = one("[DELIVER_RESULT:FE]\nDiff:\n```\n+ x\n```\n[/DELIVER_RESULT]")
    assert isinstance(item, DeliverResult) and item.summary == "Diff:\n```\n+ x\n```"


# -- line ends, unicode, limits ---------------------------------------------------------------


def test_crlf_line_ends() -> None:
    reply = (
        "[ASK_USER]\r\n"
        '{"type": "choice", "question": "Q", "options": ["a", "b"]}\r\n'
        "[/ASK_USER]\r\n"
        "[INVOKE:BE]\r\nline one\r\nline two\r\n[/INVOKE]\r\n"
        "[SEMO:DONE] ok\r\n"
    )
    items = parse_reply(reply)
    assert kinds(items) == ["ask_user", "invoke", "done"]
    assert isinstance(items[1], Invoke) and items[1].raw == "line one\nline two"
    assert items[2] == Done(text="ok")
    assert feed_chunks(list(reply)) == items


def test_unicode_payloads() -> None:
    question = "어떤 데이터베이스를 쓸까요? 🐘 or 🪶"
    assert one(f"[ASK_USER] {question}") == AskUser(question=question)
    body = {"type": "choice", "question": "選択", "options": ["ポスグレ", "エスキューライト"]}
    item = one(f"[ASK_USER]\n{json.dumps(body, ensure_ascii=False)}\n[/ASK_USER]")
    assert item == AskUser(question="選択", question_type="choice", options=body["options"])
    item = one('[INVOKE:BE]\n{"task": "\\u00e9t\\u00e9 \\ud83d\\ude00"}\n[/INVOKE]')
    assert isinstance(item, Invoke) and item.task == "été 😀"


def _block(body: str) -> str:
    return f"[INVOKE:BE]\n{body}\n[/INVOKE]\n[SEMO:DONE]\n"


def test_payload_of_exactly_64_kib_is_accepted() -> None:
    body = "x" * MAX_PAYLOAD_BYTES
    items = parse_reply(_block(body))
    assert kinds(items) == ["invoke", "done"]
    lines = "\n".join(["y" * 1023] * 64)  # 64 * 1023 + 63 newlines = 65,535 bytes
    assert kinds(parse_reply(_block(lines + "z"))) == ["invoke", "done"]


def test_payload_of_64_kib_plus_one_is_oversize_and_skipped() -> None:
    body = '{"task": "' + "x" * (MAX_PAYLOAD_BYTES - 11) + '"}'
    assert len(body.encode()) == MAX_PAYLOAD_BYTES + 1
    items = parse_reply(_block(body))
    assert kinds(items) == ["error:oversize", "done"]
    err = items[0]
    assert isinstance(err, ProtocolError)
    assert err.tag == "[INVOKE:BE]" and err.excerpt == body[:EXCERPT_CHARS]
    assert "64 KiB" in err.detail


def test_oversize_counts_utf8_bytes_and_newlines() -> None:
    body = "é" * (MAX_PAYLOAD_BYTES // 2)  # 65,536 bytes
    assert kinds(parse_reply(_block(body))) == ["invoke", "done"]
    assert kinds(parse_reply(_block(body + "x"))) == ["error:oversize", "done"]
    lines = "\n".join(["y" * 1023] * 64) + "zz"  # 65,537 bytes with the newlines
    assert kinds(parse_reply(_block(lines))) == ["error:oversize", "done"]


def test_one_line_oversize() -> None:
    ok = "q" * (MAX_PAYLOAD_BYTES - 1)
    assert one(f"[ASK_USER] {ok}") == AskUser(question=ok)
    err = error(f"[ASK_USER] {ok}xy\n")
    assert err.kind == "oversize" and err.tag == "[ASK_USER]"
    assert error("[SEMO:DONE] " + "d" * MAX_PAYLOAD_BYTES).kind == "oversize"


def test_oversize_fed_char_by_char_is_reported_once() -> None:
    reply = "[ASK_USER]\n" + "q" * (MAX_PAYLOAD_BYTES + 500) + "\nmore\n[/ASK_USER]\n[SEMO:DONE]"
    assert kinds(feed_chunks(list(reply))) == ["error:oversize", "done"]
    assert feed_chunks(list(reply)) == parse_reply(reply)


def test_huge_block_and_huge_line_use_bounded_memory() -> None:
    chunk = "z" * 65536
    parser = MarkerParser()
    tracemalloc.start()
    out: list[ParseItem] = []
    try:
        out += parser.feed("[INVOKE:BE]\n")
        for _ in range(64):  # 4 MiB of body, no newline
            out += parser.feed(chunk)
        out += parser.feed("\n[/INVOKE]\n")
        for _ in range(64):  # 4 MiB of prose on one line outside any block
            out += parser.feed(chunk)
        out += parser.feed("\n[INVOKE:BE]\n")
        for _ in range(64):  # 4 MiB of body again, in many lines
            out += parser.feed(chunk[:-1] + "\n")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000
    assert kinds(out + parser.flush()) == [
        "error:oversize",
        "error:oversize",
        "error:missing_close",
    ]


def test_long_plain_lines_are_not_markers_and_do_not_break_parsing() -> None:
    reply = "x" * (HEAD_CHARS * 3) + "[SEMO:DONE]\n" + "y" * 100_000 + "\n[SEMO:DONE]\n"
    assert parse_reply(reply) == [Done()]


# -- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '[ASK_USER]\n{"type": "choice", "question": "Q", "options": ["a", "b",]}\n[/ASK_USER]',
        "[ASK_USER]\n{question: 'Q'}\n[/ASK_USER]",
        '[INVOKE:BE]\n{"task": "x"\n[/INVOKE]',
        '[DELIVER_RESULT:FE]\n{"summary": "a"} trailing\n[/DELIVER_RESULT]',
        '[ASK_USER] {"question": "Q"',
    ],
)
def test_bad_json(text: str) -> None:
    err = error(text)
    assert err.kind == "bad_json"
    assert "JSON" in err.detail and err.tag in err.detail


@pytest.mark.parametrize("qtype", ['"radio"', '"Choice"', "1", "null", '["text"]'])
def test_unknown_question_type(qtype: str) -> None:
    err = error(f'[ASK_USER]\n{{"type": {qtype}, "question": "Q"}}\n[/ASK_USER]')
    assert err.kind == "unknown_question_type"
    assert '"text", "choice" or "confirm"' in err.detail


@pytest.mark.parametrize(
    "text",
    [
        '[ASK_USER]\n{"type": "choice", "question": "Q"}\n[/ASK_USER]',
        '[ASK_USER]\n{"type": "choice", "question": "Q", "options": ["only"]}\n[/ASK_USER]',
        '[ASK_USER]\n{"type": "choice", "question": "Q", "options": ["a", "a"]}\n[/ASK_USER]',
        '[ASK_USER]\n{"type": "choice", "question": "Q", "options": ["a", " "]}\n[/ASK_USER]',
        '[ASK_USER]\n{"type": "choice", "question": "Q", "options": "a,b"}\n[/ASK_USER]',
        '[ASK_USER]\n{"type": "choice", "question": "Q", "options": [1, 2]}\n[/ASK_USER]',
        '[ASK_USER]\n{"type": "confirm", "question": "Q", "options": ["ok", "no"]}\n[/ASK_USER]',
        '[ASK_USER]\n{"type": "text", "question": "Q", "options": ["a", "b"]}\n[/ASK_USER]',
        '[ASK_USER]\n{"type": "text"}\n[/ASK_USER]',
        '[ASK_USER]\n{"type": "text", "question": "  "}\n[/ASK_USER]',
        '[ASK_USER]\n{"type": "text", "question": 5}\n[/ASK_USER]',
        "[ASK_USER]\n\n  \n[/ASK_USER]",
        "[ASK_USER]\n[/ASK_USER]",
        "[INVOKE:BE]\n[/INVOKE]",
        '[INVOKE:BE]\n{"context": {}}\n[/INVOKE]',
        '[INVOKE:BE]\n{"task": ""}\n[/INVOKE]',
        '[INVOKE:BE]\n{"task": "t", "context": "files"}\n[/INVOKE]',
        "[INVOKE:BE]\n{}\n[/INVOKE]",
        '[DELIVER_RESULT:FE]\n{"invocation_id": "i"}\n[/DELIVER_RESULT]',
        '[DELIVER_RESULT:FE]\n{"summary": "s", "invocation_id": ["i"]}\n[/DELIVER_RESULT]',
        "[DELIVER_RESULT:FE]\n   \n[/DELIVER_RESULT]",
        "[STEP_COMPLETE]",
        "[STEP_COMPLETE]    ",
    ],
)
def test_invalid_payload(text: str) -> None:
    err = error(text)
    assert err.kind == "invalid_payload"
    assert err.tag in err.detail


def test_body_starting_with_a_bracket_is_free_text() -> None:
    item = one('[INVOKE:BE]\n["a", "b"]\n[/INVOKE]')
    assert isinstance(item, Invoke) and item.task == '["a", "b"]'


def test_confirm_with_explicit_yes_no_is_fine() -> None:
    item = one(
        '[ASK_USER]\n{"type": "confirm", "question": "Q", "options": ["Yes", "No"]}\n[/ASK_USER]'
    )
    assert item == AskUser(question="Q", question_type="confirm", options=["yes", "no"])


def test_missing_close_reported_at_flush_only() -> None:
    parser = MarkerParser()
    assert parser.feed('[INVOKE:BE]\n{"task": "x"}\n[SEMO:DONE]\n') == []
    assert parser.in_block
    items = parser.flush()
    assert kinds(items) == ["error:missing_close"]
    err = items[0]
    assert isinstance(err, ProtocolError)
    assert err.tag == "[INVOKE:BE]" and "[/INVOKE]" in err.detail
    assert err.excerpt == '{"task": "x"}\n[SEMO:DONE]'
    assert not parser.in_block
    assert parser.feed("[SEMO:DONE]\n") == [Done()]  # reset for the next reply


def test_missing_close_for_ask_user_block_and_unterminated_last_line() -> None:
    assert kinds(parse_reply("[ASK_USER]")) == ["error:missing_close"]
    assert kinds(parse_reply('[ASK_USER]\n{"question": "Q"}')) == ["error:missing_close"]


@pytest.mark.parametrize(
    ("text", "tag"),
    [
        ("[/INVOKE]", "[/INVOKE]"),
        ("  [/ASK_USER] trailing", "[/ASK_USER]"),
        ("[/DELIVER_RESULT:FE]", "[/DELIVER_RESULT:FE]"),
        ("[/SEMO:DONE]", "[/SEMO:DONE]"),
        ("[/STEP_COMPLETE]", "[/STEP_COMPLETE]"),
    ],
)
def test_unexpected_close_without_open_block(text: str, tag: str) -> None:
    err = error(text)
    assert err.kind == "unexpected_close" and err.tag == tag


def test_mismatched_close_discards_block_and_resyncs() -> None:
    reply = '[INVOKE:BE]\n{"task": "x"}\n[/DELIVER_RESULT]\n[/INVOKE]\n[SEMO:DONE]\n'
    items = parse_reply(reply)
    assert kinds(items) == ["error:unexpected_close", "error:unexpected_close", "done"]
    first = items[0]
    assert isinstance(first, ProtocolError)
    assert first.tag == "[/DELIVER_RESULT]" and "[INVOKE:BE]" in first.detail


def test_close_with_role() -> None:
    item = one("[INVOKE:BE]\ntask\n[/INVOKE:BE]")
    assert isinstance(item, Invoke) and item.task == "task"
    assert error("[INVOKE:BE]\ntask\n[/INVOKE:QA]").kind == "unexpected_close"


@pytest.mark.parametrize(
    "marker",
    [
        "[INVOKE]",
        "[INVOKE:]",
        "[INVOKE:9x]",
        "[INVOKE:B E]",
        "[INVOKE:BE!]",
        "[INVOKE:" + "a" * 33 + "]",
        "[INVOKE:BE",
        "[INVOKE:" + "a" * 100,
        "[DELIVER_RESULT]",
        "[DELIVER_RESULT:-x]",
    ],
)
def test_bad_target_skips_the_block(marker: str) -> None:
    close = "[/INVOKE]" if marker.startswith("[INVOKE") else "[/DELIVER_RESULT]"
    reply = f'{marker}\n{{"task": "x"}}\n[SEMO:DONE] swallowed\n{close}\n[STEP_COMPLETE] after\n'
    items = parse_reply(reply)
    assert kinds(items) == ["error:bad_target", "step_complete"]
    err = items[0]
    assert isinstance(err, ProtocolError) and "ROLE" in err.detail


def test_errored_block_left_open_also_reports_missing_close() -> None:
    assert kinds(parse_reply("[INVOKE]\ntask\n")) == ["error:bad_target", "error:missing_close"]


def test_error_excerpt_is_truncated() -> None:
    err = error("[ASK_USER]\n{" + "x" * 1000 + "\n[/ASK_USER]")
    assert err.kind == "bad_json" and len(err.excerpt) == EXCERPT_CHARS
    assert err.for_agent().startswith("semo could not read your [ASK_USER] message (bad_json)")


# -- incremental feeding --------------------------------------------------------------------

CORPUS = [
    (
        "Intro text\n[ASK_USER] Which database?\n[STEP_COMPLETE] step one\n"
        "[ASK_USER]\n"
        '{"type": "choice", "question": "Which DB?", "options": ["postgres", "sqlite"]}\n'
        "[/ASK_USER]\n[SEMO:DONE] finished"
    ),
    '[INVOKE:BE]\r\n{"task": "Add /health", "context": {"k": [1, 2]}}\r\n[/INVOKE]\r\n',
    "```\n[INVOKE:BE]\nquoted\n[/INVOKE]\n```\n"
    "[DELIVER_RESULT:FE]\n결과: 완료 ✅\n[/DELIVER_RESULT]\n",
    "[INVOKE:BE\nx\n[/INVOKE]\n[/ASK_USER]\n[ASK_USER]\n{bad json}\n[/ASK_USER]\n[INVOKE:QA]\nopen",
    '~~~\n[SEMO:DONE]\n~~~\n[ASK_USER]\n{"type": "radio", "question": "Q"}\n[/ASK_USER]\n'
    "[STEP_COMPLETE]",
    "[ASK_USER]\n" + "長" * 300 + "\n[/ASK_USER]\n" + " " * 300 + "[SEMO:DONE]\n" + "p" * 700,
    "[DELIVER_RESULT:FE]\n```json\n"
    '{"invocation_id": "i-1", "summary": "ok"}\n```\n[/DELIVER_RESULT]\n\r\n\r[SEMO:DONE]\r',
]


@pytest.mark.parametrize("reply", CORPUS)
def test_char_by_char_equals_whole(reply: str) -> None:
    whole = parse_reply(reply)
    assert whole, "every corpus reply yields something"
    assert feed_chunks(list(reply)) == whole


@settings(max_examples=300, deadline=None)
@given(
    reply=st.sampled_from(CORPUS),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=40),
)
def test_random_splits_equal_whole(reply: str, cuts: list[int]) -> None:
    points = sorted({c % (len(reply) + 1) for c in cuts})
    chunks = [reply[a:b] for a, b in zip([0, *points], [*points, len(reply)], strict=True)]
    assert "".join(chunks) == reply
    assert feed_chunks(chunks) == parse_reply(reply)


@settings(max_examples=200, deadline=None)
@given(
    parts=st.lists(
        st.sampled_from(
            [
                "[ASK_USER] q?",
                "[ASK_USER]",
                "[/ASK_USER]",
                '{"type": "choice", "question": "Q", "options": ["a", "b"]}',
                "[INVOKE:BE]",
                "[/INVOKE]",
                "[DELIVER_RESULT:FE]",
                "[/DELIVER_RESULT]",
                "[STEP_COMPLETE] s",
                "[SEMO:DONE]",
                "```",
                "~~~",
                "prose ü",
                "",
                "{broken",
                "[INVOKE]",
            ]
        ),
        max_size=25,
    ),
    eol=st.sampled_from(["\n", "\r\n"]),
    data=st.data(),
)
def test_generated_replies_split_anywhere(parts: list[str], eol: str, data: st.DataObject) -> None:
    reply = eol.join(parts)
    whole = parse_reply(reply)
    size = data.draw(st.integers(min_value=1, max_value=7))
    chunks = [reply[i : i + size] for i in range(0, len(reply), size)]
    assert feed_chunks(chunks) == whole
    for item in whole:  # errors always explain themselves
        if isinstance(item, ProtocolError):
            assert item.detail and item.tag


def test_messages_are_reported_as_their_lines_complete() -> None:
    parser = MarkerParser()
    assert parser.feed("[STEP_COMPLETE] a") == []
    assert parser.feed("bc\n[INVOKE:BE]\nt") == [StepComplete(text="abc")]
    assert parser.feed("ask\n[/INVOKE") == []
    assert kinds(parser.feed("]\n")) == ["invoke"]
    assert parser.feed("[SEMO:DONE]") == []
    assert parser.flush() == [Done()]
    assert parser.flush() == []


# -- the models -----------------------------------------------------------------------------


def test_protocol_message_union_round_trips() -> None:
    adapter = TypeAdapter(ProtocolMessage)
    items = parse_reply(CORPUS[0] + "\n" + CORPUS[1] + CORPUS[2])
    messages = [i for i in items if not isinstance(i, ProtocolError)]
    assert {type(m) for m in messages} == {AskUser, StepComplete, Done, Invoke, DeliverResult}
    for message in messages:
        assert adapter.validate_json(adapter.dump_json(message)) == message


def test_model_validation() -> None:
    with pytest.raises(ValidationError):
        AskUser(question="Q", question_type="choice", options=["one"])
    with pytest.raises(ValidationError):
        AskUser(question="Q", question_type="text", options=["a", "b"])
    with pytest.raises(ValidationError):
        Invoke(target="9x", task="t", raw="t")
    with pytest.raises(ValidationError):
        DeliverResult(recipient="a" * 33, summary="s", payload="s")
    assert AskUser(question="Q", question_type="confirm").options == ["yes", "no"]
    err = ProtocolError(kind="oversize", tag="[ASK_USER]", detail="d", excerpt="e" * 500)
    assert len(err.excerpt) == EXCERPT_CHARS


# -- docs/PROTOCOL.md -----------------------------------------------------------------------

_FENCED = re.compile(r"^```[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_TAG_KIND = {
    "[ASK_USER]": "ask_user",
    "[INVOKE:": "invoke",
    "[DELIVER_RESULT:": "deliver_result",
    "[STEP_COMPLETE]": "step_complete",
    "[SEMO:DONE]": "done",
}


def agent_section() -> str:
    text = PROTOCOL_MD.read_text(encoding="utf-8")
    start = "<!-- agent-protocol:start -->"
    end = "<!-- agent-protocol:end -->"
    assert text.count(start) == 1 and text.count(end) == 1
    return text[text.index(start) + len(start) : text.index(end)]


def agent_examples() -> list[str]:
    return _FENCED.findall(agent_section())


def test_agent_section_examples_parse() -> None:
    examples = agent_examples()
    assert len(examples) >= 10
    seen: list[object] = []
    for example in examples:
        items = parse_reply(example)  # the fences are stripped: this is what an agent would send
        expected = next(k for tag, k in _TAG_KIND.items() if example.lstrip().startswith(tag))
        assert kinds(items) == [expected], example
        seen.append(items[0])
    assert {m.question_type for m in seen if isinstance(m, AskUser)} == {
        "text",
        "choice",
        "confirm",
    }
    invokes = [m for m in seen if isinstance(m, Invoke)]
    assert {m.context is None for m in invokes} == {True, False}  # JSON and free text
    results = [m for m in seen if isinstance(m, DeliverResult)]
    assert {isinstance(m.payload, dict) for m in results} == {True, False}
    assert Done(text="") in seen and any(isinstance(m, Done) and m.text for m in seen)
    assert any(isinstance(m, StepComplete) for m in seen)
    one_line = [e for e in examples if e.startswith("[ASK_USER] ")]
    assert one_line, "the one-line ASK_USER form is shown"


def test_agent_section_as_injected_sends_nothing() -> None:
    # if the model echoes its instructions, fences keep every example from being sent
    assert parse_reply(agent_section()) == []


def test_agent_section_is_short() -> None:
    assert len(agent_section().splitlines()) < 120
