"""The protocol pipeline on synthetic input: monitor, state tracker, screen reader, observer."""

from __future__ import annotations

import json

import pytest

from semo.engine.agents.claude.screen import ClaudeScreen, turn_interrupted
from semo.engine.agents.claude.screen_text import claude_turn_text, screen_lines
from semo.engine.agents.claude.transcript import turn_text_from_transcript
from semo.engine.protocol.messages import AskUser, Done, Invoke
from semo.engine.protocol.monitor import OutputMonitor, Signal, scan_line
from semo.engine.protocol.observer import (
    AgentObserver,
    MalformedMessage,
    MessageFound,
)
from semo.engine.protocol.state import AgentState, StateChange, StateTracker
from semo.engine.terminal.stream import make_screen_and_stream

# -- monitor --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "kind", "pattern"),
    [
        ("  [SEMO:DONE] all good", "completion", "semo_done"),
        ("Created pull request #42", "completion", "pull_request"),
        ("[main abc1234] fix the thing", "completion", "commit"),
        ("All tests passed", "completion", "tests_passed"),
        ("Build completed successfully", "completion", "build_ok"),
        ("ENOENT: no such file", "error", "enoent"),
        ("cp: Permission denied", "error", "permission_denied"),
        ("fatal: not a git repository", "error", "fatal"),
        ("TypeError: x is undefined", "error", "error"),
    ],
)
def test_patterns(line, kind, pattern):
    (signal,) = scan_line(line, "model_text", 1.0)
    assert (signal.kind, signal.pattern) == (kind, pattern)


def test_highest_priority_pattern_wins_per_family():
    signals = scan_line(
        "Error: ENOENT: missing; Created pull request #3, All tests passed", "screen", 0
    )
    assert [(s.kind, s.pattern) for s in signals] == [
        ("error", "enoent"),
        ("completion", "pull_request"),
    ]


def test_quoted_and_mid_line_markers_are_not_signals():
    text = "Write [SEMO:DONE] when done.\n```\n[SEMO:DONE]\nAll tests passed\n```\nok"
    assert OutputMonitor().scan(text.splitlines(), "model_text", 0) == []


def test_tool_output_signals_are_not_decisive():
    (signal,) = scan_line("All tests passed", "tool_output", 0)
    assert not signal.decisive
    assert scan_line("All tests passed", "model_text", 0)[0].decisive


def test_plain_text_has_no_signal():
    assert scan_line("an error occurred earlier, no colon", "model_text", 0) == []


def test_stale_is_reported_once_per_quiet_period_and_only_when_busy():
    monitor = OutputMonitor(stale_after=30)
    monitor.activity(100.0)
    assert monitor.check_stale(129.0, busy=True) is None
    assert monitor.check_stale(131.0, busy=False) is None
    stale = monitor.check_stale(131.0, busy=True)
    assert stale is not None and stale.kind == "stale"
    assert monitor.check_stale(140.0, busy=True) is None
    monitor.activity(141.0)
    assert monitor.check_stale(172.0, busy=True) is not None


def test_stale_after_must_be_positive():
    with pytest.raises(ValueError, match="stale_after"):
        OutputMonitor(stale_after=0)


# -- state tracker --------------------------------------------------------------------------


def test_tracker_reports_changes_with_source_and_time():
    tracker = StateTracker()
    change = tracker.set(AgentState.READY, "hook", "session started", 1.5)
    assert change == StateChange(
        AgentState.READY, AgentState.CREATING, "hook", "session started", 1.5
    )
    assert tracker.set(AgentState.READY, "screen", "again", 2.0) is None
    tracker.set(AgentState.TERMINATED, "process", "exit", 3.0)
    assert tracker.set(AgentState.READY, "hook", "late hook", 4.0) is None
    assert tracker.state == AgentState.TERMINATED
    assert len(tracker.history) == 2


# -- observer with hooks (Claude Code) ------------------------------------------------------

ASK = (
    'Before I start:\n[ASK_USER]\n{"type": "choice", "question": "Which DB?", '
    '"options": ["postgres", "sqlite"]}\n[/ASK_USER]'
)


def _states(events):
    return [e.state for e in events if isinstance(e, StateChange)]


def _messages(events):
    return [e.message for e in events if isinstance(e, MessageFound)]


