"""Property-based fuzzing of the observer, the screen reader and the marker parser.

Input is what a hostile agent could print: random text and bytes mixed with marker fragments,
escape sequences (clear, cursor moves, scroll regions, alternate screen), long runs and floods,
cut into random chunks. Whatever comes in: no exception, and every buffer stays within its cap.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from semo.engine.agents.claude.screen import ClaudeScreen
from semo.engine.protocol.messages import MAX_PAYLOAD_BYTES, ProtocolError
from semo.engine.protocol.monitor import Signal
from semo.engine.protocol.observer import (
    MAX_MESSAGES_PER_TURN,
    MAX_SIGNALS_PER_TURN,
    AgentObserver,
    MalformedMessage,
    MessageFound,
)
from semo.engine.protocol.parser import HEAD_CHARS, MarkerParser
from semo.engine.protocol.screen_text import LINE_CAP
from semo.engine.sessions.profiles import PASTE_END, PASTE_START, paste, sanitize_input
from semo.engine.terminal.stream import make_screen_and_stream

FRAGMENTS = [
    "[ASK_USER]",
    "[/ASK_USER]",
    "[INVOKE:BE]",
    "[/INVOKE]",
    "[INVOKE:",
    "[DELIVER_RESULT:QA]",
    "[/DELIVER_RESULT]",
    "[STEP_COMPLETE] ",
    "[SEMO:DONE]",
    "[/SEMO:DONE]",
    "```",
    "~~~",
    '{"task": "x"}',
    '{"question": "q", "options": ["a", "b"]}',
    "{",
    "\r\n",
    "\n",
    "\r",
    "● ",
    "  ",
    "❯ ",
    "$ ",
    "All tests passed",
    "Error: ",
    "배",
    "😀",
    "\u200d",
    "\x1b[H",
    "\x1b[2J",
    "\x1b[3J",
    "\x1b[K",
    "\x1b[J",
    "\x1b[5A",
    "\x1b[3;7r",
    "\x1b[r",
    "\x1b[?1049h",
    "\x1b[?1049l",
    "\x1b]9;note\x07",
    "\x1b]0;title\x07",
    "\x1b[>1u",
    "\x1b[6n",
    "\x1b[201~",
    "\x1bM",
    "\x1b[L",
    "\x1b[M",
]

piece = st.one_of(
    st.sampled_from(FRAGMENTS),
    st.text(max_size=40),
    st.binary(max_size=40).map(lambda b: b.decode("utf-8", "replace")),
    st.tuples(st.sampled_from(["x", " ", "[", "배", "\n"]), st.integers(0, 3000)).map(
        lambda t: t[0] * t[1]
    ),
)
stream_text = st.lists(piece, max_size=60).map("".join)
cuts = st.lists(st.integers(1, 500), min_size=1, max_size=20)


def chunks(text: str, sizes: list[int]) -> list[str]:
    out, pos, index = [], 0, 0
    while pos < len(text):
        size = sizes[index % len(sizes)]
        out.append(text[pos : pos + size])
        pos, index = pos + size, index + 1
    return out


def check_parser_bounds(parser: MarkerParser) -> None:
    assert len(parser._head) <= HEAD_CHARS
    assert parser._tail_bytes <= MAX_PAYLOAD_BYTES + 4 * (MAX_PAYLOAD_BYTES + 1)
    block = parser._block
    if block is not None:
        assert block.size <= MAX_PAYLOAD_BYTES


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=stream_text, sizes=cuts, columns=st.integers(2, 60), rows=st.integers(2, 12))
def test_the_generic_observer_survives_anything_and_stays_bounded(text, sizes, columns, rows):
    screen, stream = make_screen_and_stream(columns, rows)
    observer = AgentObserver()
    messages = signals = 0
    for number, chunk in enumerate(chunks(text, sizes)):
        stream.feed(chunk)
        for event in observer.on_screen(screen, float(number)):
            if isinstance(event, MessageFound | MalformedMessage):
                messages += 1
                assert not isinstance(event, MalformedMessage) or isinstance(
                    event.error, ProtocolError
                )
            elif isinstance(event, Signal):
                signals += 1
        reader = observer.reader._final_lines
        assert reader._size <= LINE_CAP and len(reader._seen) in (0, screen.lines)
        check_parser_bounds(observer.reader._parser)
    # the budget holds within a turn (+1: the one too_many error; a prompt starts a new turn)
    turns = 1 + sum(1 for change in observer.tracker.history if change.state == "ready")
    assert messages <= turns * (MAX_MESSAGES_PER_TURN + 1) + turns
    assert signals <= turns * MAX_SIGNALS_PER_TURN


@settings(max_examples=150, deadline=None)
@given(text=stream_text, sizes=cuts)
def test_the_parser_gives_the_same_items_whatever_the_chunks(text, sizes):
    whole = MarkerParser()
    expected = [*whole.feed(text), *whole.flush()]
    parser = MarkerParser()
    got = []
    for chunk in chunks(text, sizes):
        got += parser.feed(chunk)
        check_parser_bounds(parser)
    got += parser.flush()
    assert got == expected


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(st.tuples(stream_text, st.booleans()), max_size=20))
def test_feeding_whole_lines_never_fails_and_stays_bounded(lines):
    parser = MarkerParser()
    for line, cut in lines:
        for item in parser.feed_line(line.replace("\n", " "), cut=cut):
            assert item is not None
        check_parser_bounds(parser)
    parser.flush()


@settings(max_examples=100, deadline=None)
@given(text=stream_text, sizes=cuts)
def test_the_claude_observer_without_hooks_survives_anything(text, sizes):
    screen, stream = make_screen_and_stream(40, 8)
    observer = AgentObserver(ClaudeScreen(), screen=screen)
    for number, chunk in enumerate(chunks(text, sizes)):
        stream.feed(chunk)
        observer.on_screen(screen, float(number))


@given(
    text=st.lists(
        st.one_of(st.sampled_from([*"\x1b[]201~0\r\n\t\x9b\x00\x7fa ", *FRAGMENTS]), st.text())
    ).map("".join)
)
def test_sanitised_input_is_a_fixed_point_without_controls(text):
    clean = sanitize_input(text)
    assert sanitize_input(clean) == clean
    assert not any(
        (ord(char) < 0x20 and char not in "\n\t") or 0x7F <= ord(char) <= 0x9F for char in clean
    )
    pasted = paste(text, bracketed=True)
    assert pasted.startswith(PASTE_START) and pasted.endswith(PASTE_END)
    assert pasted.count("\x1b") == 2
    typed = paste(text, bracketed=False)
    assert not any(ord(char) < 0x20 or 0x7F <= ord(char) <= 0x9F for char in typed)


@given(text=st.text())
def test_text_width_by_runs_equals_the_sum_of_character_widths(text):
    from semo.engine.protocol.screen_text import text_width
    from semo.engine.terminal.screen import char_width

    assert text_width(text) == sum(max(char_width(char), 0) for char in text)


SIGNAL_BITS = [
    "All tests passed",
    "aLL TEſTS PASSED",  # ſ is an s to re.I
    "Permİssion denied",  # İ is an i to re.I
    "permıssion denıed",
    "ERROR:",
    "fatal:",
    "ENOENT:",
    "[main abc1234] fix",
    "[SEMO:DONE]",
    "Created pull request #7",
    "Build completed successfully",
    "\u212a",  # Kelvin sign
    "İ",
    "ı",
]


@given(line=st.lists(st.one_of(st.sampled_from(SIGNAL_BITS), st.text(max_size=5))).map("".join))
def test_the_monitor_prefilter_never_hides_a_pattern_match(line):
    from semo.engine.protocol.monitor import PATTERNS, scan_line

    expected = {p.kind for p in PATTERNS if p.regex.search(line)}
    assert {s.kind for s in scan_line(line, "screen", 0.0)} == expected


def test_the_prefilter_groups_hold_every_literal_under_a_character_it_contains():
    from semo.engine.protocol.monitor import _GATED_LITERALS, _LITERALS

    grouped = [literal for _, group in _GATED_LITERALS for literal in group]
    assert sorted(grouped) == sorted(_LITERALS)
    assert all(gate in literal for gate, group in _GATED_LITERALS for literal in group)


CLAUDE_BITS = [
    "\x1b[48;5;237m❯ a prompt\x1b[0m\r\n",
    "❯ \r\n",
    "● reply text\r\n",
    "● Bash(ls)\r\n",
    "  ⎿  tool output\r\n",
    "     more output\r\n",
    "  continued prose\r\n",
    "  \x1b[38;5;2mcode line\x1b[0m\r\n",
    "✻ Baked for 3s\r\n",
    "[ASK_USER] q?\r\n",
    "\r\n",
    "\x1b[2J\x1b[H",
]


@settings(max_examples=100, deadline=None)
@given(parts=st.lists(st.one_of(st.sampled_from(CLAUDE_BITS), st.text(max_size=10)), max_size=80))
def test_the_latest_turn_from_the_last_prompt_on_equals_the_one_from_every_line(parts):
    from semo.engine.agents.claude.screen_text import (
        claude_rows,
        claude_turn_text,
        latest_turn,
        latest_turn_lines,
        screen_lines,
    )

    screen, stream = make_screen_and_stream(30, 6)
    stream.feed("".join(parts))
    every = screen_lines(screen)
    tail, input_row = latest_turn_lines(screen)
    rows = claude_rows(every)
    prompts = [row.text for row in rows if row.kind == "prompt"]
    if tail is None:
        assert prompts == []
        assert input_row == any(r.kind == "other" and r.text.startswith("❯") for r in rows)
        return
    assert latest_turn(claude_rows(tail)) == latest_turn(rows)
    assert claude_turn_text(tail, 30) == claude_turn_text(every, 30)
    tail_prompts = [row.text for row in claude_rows(tail) if row.kind == "prompt"]
    assert tail_prompts[-1:] == prompts[-1:]


@settings(max_examples=100, deadline=None)
@given(
    pieces=st.lists(
        st.lists(st.one_of(st.sampled_from(CLAUDE_BITS), st.text(max_size=10)), max_size=12),
        max_size=10,
    ),
    limit=st.sampled_from([0, 3, 20, 1000]),
)
def test_a_prompt_index_kept_across_frames_finds_what_a_fresh_one_finds(pieces, limit):
    """The observer keeps one PromptIndex for the session and checks only the lines pushed
    since the last frame; after every frame it must agree with one that checks every line
    (small scrollback limits evict prompts it has seen, `\\x1b[3J` clears them)."""
    from semo.engine.agents.claude.screen_text import PromptIndex, classify

    def every_line(scrollback):  # what the index must answer, from a look at every line
        kinds = [classify(line, False).kind for line in scrollback]
        prompts = [i for i, kind in enumerate(kinds) if kind == "prompt"]
        if prompts:
            return prompts[-1], False
        return None, any(line.text.startswith("❯") for line in scrollback)

    screen, stream = make_screen_and_stream(30, 6, scrollback=limit)
    kept = PromptIndex()
    for piece in pieces:
        stream.feed(
            "".join(piece).replace("\x1b[2J", "\x1b[2J\x1b[3J") if limit == 3 else "".join(piece)
        )
        assert kept.find(screen.scrollback) == every_line(screen.scrollback)
        for y in range(screen.lines):  # the row check latest_turn_lines makes before reading
            assert screen.row_first_char(y) == (screen.row_line(y).text[:1] or " ")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=st.lists(
        st.lists(st.sampled_from(["a", "bc ", "배", "😀", "x" * 37, " y", "[ok]"]), max_size=40)
        .map("".join)
        .map(str.rstrip),
        max_size=40,
    ),
    sizes=cuts,
    frames=st.lists(st.integers(1, 30), min_size=1, max_size=10),
    columns=st.integers(4, 50),
    rows=st.integers(2, 10),
    limit=st.sampled_from([10000, 30]),
)
def test_final_lines_of_line_output_are_its_lines_whatever_the_chunks_and_frames(
    lines, sizes, frames, columns, rows, limit
):
    """Plain line output (wrapping, wide characters at the margin, any chunks, a frame after a
    varying number of chunks): the lines read are the lines printed, each once, in order;
    the last one (the cursor's) is not final yet. With a small scrollback, lines that scrolled
    away unread are lost: a line whose first rows were lost is read as its tail, and one that
    lost rows after its first ones read is marked cut (`FinalLines.cut`: its head, perhaps
    with rows after the gap); the unmarked lines are printed lines or their tails, in order.
    (A tail is not marked: a marker that starts it reads as a line start.)"""
    from semo.engine.protocol.screen_text import FinalLines

    screen, stream = make_screen_and_stream(columns, rows, scrollback=limit)
    reader = FinalLines()
    read: list[tuple[str, bool]] = []  # (line, marked cut)

    def take() -> None:
        taken = reader.take(screen)
        read.extend((line, index in reader.cut) for index, line in enumerate(taken))

    pieces = chunks("\r\n".join([*lines, "end"]), sizes)
    for index, part in enumerate(pieces):
        stream.feed(part)
        if index % frames[index % len(frames)] == 0:
            take()
    take()
    if limit == 10000:
        assert [line for line, _ in read] == lines
        assert not any(cut for _, cut in read)
        return
    position = 0  # each unmarked line read is a printed line or its tail, in order
    for line, cut in read:
        if cut:
            continue
        while position < len(lines) and not lines[position].endswith(line):
            position += 1
        assert position < len(lines), (line, cut, lines)
        position += 1