def test_hooks_drive_states_and_stop_text_is_parsed():
    observer = AgentObserver(ClaudeScreen())
    assert _states(observer.on_hook("SessionStart", {}, 1.0)) == [AgentState.READY]
    assert _states(observer.on_hook("UserPromptSubmit", {"prompt": "go"}, 2.0)) == [
        AgentState.EXECUTING
    ]
    events = observer.on_hook("Stop", {"last_assistant_message": ASK}, 3.0)
    (message,) = _messages(events)
    assert message == AskUser(
        question="Which DB?", question_type="choice", options=["postgres", "sqlite"]
    )
    assert _states(events) == [AgentState.WAITING_INPUT]
    assert _states(observer.answered(4.0)) == [AgentState.EXECUTING]
    events = observer.on_hook("Stop", {"last_assistant_message": "Done.\n[SEMO:DONE]"}, 5.0)
    assert _messages(events) == [Done(text="")]
    assert _states(events) == [AgentState.READY]
    assert any(isinstance(e, Signal) and e.pattern == "semo_done" and e.decisive for e in events)
    assert _states(observer.on_hook("SessionEnd", {"reason": "other"}, 6.0)) == [
        AgentState.TERMINATED
    ]


def test_stop_reads_every_text_block_of_the_turn_from_the_transcript(tmp_path):
    transcript = tmp_path / "t.jsonl"
    entries = [
        {"type": "user", "message": {"role": "user", "content": "old prompt"}},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": "[SEMO:DONE]"}]}},
        {"type": "user", "message": {"role": "user", "content": "new prompt"}},
        {"type": "assistant", "message": {"content": [
            {"type": "text", "text": "[INVOKE:BE]\n{\"task\": \"t\"}\n[/INVOKE]"},
            {"type": "tool_use", "name": "Bash", "input": {}},
        ]}},
        {"type": "user", "message": {"content": [{"type": "tool_result", "content": "x"}]}},
        {"type": "assistant", "isSidechain": True,
         "message": {"content": [{"type": "text", "text": "[SEMO:DONE]"}]}},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": "final words"}]}},
    ]  # fmt: skip
    transcript.write_text("\n".join(json.dumps(e) for e in entries) + "\nnot json\n")
    assert turn_text_from_transcript(str(transcript)) == (
        '[INVOKE:BE]\n{"task": "t"}\n[/INVOKE]\n\nfinal words'
    )
    observer = AgentObserver(ClaudeScreen(), read_transcript=turn_text_from_transcript)
    payload = {"transcript_path": str(transcript), "last_assistant_message": "final words"}
    events = observer.on_hook("Stop", payload, 1.0)
    assert [type(m) for m in _messages(events)] == [Invoke]


def test_unreadable_transcript_falls_back_to_last_assistant_message(tmp_path):
    observer = AgentObserver(ClaudeScreen(), read_transcript=turn_text_from_transcript)
    payload = {"transcript_path": str(tmp_path / "missing.jsonl"), "last_assistant_message": ASK}
    assert [type(m) for m in _messages(observer.on_hook("Stop", payload, 1.0))] == [AskUser]


def test_transcript_read_is_bounded_like_the_hook_servers(tmp_path):
    """One reader for both (engine/agents/claude/transcript.py): a FIFO is not waited on, and of a
    large transcript only the tail is read, so a turn whose prompt is further back yields the
    text that is in the tail."""
    import os

    from semo.engine.agents.claude.transcript import TAIL_BYTES

    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    assert turn_text_from_transcript(str(fifo)) is None  # returns at once: no writer needed

    big = tmp_path / "big.jsonl"
    prompt = {"type": "user", "message": {"role": "user", "content": "the prompt"}}
    early = {"type": "assistant", "message": {"content": [{"type": "text", "text": "early"}]}}
    filler = {"type": "assistant", "message": {"content": [{"type": "text", "text": "x" * 1000}]}}
    late = {"type": "assistant", "message": {"content": [{"type": "text", "text": "late"}]}}
    count = TAIL_BYTES // 1000 + 10
    lines = [prompt, early, *[filler] * count, late]
    big.write_text("\n".join(json.dumps(e) for e in lines) + "\n")
    text = turn_text_from_transcript(str(big))
    assert text is not None and text.endswith("late") and "early" not in text
    assert len(text) <= TAIL_BYTES


def test_malformed_message_is_reported_not_dropped():
    observer = AgentObserver(ClaudeScreen())
    events = observer.on_hook(
        "Stop", {"last_assistant_message": "[ASK_USER]\n{bad\n[/ASK_USER]"}, 1
    )
    (error,) = [e for e in events if isinstance(e, MalformedMessage)]
    assert error.error.kind == "bad_json"
    assert _states(events) == [AgentState.READY]


def test_permission_notification_means_waiting_input():
    observer = AgentObserver(ClaudeScreen())
    observer.on_hook("UserPromptSubmit", {}, 1.0)
    payload = {"notification_type": "permission_prompt", "message": "Claude needs your permission"}
    assert _states(observer.on_hook("Notification", payload, 2.0)) == [AgentState.WAITING_INPUT]


def test_process_crash_is_error_then_terminated():
    observer = AgentObserver(ClaudeScreen())
    assert _states(observer.on_exit(None, 9, 1.0)) == [AgentState.ERROR, AgentState.TERMINATED]


def test_permission_dialog_on_screen():
    screen, stream = make_screen_and_stream(60, 10)
    observer = AgentObserver(ClaudeScreen(), screen=screen)
    observer.on_hook("UserPromptSubmit", {}, 1.0)
    stream.feed("● Bash(rm x)\r\n Do you want to proceed?\r\n ❯ 1. Yes\r\n   2. No")
    assert _states(observer.on_screen(screen, 2.0)) == [AgentState.WAITING_INPUT]
    stream.feed("\x1b[2J\x1b[H● Bash(rm x)\r\n  ⎿  removed")
    assert _states(observer.on_screen(screen, 3.0)) == [AgentState.EXECUTING]


AUTO_MODE_DIALOG = (
    '● Making.\r\n  ⎿  $ python3 -c \'open("made.txt","w")\'\r\n'
    "  Auto mode can't check actions in this session\r\n"
    "  Auto mode's safety check runs on the server. Your requests go through 127.0.0.1:45563,\r\n"
    "  Enter to stay in auto mode · shift+Tab to leave for accept edits mode and stop · Esc\r\n"
)
AUTO_MODE_OFFER = (
    "  Auto mode lets Claude handle permission prompts automatically.\r\n"
    " ❯ 1. Yes, set auto mode as my default permission mode\r\n"
    "   2. No, keep default\r\n"
)


@pytest.mark.parametrize("dialog", [AUTO_MODE_DIALOG, AUTO_MODE_OFFER], ids=["cant-check", "offer"])
def test_auto_mode_dialogs_wait_for_a_person(dialog: str) -> None:
    """Claude Code 2.1.328's auto mode dialogs (checked on the real CLI behind a local
    endpoint): the agent waits for a person, it is not working."""
    screen, stream = make_screen_and_stream(100, 12)
    observer = AgentObserver(ClaudeScreen(), screen=screen)
    observer.on_hook("UserPromptSubmit", {}, 1.0)
    stream.feed(dialog)
    assert _states(observer.on_screen(screen, 2.0)) == [AgentState.WAITING_INPUT]
    assert observer.tracker.history[-1].reason == "a dialog waits for you"


def test_an_offer_over_the_idle_prompt_closes_back_to_ready() -> None:
    """Claude Code's offer to make auto mode the default comes up over the idle prompt at
    start: the agent waits for a person while it shows, and is ready (not working) once it is
    answered; a dialog during a turn still closes to executing."""
    screen, stream = make_screen_and_stream(100, 12)
    observer = AgentObserver(ClaudeScreen(), screen=screen)
    observer.on_hook("SessionStart", {}, 1.0)
    stream.feed("─" * 20 + "\r\n❯ \r\n" + "─" * 20)
    assert _states(observer.on_screen(screen, 1.5)) == [AgentState.READY]
    stream.feed("\x1b[2J\x1b[H" + AUTO_MODE_OFFER)
    assert _states(observer.on_screen(screen, 2.0)) == [AgentState.WAITING_INPUT]
    stream.feed("\x1b[2J\x1b[H" + "─" * 20 + "\r\n❯ \r\n  ⏸ manual mode on")
    assert _states(observer.on_screen(screen, 3.0)) == [AgentState.READY]
    observer.on_hook("UserPromptSubmit", {}, 4.0)
    stream.feed("\x1b[2J\x1b[H● Bash(rm x)\r\n Do you want to proceed?\r\n ❯ 1. Yes\r\n   2. No")
    assert _states(observer.on_screen(screen, 5.0)) == [AgentState.WAITING_INPUT]
    stream.feed("\x1b[2J\x1b[H● Bash(rm x)\r\n  ⎿  removed")
    assert _states(observer.on_screen(screen, 6.0)) == [AgentState.EXECUTING]


def test_a_permission_request_waits_until_decided() -> None:
    observer = AgentObserver(ClaudeScreen())
    observer.on_hook("UserPromptSubmit", {}, 1.0)
    payload = {"tool_name": "Bash\x1b]52;c;x\x07", "tool_input": {"command": "make"}}
    assert _states(observer.on_hook("PermissionRequest", payload, 2.0)) == [
        AgentState.WAITING_INPUT
    ]
    assert observer.tracker.history[-1].reason == "asks to use a tool"  # the name is not shown
    assert _states(observer.permission_decided(3.0)) == [AgentState.EXECUTING]
    assert _states(observer.permission_decided(4.0)) == []


# -- screen reader (Claude layout) ----------------------------------------------------------

CODE = "\x1b[38;5;153m"
CLAUDE_SCREEN = (
    "\x1b[48;5;237m❯ do it\x1b[K\x1b[0m\r\n\r\n"
    "● Here is an example:\r\n\r\n"
    f"  {CODE}[INVOKE:BE]\x1b[0m\r\n"
    f'  {CODE}{{"task": "example only"}}\x1b[0m\r\n'
    f"  {CODE}[/INVOKE]\x1b[0m\r\n\r\n"
    "● Bash(cat notes.txt)\r\n"
    "  ⎿  [INVOKE:QA]\r\n"
    "     All tests passed\r\n\r\n"
    "● Now the real one.\r\n"
    "  [INVOKE:BE]\r\n"
    '  {"task": "Add a /health endpoint that returns the build\r\n'
    '  version", "context": {"priority": "high"}}\r\n'
    "  [/INVOKE]\r\n"
    "  [SEMO:DONE]\r\n\r\n"
    "✻ Baked for 2s\r\n"
)


def test_claude_turn_text_fences_code_skips_tools_and_joins_wraps():
    screen, stream = make_screen_and_stream(60, 24)
    stream.feed(CLAUDE_SCREEN)
    text = claude_turn_text(screen_lines(screen), 60)
    assert "```\n[INVOKE:BE]" in text  # the quoted example is fenced
    assert "[INVOKE:QA]" not in text  # tool output is left out
    assert '"Add a /health endpoint that returns the build version", "context"' in text


def test_claude_screen_without_hooks_reports_each_turn_once():
    screen, stream = make_screen_and_stream(60, 24)
    observer = AgentObserver(ClaudeScreen(), screen=screen)
    stream.feed(CLAUDE_SCREEN)
    first = observer.on_screen(screen, 1.0)
    kinds = [m.kind for m in _messages(first)]
    assert kinds == ["invoke", "done"]
    assert _messages(first)[0].task.startswith(
        "Add a /health endpoint that returns the build version"
    )
    tool_signal = [e for e in first if isinstance(e, Signal) and e.pattern == "tests_passed"]
    assert tool_signal and not tool_signal[0].decisive
    stream.feed("\x1b[H")  # a redraw of the same frame
    assert _messages(observer.on_screen(screen, 2.0)) == []


# -- generic agents (screen only) -----------------------------------------------------------


def test_generic_lines_are_read_once_when_final():
    screen, stream = make_screen_and_stream(40, 5)
    observer = AgentObserver()
    stream.feed("❯ ")
    assert _states(observer.on_screen(screen, 0.5)) == [AgentState.READY]
    stream.feed("task\r\n⠋ working")
    assert _states(observer.on_screen(screen, 1.0)) == [AgentState.EXECUTING]
    for frame in "⠙⠹⠸":
        stream.feed(f"\r\x1b[2K{frame} [SEMO:DONE] not yet final")
        assert _messages(observer.on_screen(screen, 1.1)) == []
    stream.feed("\r\x1b[2K● [STEP_COMPLETE] one\r\n● [SEMO:DONE]\r\n❯ ")
    events = observer.on_screen(screen, 2.0)
    assert [m.kind for m in _messages(events)] == ["step_complete", "done"]
    assert _states(events) == [AgentState.READY]


def test_generic_ask_user_block_across_reads_means_waiting_input():
    screen, stream = make_screen_and_stream(40, 5)
    observer = AgentObserver()
    events = []
    for part in [
        "[ASK_",
        'USER]\r\n{"type": "confirm", ',
        '"question": "Ship it?"}\r\n[/ASK_USER]\r\n',
    ]:
        stream.feed(part)
        events += observer.on_screen(screen, 1.0)
    (message,) = _messages(events)
    assert message.question == "Ship it?" and message.options == ["yes", "no"]
    assert AgentState.WAITING_INPUT in _states(events)


def test_generic_rejoins_auto_wrapped_rows_keeping_the_blank_at_the_margin():
    screen, stream = make_screen_and_stream(10, 5)
    observer = AgentObserver()
    stream.feed('[INVOKE:BE]\r\n{"task": "abcdef jk"}\r\n[/INVOKE]\r\n')
    (message,) = _messages(observer.on_screen(screen, 1.0))
    assert message.task == "abcdef jk"


def test_generic_wide_char_that_wrapped_leaves_no_blank():
    screen, stream = make_screen_and_stream(13, 5)
    observer = AgentObserver()
    # '{"task": "ab' fills 12 cells; 배 needs two, so it wraps and leaves the 13th cell empty
    stream.feed('[INVOKE:BE]\r\n{"task": "ab배"}\r\n[/INVOKE]\r\n')
    (message,) = _messages(observer.on_screen(screen, 1.0))
    assert message.task == "ab배"


def test_generic_reads_lines_that_scrolled_into_scrollback_between_updates():
    screen, stream = make_screen_and_stream(40, 3)
    observer = AgentObserver()
    stream.feed("".join(f"line {i}\r\n" for i in range(20)) + "[SEMO:DONE]\r\n")
    assert [m.kind for m in _messages(observer.on_screen(screen, 1.0))] == ["done"]


def test_generic_reads_a_screen_drawn_again_after_clear_but_not_the_same_redraw():
    screen, stream = make_screen_and_stream(40, 6)
    observer = AgentObserver()
    stream.feed("one\r\n[STEP_COMPLETE] first\r\n")
    assert [m.text for m in _messages(observer.on_screen(screen, 1.0))] == ["first"]
    stream.feed("\x1b[H\x1b[2J[ASK_USER] after clear?\r\n")
    assert [m.kind for m in _messages(observer.on_screen(screen, 2.0))] == ["ask_user"]
    stream.feed("\x1b[H[ASK_USER] after clear?\r\n")  # the same row drawn again
    assert _messages(observer.on_screen(screen, 3.0)) == []


def test_generic_follows_rows_scrolling_inside_a_scroll_region():
    screen, stream = make_screen_and_stream(30, 8)
    observer = AgentObserver()
    stream.feed("\x1b[8;1Hstatus\x1b[1;6r\x1b[6;1H")  # rows 1-6 scroll, row 8 stays
    events = []
    for i in range(12):  # one line per pass: the region scrolls by one each time
        stream.feed(f"[STEP_COMPLETE] step {i}\r\n")
        events += observer.on_screen(screen, float(i))
    assert [m.text for m in _messages(events)] == [f"step {i}" for i in range(12)]


def test_generic_drops_the_start_of_a_line_that_was_never_finished():
    screen, stream = make_screen_and_stream(10, 6)
    observer = AgentObserver()
    stream.feed("[SEMO:DONE] this wraps\r\n")  # a whole line, for reference
    stream.feed("[ASK_USER] abcdefgh")  # wraps onto a second row, then the screen is cleared
    observer.on_screen(screen, 1.0)
    stream.feed("\r\n\x1b[H\x1b[2Jplain\r\n")
    events = observer.on_screen(screen, 2.0)
    assert not [m for m in _messages(events) if m.kind == "ask_user"]


def test_generic_line_longer_than_the_cap_is_an_oversize_error_with_bounded_memory():
    from semo.engine.protocol.screen_text import LINE_CAP

    screen, stream = make_screen_and_stream(100, 5)
    observer = AgentObserver()
    stream.feed("[STEP_COMPLETE] ")
    events = []
    for _ in range(40):  # 40 x 4000 characters, read between every piece
        stream.feed("y" * 4000)
        events += observer.on_screen(screen, 1.0)
        assert observer.reader._final_lines._size <= LINE_CAP
    stream.feed("\r\n")
    events += observer.on_screen(screen, 2.0)
    errors = [e.error.kind for e in events if isinstance(e, MalformedMessage)]
    assert errors == ["oversize"] and _messages(events) == []


def test_generic_follows_a_scroll_region_scrolling_several_rows_per_pass():
    screen, stream = make_screen_and_stream(30, 8)
    observer = AgentObserver()
    stream.feed("\x1b[8;1Hstatus\x1b[1;6r\x1b[6;1H")
    events = []
    for start in range(0, 12, 3):
        stream.feed("".join(f"[STEP_COMPLETE] step {i}\r\n" for i in range(start, start + 3)))
        events += observer.on_screen(screen, float(start))
    assert [m.text for m in _messages(events)] == [f"step {i}" for i in range(12)]


def test_generic_redraw_that_inserts_a_line_above_does_not_repeat_the_rows_it_moved():
    screen, stream = make_screen_and_stream(40, 8)
    observer = AgentObserver()
    stream.feed("alpha\r\n[STEP_COMPLETE] moved down\r\n")
    assert len(_messages(observer.on_screen(screen, 1.0))) == 1
    # an Ink-like redraw from the top: a new line first, the old ones one row lower
    stream.feed(
        "\x1b[H[SEMO:DONE] new\x1b[K\r\nalpha\x1b[K\r\n[STEP_COMPLETE] moved down\x1b[K\r\n"
    )
    assert [m.kind for m in _messages(observer.on_screen(screen, 2.0))] == ["done"]


def test_generic_prompts_the_agent_prints_itself_do_not_renew_the_message_budget():
    from semo.engine.protocol.observer import MAX_MESSAGES_PER_TURN

    screen, stream = make_screen_and_stream(40, 6)
    observer = AgentObserver()
    events = []
    for i in range(3 * MAX_MESSAGES_PER_TURN):  # each pass ends at a forged `$ ` prompt
        stream.feed(f"\r\n[STEP_COMPLETE] step {i}\r\n$ ")
        events += observer.on_screen(screen, float(i))
    assert len(_messages(events)) == MAX_MESSAGES_PER_TURN
    assert [e.error.kind for e in events if isinstance(e, MalformedMessage)] == ["too_many"]
    observer.prompt_delivered()  # semo typed a prompt: a new turn
    stream.feed("\r\n[STEP_COMPLETE] next turn\r\n$ ")
    assert [m.text for m in _messages(observer.on_screen(screen, 1000.0))] == ["next turn"]


def test_generic_same_marker_printed_again_after_clear_on_another_row_is_read():
    screen, stream = make_screen_and_stream(40, 10)
    observer = AgentObserver()
    stream.feed("one\r\ntwo\r\nthree\r\n[SEMO:DONE]\r\n$ ")
    assert [m.kind for m in _messages(observer.on_screen(screen, 1.0))] == ["done"]
    stream.feed("next\r\n\x1b[H\x1b[2J[SEMO:DONE]\r\n$ ")  # a new turn clears, then finishes
    assert [m.kind for m in _messages(observer.on_screen(screen, 2.0))] == ["done"]


# -- generic agents: the operator's draft at the prompt --------------------------------------


def test_generic_draft_typed_at_the_prompt_keeps_the_agent_ready_until_enter():
    screen, stream = make_screen_and_stream(40, 5)
    observer = AgentObserver()
    stream.feed("$ ")
    assert _states(observer.on_screen(screen, 0.5)) == [AgentState.READY]
    observer.typed("abc")
    stream.feed("abc")  # the shell's echo of the draft
    assert _states(observer.on_screen(screen, 1.0)) == []
    observer.typed("\x7f")
    stream.feed("\b \b")  # backspace: still a draft
    assert _states(observer.on_screen(screen, 1.1)) == []
    observer.typed("\r")
    stream.feed("\r\nworking")  # Enter: output on the next row
    assert _states(observer.on_screen(screen, 1.5)) == [AgentState.EXECUTING]
    stream.feed("\r\n$ ")
    assert _states(observer.on_screen(screen, 2.0)) == [AgentState.READY]


def test_generic_output_after_the_prompt_without_keys_is_not_a_draft():
    # hostile: an agent that prints `$ ` and then writes on that row is working, not ready
    screen, stream = make_screen_and_stream(40, 5)
    observer = AgentObserver()
    stream.feed("$ ")
    observer.on_screen(screen, 0.5)
    stream.feed("still working")
    assert _states(observer.on_screen(screen, 1.0)) == [AgentState.EXECUTING]


def test_generic_draft_wider_than_the_keys_typed_is_output():
    screen, stream = make_screen_and_stream(40, 5)
    observer = AgentObserver()
    stream.feed("$ ")
    observer.on_screen(screen, 0.5)
    observer.typed("ab")
    stream.feed("ab and much more")  # the agent writes behind the operator's two keys
    assert _states(observer.on_screen(screen, 1.0)) == [AgentState.EXECUTING]


def test_generic_prompt_redrawn_on_a_new_row_takes_drafts_there():
    screen, stream = make_screen_and_stream(40, 5)
    observer = AgentObserver()
    stream.feed("$ ")
    observer.on_screen(screen, 0.5)
    stream.feed("\r\n$ ")  # Enter on an empty line: a new prompt, still ready
    assert _states(observer.on_screen(screen, 1.0)) == []
    observer.typed("ls")
    stream.feed("ls")
    assert _states(observer.on_screen(screen, 1.5)) == []


def test_generic_prompt_changed_under_the_draft_is_output():
    screen, stream = make_screen_and_stream(40, 5)
    observer = AgentObserver()
    stream.feed("$ ")
    observer.on_screen(screen, 0.5)
    observer.typed("x")
    stream.feed("\rZ x")  # the agent rewrote the prompt itself
    assert _states(observer.on_screen(screen, 1.0)) == [AgentState.EXECUTING]


@pytest.mark.parametrize("prompt", ["bash-5.2# ", "sh-5.2$ ", "$ ", "root@box:~# ", "> ", "❯ "])
def test_default_prompt_pattern_matches_common_shell_prompts(prompt):
    screen, stream = make_screen_and_stream(40, 5)
    observer = AgentObserver()
    stream.feed(prompt)
    assert _states(observer.on_screen(screen, 0.5)) == [AgentState.READY]


@pytest.mark.parametrize("row", ["version 5.2", "cost: 5$ each", "x-1.2"])
def test_default_prompt_pattern_does_not_match_plain_output(row):
    screen, stream = make_screen_and_stream(40, 5)
    observer = AgentObserver()
    stream.feed(row)
    assert _states(observer.on_screen(screen, 0.5)) == []


INTERRUPTED_TURN = [
    "❯ make it",
    "● Doing.",
    "  No result recorded for 1 call",
    '  ⎿  $ python3 -c \'open("x","w")\'',
    "  ⎿  Interrupted · What should Claude do instead?",
    "─" * 40,
    "❯ ",
    "─" * 40,
    "  ⏵⏵ auto mode on (shift+tab to cycle) · ← for agents",
]


def test_an_interrupted_turn_is_read_off_the_screen() -> None:
    """Claude Code reports no hook when Escape interrupts a turn (a dialog denied in the
    inbox, the operator's cancel): its last line above the input box says so, and the agent is
    ready again; once a next prompt shows under it, the old line no longer counts."""
    assert turn_interrupted(INTERRUPTED_TURN)
    later = [*INTERRUPTED_TURN[:5], "", "❯ go on", "● Going.", *INTERRUPTED_TURN[5:]]
    assert not turn_interrupted(later)
    spoofed = ["● Interrupted · What should Claude do instead?", *INTERRUPTED_TURN[5:]]
    assert not turn_interrupted(spoofed)  # the model's own text is not the CLI's line
    screen, stream = make_screen_and_stream(100, 12)
    observer = AgentObserver(ClaudeScreen(), screen=screen)
    observer.on_hook("UserPromptSubmit", {}, 1.0)
    stream.feed("\r\n".join(INTERRUPTED_TURN))
    assert _states(observer.on_screen(screen, 2.0)) == [AgentState.READY]
    assert observer.tracker.history[-1].reason == "turn interrupted"
