"""The detection corpus: scenarios, each with the outcome its author expects.

Every scenario is recorded by ``python -m tests.corpus.record`` into ``<name>.cast`` (asciicast
v2: output, and for Claude Code the hooks the engine received as ``m`` markers) and
``<name>.expected.json`` (the :class:`Expect` below, written by hand, never by running the
parser). ``tests/protocol/test_corpus.py`` replays the casts and compares.

Claude scenarios run the real ``claude`` CLI offline against a scripted Messages API; each
:class:`Turn` types a prompt and the script answers with its replies (one per API request: a
reply with ``tool_uses`` is followed by the reply after the tool ran). Generic scenarios run a
small Python program that prints protocol text the way a plain CLI agent would.

Expectations:

- ``messages``: every protocol message, in order, as ``{"kind": ..., <key fields>}``; a found
  message matches when each listed field is equal (unlisted fields are not compared).
- ``errors``: protocol error kinds (``bad_json``...), in order.
- ``final_state``: the session state when the scenario's last turn is over, i.e. just before
  the agent is shut down (the end of a recording always terminates the session).
- ``state_sequence``: states that must occur in this order (others may come between).
- ``decisive``: signal patterns that must be reported as decisive (the agent's own words).
- ``not_decisive``: signal patterns that must never be reported as decisive.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from tests.support.scripted_api import ScriptedReply, ToolUse

Agent = Literal["claude", "generic"]
Dialog = Literal["approve", "hold"] | None


@dataclass(frozen=True)
class Expect:
    final_state: str
    messages: tuple[dict[str, Any], ...] = ()
    errors: tuple[str, ...] = ()
    state_sequence: tuple[str, ...] = ()
    decisive: tuple[str, ...] = ()
    not_decisive: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "messages": list(self.messages),
            "errors": list(self.errors),
            "final_state": self.final_state,
            "state_sequence": list(self.state_sequence),
            "decisive": list(self.decisive),
            "not_decisive": list(self.not_decisive),
        }


@dataclass(frozen=True)
class Turn:
    """One prompt typed into Claude Code and the scripted replies of its turn.

    ``dialog``: a permission dialog is expected; ``"approve"`` answers it (Enter on "1. Yes"),
    ``"hold"`` leaves it on screen and ends the scenario there.
    """

    prompt: str
    replies: tuple[ScriptedReply, ...]
    dialog: Dialog = None


@dataclass(frozen=True)
class Scenario:
    name: str
    agent: Agent
    description: str
    expect: Expect
    cols: int = 80
    rows: int = 20
    turns: tuple[Turn, ...] = ()  # claude
    files: dict[str, str] = field(default_factory=dict)  # worktree files (claude)
    permission_default: bool = False  # permission mode "default": tool calls ask first
    program: str = ""  # generic: Python source run with `python -u -c`

    def expected_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "agent": self.agent,
            "description": self.description,
            "cols": self.cols,
            "rows": self.rows,
            **self.expect.as_json(),
        }


def claude(
    name: str,
    description: str,
    reply: str | ScriptedReply | tuple[ScriptedReply, ...],
    expect: Expect,
    *,
    cols: int = 80,
    prompt: str = "go on",
    **kwargs: Any,
) -> Scenario:
    """A one-turn Claude Code scenario."""
    if isinstance(reply, str):
        replies: tuple[ScriptedReply, ...] = (ScriptedReply(reply),)
    elif isinstance(reply, ScriptedReply):
        replies = (reply,)
    else:
        replies = reply
    return Scenario(
        name, "claude", description, expect, cols=cols, turns=(Turn(prompt, replies),), **kwargs
    )


def bash(command: str, description: str = "Run a command") -> ToolUse:
    return ToolUse("Bash", {"command": command, "description": description})


def generic(name: str, description: str, program: str, expect: Expect, **kw: Any) -> Scenario:
    return Scenario(name, "generic", description, expect, program=program, **kw)


# -- message bodies used more than once ---------------------------------------------------------

HEALTH_TASK = "Add a GET /health endpoint that returns 200"
INVOKE_BE_JSON = (
    "[INVOKE:BE]\n"
    + json.dumps({"task": HEALTH_TASK, "context": {"file": "api/routes.py"}})
    + "\n[/INVOKE]"
)
CHOICE_DB = (
    "[ASK_USER]\n"
    '{"type": "choice", "question": "Which database?", "options": ["postgres", "sqlite"]}\n'
    "[/ASK_USER]"
)
ASK_DB = {
    "kind": "ask_user",
    "question": "Which database?",
    "question_type": "choice",
    "options": ["postgres", "sqlite"],
}
INVOKE_HEALTH = {
    "kind": "invoke",
    "target": "BE",
    "task": HEALTH_TASK,
    "context": {"file": "api/routes.py"},
}
SAME_REPLY = (
    "I read the routes module and the settings loader. The health check belongs next to the "
    "other read-only endpoints, and it needs no database access at all.\n\n"
    "[STEP_COMPLETE] routes reviewed\n\n" + INVOKE_BE_JSON + "\n\nI will wait for BE's result."
)
SAME_REPLY_EXPECT = Expect(
    "ready",
    messages=({"kind": "step_complete", "text": "routes reviewed"}, INVOKE_HEALTH),
    state_sequence=("ready", "executing", "ready"),
)
LONG_TASK = (
    "Refactor the session pool so that warm sessions are handed out in least-recently-used "
    "order, keep at most four idle sessions per role, close the rest after ten minutes of "
    "idleness, and add unit tests for the eviction order and the idle timeout"
)
LONG_CONTEXT = {
    "files": ["engine/pool.py", "engine/session.py", "tests/test_pool.py"],
    "constraints": {"max_idle_per_role": 4, "idle_timeout_seconds": 600},
    "notes": "keep the public API of Pool unchanged; the console depends on it",
}
LONG_INVOKE = (
    "[INVOKE:BE]\n" + json.dumps({"task": LONG_TASK, "context": LONG_CONTEXT}) + ("\n[/INVOKE]")
)
LONG_EXPECT = Expect(
    "ready",
    messages=({"kind": "invoke", "target": "BE", "task": LONG_TASK, "context": LONG_CONTEXT},),
)
QUOTED_FILE = (
    "Example messages for the docs:\n"
    "[INVOKE:BE]\n"
    '{"task": "from the file, not from the model"}\n'
    "[/INVOKE]\n"
    "[SEMO:DONE]\n"
)


def _claude_scenarios() -> list[Scenario]:
    s: list[Scenario] = []
    # -- each message type, both forms -----------------------------------------------------------
    s.append(
        claude(
            "ask_user_oneline",
            "ASK_USER, one-line free-text form",
            "I need one decision first.\n\n[ASK_USER] Which database should I use?",
            Expect(
                "waiting_input",
                messages=(
                    {
                        "kind": "ask_user",
                        "question": "Which database should I use?",
                        "question_type": "text",
                        "options": [],
                    },
                ),
            ),
        )
    )
    s.append(
        claude(
            "ask_user_block_text",
            "ASK_USER block with a JSON text question",
            "[ASK_USER]\n"
            '{"type": "text", "question": "What port should the API listen on?"}\n'
            "[/ASK_USER]",
            Expect(
                "waiting_input",
                messages=(
                    {
                        "kind": "ask_user",
                        "question": "What port should the API listen on?",
                        "question_type": "text",
                        "options": [],
                    },
                ),
            ),
        )
    )
    s.append(
        claude(
            "ask_user_block_choice",
            "ASK_USER block with a choice question",
            "Two databases would work here.\n\n" + CHOICE_DB,
            Expect("waiting_input", messages=(ASK_DB,)),
        )
    )
    s.append(
        claude(
            "ask_user_block_confirm",
            "ASK_USER block with a confirm question",
            "[ASK_USER]\n"
            '{"type": "confirm", "question": "Drop the old sessions table?"}\n'
            "[/ASK_USER]",
            Expect(
                "waiting_input",
                messages=(
                    {
                        "kind": "ask_user",
                        "question": "Drop the old sessions table?",
                        "question_type": "confirm",
                        "options": ["yes", "no"],
                    },
                ),
            ),
        )
    )
    s.append(
        claude(
            "ask_user_block_free_text",
            "ASK_USER block whose payload is free text, not JSON",
            "[ASK_USER]\nShould the export include archived projects?\n[/ASK_USER]",
            Expect(
                "waiting_input",
                messages=(
                    {
                        "kind": "ask_user",
                        "question": "Should the export include archived projects?",
                        "question_type": "text",
                    },
                ),
            ),
        )
    )
    s.append(
        claude(
            "invoke_json",
            "INVOKE with a JSON payload and context",
            "BE owns the API.\n\n" + INVOKE_BE_JSON,
            Expect("ready", messages=(INVOKE_HEALTH,)),
        )
    )
    s.append(
        claude(
            "invoke_text",
            "INVOKE with a free-text task",
            "[INVOKE:QA]\nRun the whole test suite and report every failure.\n[/INVOKE]",
            Expect(
                "ready",
                messages=(
                    {
                        "kind": "invoke",
                        "target": "QA",
                        "task": "Run the whole test suite and report every failure.",
                        "context": None,
                    },
                ),
            ),
        )
    )
    s.append(
        claude(
            "invoke_json_fenced_body",
            "INVOKE whose JSON body is wrapped in a ```json fence (fence removed)",
            "[INVOKE:BE]\n```json\n"
            '{"task": "Rotate the API keys", "context": {"env": "staging"}}\n'
            "```\n[/INVOKE]",
            Expect(
                "ready",
                messages=(
                    {
                        "kind": "invoke",
                        "target": "BE",
                        "task": "Rotate the API keys",
                        "context": {"env": "staging"},
                    },
                ),
            ),
        )
    )
    s.append(
        claude(
            "invoke_close_with_role",
            "INVOKE closed by the [/INVOKE:QA] variant",
            "[INVOKE:QA]\nRe-run the flaky login test ten times.\n[/INVOKE:QA]",
            Expect(
                "ready",
                messages=(
                    {
                        "kind": "invoke",
                        "target": "QA",
                        "task": "Re-run the flaky login test ten times.",
                    },
                ),
            ),
        )
    )
    s.append(
        claude(
            "deliver_result_json",
            "DELIVER_RESULT with a JSON payload",
            "[DELIVER_RESULT:FE]\n"
            '{"invocation_id": "inv-42", "summary": "GET /health added in api/routes.py; '
            'tests pass"}\n[/DELIVER_RESULT]',
            Expect(
                "ready",
                messages=(
                    {
                        "kind": "deliver_result",
                        "recipient": "FE",
                        "invocation_id": "inv-42",
                        "summary": "GET /health added in api/routes.py; tests pass",
                    },
                ),
            ),
        )
    )
    s.append(
        claude(
            "deliver_result_text",
            "DELIVER_RESULT with a free-text payload",
            "Here is what you asked for.\n\n"
            "[DELIVER_RESULT:FE]\nGET /health added in api/routes.py; tests pass.\n"
            "[/DELIVER_RESULT]",
            Expect(
                "ready",
                messages=(
                    {
                        "kind": "deliver_result",
                        "recipient": "FE",
                        "invocation_id": None,
                        "summary": "GET /health added in api/routes.py; tests pass.",
                        "payload": "GET /health added in api/routes.py; tests pass.",
                    },
                ),
            ),
        )
    )
    s.append(
        claude(
            "deliver_result_int_id",
            "DELIVER_RESULT whose invocation_id is an integer (turned into a string)",
            "[DELIVER_RESULT:PM]\n"
            '{"invocation_id": 7, "summary": "Release notes drafted", "files": ["NOTES.md"]}\n'
            "[/DELIVER_RESULT]",
            Expect(
                "ready",
                messages=(
                    {
                        "kind": "deliver_result",
                        "recipient": "PM",
                        "invocation_id": "7",
                        "summary": "Release notes drafted",
                    },
                ),
            ),
        )
    )
    s.append(
        claude(
            "step_complete",
            "STEP_COMPLETE one-liner",
            "The schema is in place.\n\n[STEP_COMPLETE] migrations written",
            Expect("ready", messages=({"kind": "step_complete", "text": "migrations written"},)),
        )
    )
    s.append(
        claude(
            "done_bare",
            "[SEMO:DONE] alone on its line",
            "Everything is finished and committed.\n\n[SEMO:DONE]",
            Expect("ready", messages=({"kind": "done", "text": ""},), decisive=("semo_done",)),
        )
    )
    s.append(
        claude(
            "done_summary",
            "[SEMO:DONE] with a one-line summary",
            "[SEMO:DONE] /health endpoint added and tested",
            Expect(
                "ready",
                messages=({"kind": "done", "text": "/health endpoint added and tested"},),
                decisive=("semo_done",),
            ),
        )
    )
    # -- several messages in one reply ---------------------------------------------------------
    s.append(
        claude(
            "several_messages",
            "STEP_COMPLETE, INVOKE, DELIVER_RESULT and SEMO:DONE in one reply",
            "[STEP_COMPLETE] API reviewed\n\n"
            + INVOKE_BE_JSON
            + "\n\n[DELIVER_RESULT:PM]\nReview finished; BE has the follow-up.\n"
            "[/DELIVER_RESULT]\n\n[SEMO:DONE] review handed over",
            Expect(
                "ready",
                messages=(
                    {"kind": "step_complete", "text": "API reviewed"},
                    INVOKE_HEALTH,
                    {
                        "kind": "deliver_result",
                        "recipient": "PM",
                        "summary": "Review finished; BE has the follow-up.",
                    },
                    {"kind": "done", "text": "review handed over"},
                ),
                decisive=("semo_done",),
            ),
        )
    )
    s.append(
        claude(
            "several_steps_then_ask",
            "two STEP_COMPLETE lines and an ASK_USER in one reply",
            "[STEP_COMPLETE] tables created\n[STEP_COMPLETE] seed data loaded\n\n" + CHOICE_DB,
            Expect(
                "waiting_input",
                messages=(
                    {"kind": "step_complete", "text": "tables created"},
                    {"kind": "step_complete", "text": "seed data loaded"},
                    ASK_DB,
                ),
            ),
        )
    )
    # -- split across PTY reads: slow streaming ------------------------------------------------
    s.append(
        claude(
            "slow_stream_invoke",
            "INVOKE streamed 4 characters at a time (split across many PTY reads)",
            ScriptedReply(
                "Handing this over.\n\n" + INVOKE_BE_JSON, chunk_size=4, chunk_delay=0.02
            ),
            Expect("ready", messages=(INVOKE_HEALTH,)),
        )
    )
    s.append(
        claude(
            "slow_stream_ask",
            "ASK_USER choice block streamed 3 characters at a time",
            ScriptedReply(CHOICE_DB, chunk_size=3, chunk_delay=0.02),
            Expect("waiting_input", messages=(ASK_DB,)),
        )
    )
    # -- same reply at 40, 80, 200 columns -----------------------------------------------------
    for cols in (40, 80, 200):
        s.append(
            claude(
                f"same_reply_{cols}",
                f"the same prose + STEP_COMPLETE + INVOKE reply at {cols} columns",
                SAME_REPLY,
                SAME_REPLY_EXPECT,
                cols=cols,
            )
        )
    # -- long JSON the renderer wraps ----------------------------------------------------------
    s.append(
        claude(
            "long_json_80",
            "a 450-character INVOKE JSON line at 80 columns",
            LONG_INVOKE,
            LONG_EXPECT,
        )
    )
    s.append(
        claude(
            "long_json_40",
            "the same long INVOKE JSON at 40 columns",
            LONG_INVOKE,
            LONG_EXPECT,
            cols=40,
        )
    )
    s.append(
        claude(
            "long_ask_choice_40",
            "a choice question with long options, wrapped at 40 columns",
            "[ASK_USER]\n"
            + json.dumps(
                {
                    "type": "choice",
                    "question": "Which migration strategy should the release use?",
                    "options": [
                        "expand and contract over two releases",
                        "one blocking migration in a maintenance window",
                    ],
                }
            )
            + "\n[/ASK_USER]",
            Expect(
                "waiting_input",
                messages=(
                    {
                        "kind": "ask_user",
                        "question": "Which migration strategy should the release use?",
                        "question_type": "choice",
                        "options": [
                            "expand and contract over two releases",
                            "one blocking migration in a maintenance window",
                        ],
                    },
                ),
            ),
            cols=40,
        )
    )
    # -- markers that must not count -----------------------------------------------------------
    s.append(
        claude(
            "fenced_quote",
            "the model quotes messages inside a ``` code block: nothing counts",
            "To hand work over, an agent writes:\n\n```\n"
            + INVOKE_BE_JSON
            + "\n[SEMO:DONE]\n```\n\nThat is all there is to it.",
            Expect("ready", not_decisive=("semo_done",)),
        )
    )
    s.append(
        claude(
            "fenced_quote_then_real",
            "a ~~~ fenced example followed by a real STEP_COMPLETE",
            "The format is:\n\n~~~\n[STEP_COMPLETE] example text\n~~~\n\n"
            "[STEP_COMPLETE] docs updated",
            Expect("ready", messages=({"kind": "step_complete", "text": "docs updated"},)),
        )
    )
    s.append(
        claude(
            "marker_mid_line",
            "markers in the middle of a line, after a bullet or a quote sign: nothing counts",
            "When you are done, write [SEMO:DONE] on its own line.\n\n"
            "- [STEP_COMPLETE] is for progress\n> [ASK_USER] is for questions",
            Expect("ready", not_decisive=("semo_done",)),
        )
    )
    s.append(
        claude(
            "tool_output_marker",
            "a Bash `cat` of a file containing [INVOKE:BE] and [SEMO:DONE]: nothing counts",
            (
                ScriptedReply("Let me look at the file.", tool_uses=(bash("cat notes.txt"),)),
                ScriptedReply("The file holds two example messages."),
            ),
            Expect("ready", not_decisive=("semo_done",)),
            files={"notes.txt": QUOTED_FILE},
        )
    )
    s.append(
        claude(
            "tool_output_tests_passed",
            "'All tests passed' and 'Build completed successfully' printed by a tool",
            (
                ScriptedReply(
                    "Running the suite.",
                    tool_uses=(
                        bash("printf 'Build completed successfully\\nAll tests passed\\n'"),
                    ),
                ),
                ScriptedReply("The suite ran; see the output above."),
            ),
            Expect("ready", not_decisive=("tests_passed", "build_ok")),
        )
    )
    s.append(
        claude(
            "tool_output_errors",
            "'Error:', 'fatal:' and 'Permission denied' printed by a tool",
            (
                ScriptedReply(
                    "Checking the logs.",
                    tool_uses=(
                        bash(
                            "printf 'Error: connection refused\\nfatal: not a git repository\\n"
                            "Permission denied (publickey)\\n'"
                        ),
                    ),
                ),
                ScriptedReply("Those lines come from last week's log."),
            ),
            Expect("ready", not_decisive=("error", "fatal", "permission_denied")),
        )
    )
    s.append(
        claude(
            "tool_output_commit_pr",
            "a commit line and 'Created pull request #12' printed by a tool",
            (
                ScriptedReply(
                    "Reading the release log.",
                    tool_uses=(bash("cat release.log"),),
                ),
                ScriptedReply("That is the history of the last release."),
            ),
            Expect("ready", not_decisive=("commit", "pull_request")),
            files={"release.log": "[main abc1234] add health endpoint\nCreated pull request #12\n"},
        )
    )
    s.append(
        claude(
            "grep_marker_then_done",
            "a grep shows [SEMO:DONE] in a file; then the model really finishes",
            (
                ScriptedReply(
                    "Searching.",
                    tool_uses=(bash("grep -n SEMO notes.txt"),),
                ),
                ScriptedReply("Found the sample.\n\n[SEMO:DONE] search finished"),
            ),
            Expect(
                "ready",
                messages=({"kind": "done", "text": "search finished"},),
                decisive=("semo_done",),
            ),
            files={"notes.txt": QUOTED_FILE},
        )
    )
    # -- malformed ------------------------------------------------------------------------------
    s.append(
        claude(
            "malformed_json_invoke",
            "INVOKE with a trailing comma in its JSON",
            '[INVOKE:BE]\n{"task": "Add caching", "context": {"ttl": 60},}\n[/INVOKE]',
            Expect("ready", errors=("bad_json",)),
        )
    )
    s.append(
        claude(
            "malformed_json_ask",
            "ASK_USER with a missing comma between options, then a valid STEP_COMPLETE",
            "[ASK_USER]\n"
            '{"type": "choice", "question": "Which?", "options": ["a" "b"]}\n'
            "[/ASK_USER]\n\n[STEP_COMPLETE] config read",
            Expect(
                "ready",
                errors=("bad_json",),
                messages=({"kind": "step_complete", "text": "config read"},),
            ),
        )
    )
    s.append(
        claude(
            "unknown_question_type",
            "ASK_USER with type 'multiple'",
            "[ASK_USER]\n"
            '{"type": "multiple", "question": "Pick the regions", "options": ["eu", "us"]}\n'
            "[/ASK_USER]",
            Expect("ready", errors=("unknown_question_type",)),
        )
    )
    s.append(
        claude(
            "missing_close",
            "an INVOKE block never closed",
            'Sending it.\n\n[INVOKE:BE]\n{"task": "Add caching"}',
            Expect("ready", errors=("missing_close",)),
        )
    )
    s.append(
        claude(
            "unexpected_close",
            "a stray [/ASK_USER] and a choice with one option",
            "[/ASK_USER]\n\n[ASK_USER]\n"
            '{"type": "choice", "question": "Only one?", "options": ["yes"]}\n[/ASK_USER]',
            Expect("ready", errors=("unexpected_close", "invalid_payload")),
        )
    )
    # -- unicode --------------------------------------------------------------------------------
    s.append(
        claude(
            "unicode_korean_ask",
            "a Korean one-line question",
            "한 가지만 확인할게요.\n\n[ASK_USER] 어떤 데이터베이스를 사용할까요?",
            Expect(
                "waiting_input",
                messages=(
                    {
                        "kind": "ask_user",
                        "question": "어떤 데이터베이스를 사용할까요?",
                        "question_type": "text",
                    },
                ),
            ),
        )
    )
    s.append(
        claude(
            "unicode_emoji_invoke",
            "INVOKE with emoji and Korean in its JSON",
            "[INVOKE:FE]\n"
            '{"task": "Add the 🚀 launch button", "context": {"label": "시작하기 ✅"}}\n'
            "[/INVOKE]",
            Expect(
                "ready",
                messages=(
                    {
                        "kind": "invoke",
                        "target": "FE",
                        "task": "Add the 🚀 launch button",
                        "context": {"label": "시작하기 ✅"},
                    },
                ),
            ),
        )
    )
    s.append(
        claude(
            "unicode_wide_choice_40",
            "a choice question in Korean with emoji options, at 40 columns",
            "[ASK_USER]\n"
            '{"type": "choice", "question": "배포 환경을 골라 주세요 🌏", '
            '"options": ["스테이징 🧪", "프로덕션 🚀"]}\n[/ASK_USER]',
            Expect(
                "waiting_input",
                messages=(
                    {
                        "kind": "ask_user",
                        "question": "배포 환경을 골라 주세요 🌏",
                        "question_type": "choice",
                        "options": ["스테이징 🧪", "프로덕션 🚀"],
                    },
                ),
            ),
            cols=40,
        )
    )
    s.append(
        claude(
            "unicode_deliver_text",
            "DELIVER_RESULT with Korean free text and DONE",
            "[DELIVER_RESULT:BE]\n배포 완료 ✅ all green\n[/DELIVER_RESULT]\n\n[SEMO:DONE] 끝",
            Expect(
                "ready",
                messages=(
                    {
                        "kind": "deliver_result",
                        "recipient": "BE",
                        "summary": "배포 완료 ✅ all green",
                    },
                    {"kind": "done", "text": "끝"},
                ),
                decisive=("semo_done",),
            ),
        )
    )
    # -- spinner ---------------------------------------------------------------------------------
    s.append(
        claude(
            "spinner_then_step",
            "2.5 s of thinking spinner before the reply streams",
            ScriptedReply(
                "Thought it through.\n\n[STEP_COMPLETE] plan ready",
                first_delay=2.5,
                chunk_size=8,
                chunk_delay=0.05,
            ),
            Expect(
                "ready",
                messages=({"kind": "step_complete", "text": "plan ready"},),
                state_sequence=("executing", "ready"),
            ),
        )
    )
    # -- permission dialog ------------------------------------------------------------------------
    s.append(
        Scenario(
            "permission_dialog_approved",
            "claude",
            "permission mode default: a Bash call asks, is approved, then the turn ends done",
            Expect(
                "ready",
                messages=({"kind": "done", "text": "made.txt created"},),
                state_sequence=("executing", "waiting_input", "ready"),
                decisive=("semo_done",),
            ),
            turns=(
                Turn(
                    "make the file",
                    (
                        ScriptedReply("Making the file.", tool_uses=(bash("touch made.txt"),)),
                        ScriptedReply("[SEMO:DONE] made.txt created"),
                    ),
                    dialog="approve",
                ),
            ),
            permission_default=True,
        )
    )
    s.append(
        Scenario(
            "permission_dialog_pending",
            "claude",
            "permission mode default: the dialog is still on screen when the recording ends",
            Expect("waiting_input", state_sequence=("executing", "waiting_input")),
            turns=(
                Turn(
                    "make the file",
                    (ScriptedReply("Making the file.", tool_uses=(bash("touch made.txt"),)),),
                    dialog="hold",
                ),
            ),
            permission_default=True,
        )
    )
    # -- markers in an early text block, before a tool call ----------------------------------
    s.append(
        claude(
            "early_marker_then_tool",
            "STEP_COMPLETE in the text before a tool call; the last text block lacks it",
            (
                ScriptedReply(
                    "[STEP_COMPLETE] schema drafted", tool_uses=(bash("ls", "List files"),)
                ),
                ScriptedReply("Checked the listing."),
            ),
            Expect("ready", messages=({"kind": "step_complete", "text": "schema drafted"},)),
        )
    )
    s.append(
        claude(
            "early_invoke_then_tool_done",
            "INVOKE before a tool call, SEMO:DONE in the final text",
            (
                ScriptedReply(
                    "[INVOKE:QA]\nRun the suite after my change.\n[/INVOKE]",
                    tool_uses=(bash("true", "Check"),),
                ),
                ScriptedReply("[SEMO:DONE] handed to QA"),
            ),
            Expect(
                "ready",
                messages=(
                    {"kind": "invoke", "target": "QA", "task": "Run the suite after my change."},
                    {"kind": "done", "text": "handed to QA"},
                ),
                decisive=("semo_done",),
            ),
        )
    )
    # -- several turns ---------------------------------------------------------------------------
    s.append(
        Scenario(
            "two_turns_ask_then_done",
            "claude",
            "turn 1 asks a choice (waiting_input), turn 2 gets the answer and finishes",
            Expect(
                "ready",
                messages=(ASK_DB, {"kind": "done", "text": "configured postgres"}),
                state_sequence=("executing", "waiting_input", "executing", "ready"),
                decisive=("semo_done",),
            ),
            turns=(
                Turn("set up the db", (ScriptedReply(CHOICE_DB),)),
                Turn(
                    "postgres",
                    (ScriptedReply("Using postgres.\n\n[SEMO:DONE] configured postgres"),),
                ),
            ),
        )
    )
    s.append(
        Scenario(
            "three_turns_steps",
            "claude",
            "three turns: a step, an invoke, a plain answer (the last turn has no message)",
            Expect(
                "ready",
                messages=(
                    {"kind": "step_complete", "text": "first step"},
                    {"kind": "invoke", "target": "QA", "task": "Check the first step."},
                ),
            ),
            turns=(
                Turn("step one", (ScriptedReply("[STEP_COMPLETE] first step"),)),
                Turn(
                    "hand it over",
                    (ScriptedReply("[INVOKE:QA]\nCheck the first step.\n[/INVOKE]"),),
                ),
                Turn("thanks", (ScriptedReply("You are welcome."),)),
            ),
        )
    )
    # -- wide terminal -----------------------------------------------------------------------------
    s.append(
        claude(
            "done_200",
            "SEMO:DONE after a long prose line at 200 columns",
            "All three services were migrated, the dashboards were updated and the old cron "
            "jobs were removed; nothing else is left to do for this task.\n\n"
            "[SEMO:DONE] migration finished",
            Expect(
                "ready",
                messages=({"kind": "done", "text": "migration finished"},),
                decisive=("semo_done",),
            ),
            cols=200,
        )
    )
    s.append(
        claude(
            "ask_confirm_40",
            "a confirm question at 40 columns",
            "[ASK_USER]\n"
            '{"type": "confirm", "question": "Delete the 3 stale feature branches now?"}\n'
            "[/ASK_USER]",
            Expect(
                "waiting_input",
                messages=(
                    {
                        "kind": "ask_user",
                        "question": "Delete the 3 stale feature branches now?",
                        "question_type": "confirm",
                    },
                ),
            ),
            cols=40,
        )
    )
    return s


# -- generic agents (no hooks: the screen is the only source) -----------------------------------

_GEN_PRELUDE = "import sys, time\nw = sys.stdout.write\nf = sys.stdout.flush\n"
_GEN_PROMPT = "w('\\n$ '); f(); time.sleep(0.3)\n"


def _gen(body: str) -> str:
    return _GEN_PRELUDE + body + _GEN_PROMPT


def _generic_scenarios() -> list[Scenario]:
    s: list[Scenario] = []
    s.append(
        generic(
            "gen_oneline_colours",
            "STEP_COMPLETE and SEMO:DONE in ANSI colours from a plain CLI",
            _gen(
                "w('working on it\\n'); f(); time.sleep(0.1)\n"
                "w('\\x1b[1;32m[STEP_COMPLETE]\\x1b[0m \\x1b[33mlint fixed\\x1b[0m\\n'); f()\n"
                "time.sleep(0.1)\n"
                "w('\\x1b[36m[SEMO:DONE]\\x1b[0m all green\\n'); f()\n"
            ),
            Expect(
                "ready",
                messages=(
                    {"kind": "step_complete", "text": "lint fixed"},
                    {"kind": "done", "text": "all green"},
                ),
                decisive=("semo_done",),
            ),
        )
    )
    s.append(
        generic(
            "gen_split_writes",
            "an ASK_USER choice block written in pieces with sleeps, split mid-tag and mid-JSON",
            _gen(
                "parts = ['[ASK', '_USER]\\n{\"type\": \"ch',"
                ' \'oice", "question": "Which DB?", \','
                " '\"options\": [\"postgres\", \"sq', 'lite\"]}\\n[/ASK_', 'USER]\\n']\n"
                "for p in parts:\n    w(p); f(); time.sleep(0.15)\n"
            ),
            Expect(
                "waiting_input",
                messages=(
                    {
                        "kind": "ask_user",
                        "question": "Which DB?",
                        "question_type": "choice",
                        "options": ["postgres", "sqlite"],
                    },
                ),
            ),
        )
    )
    s.append(
        generic(
            "gen_spinner_redraw",
            "a \\r spinner, then the same STEP_COMPLETE line redrawn 5 times: reported once",
            _gen(
                "for i in range(12):\n"
                "    w('\\r' + '|/-\\\\'[i % 4] + ' building'); f(); time.sleep(0.05)\n"
                "w('\\r\\x1b[K'); f()\n"
                "for i in range(5):\n"
                "    w('\\r[STEP_COMPLETE] build finished'); f(); time.sleep(0.1)\n"
                "w('\\n'); f()\n"
            ),
            Expect("ready", messages=({"kind": "step_complete", "text": "build finished"},)),
        )
    )
    s.append(
        generic(
            "gen_frame_redraw",
            "a full-screen frame with an INVOKE block redrawn 4 times (home + clear): once",
            _gen(
                "frame = ('status: syncing\\n[INVOKE:QA]\\nRun the smoke tests.\\n[/INVOKE]\\n')\n"
                "for i in range(4):\n"
                "    w('\\x1b[H\\x1b[2J' + frame + 'tick ' + str(i)); f(); time.sleep(0.15)\n"
                "w('\\n'); f()\n"
            ),
            Expect(
                "ready",
                messages=({"kind": "invoke", "target": "QA", "task": "Run the smoke tests."},),
            ),
        )
    )
    s.append(
        generic(
            "gen_long_json_wrapped",
            "a 170-character INVOKE JSON line that the terminal wraps at 80 columns",
            _gen(
                "import json\n"
                "task = 'Rebuild the search index for every tenant and report the time it took"
                " per tenant'\n"
                "w('[INVOKE:BE]\\n' + json.dumps({'task': task, 'context': {'tenants': "
                "['acme', 'globex', 'initech']}}) + '\\n[/INVOKE]\\n'); f()\n"
            ),
            Expect(
                "ready",
                messages=(
                    {
                        "kind": "invoke",
                        "target": "BE",
                        "task": "Rebuild the search index for every tenant and report the time"
                        " it took per tenant",
                        "context": {"tenants": ["acme", "globex", "initech"]},
                    },
                ),
            ),
        )
    )
    s.append(
        generic(
            "gen_errors_decisive",
            "an error line from a generic agent (its screen is its own words: decisive)",
            _gen(
                "w('compiling\\n'); f(); time.sleep(0.1)\nw('Error: missing module foo\\n'); f()\n"
            ),
            Expect("ready", decisive=("error",)),
        )
    )
    s.append(
        generic(
            "gen_malformed",
            "bad JSON, an unknown question type, then a valid DELIVER_RESULT",
            _gen(
                'w(\'[INVOKE:BE]\\n{"task": "x",}\\n[/INVOKE]\\n\'); f(); time.sleep(0.1)\n'
                'w(\'[ASK_USER]\\n{"type": "rank", "question": "Order?"}\\n[/ASK_USER]\\n\')\n'
                "f(); time.sleep(0.1)\n"
                'w(\'[DELIVER_RESULT:FE]\\n{"invocation_id": "inv-9", "summary": "ok"}\\n'
                "[/DELIVER_RESULT]\\n'); f()\n"
            ),
            Expect(
                "ready",
                errors=("bad_json", "unknown_question_type"),
                messages=(
                    {
                        "kind": "deliver_result",
                        "recipient": "FE",
                        "invocation_id": "inv-9",
                        "summary": "ok",
                    },
                ),
            ),
        )
    )
    s.append(
        generic(
            "gen_fenced_and_unicode",
            "a fenced example (ignored) and a Korean/emoji one-line question",
            _gen(
                "w('example:\\n```\\n[SEMO:DONE]\\n```\\n'); f(); time.sleep(0.1)\n"
                "w('[ASK_USER] 이 변경을 배포할까요? 🚀\\n'); f()\n"
            ),
            Expect(
                "waiting_input",
                messages=(
                    {
                        "kind": "ask_user",
                        "question": "이 변경을 배포할까요? 🚀",
                        "question_type": "text",
                    },
                ),
            ),
        )
    )
    s.append(
        generic(
            "gen_narrow_40",
            "STEP_COMPLETE and DONE on a 40-column terminal, the summary wrapped by the terminal",
            _gen(
                "w('[STEP_COMPLETE] cache warmed\\n'); f(); time.sleep(0.1)\n"
                "w('[SEMO:DONE] the nightly export finished for all regions\\n'); f()\n"
            ),
            Expect(
                "ready",
                messages=(
                    {"kind": "step_complete", "text": "cache warmed"},
                    {"kind": "done", "text": "the nightly export finished for all regions"},
                ),
                decisive=("semo_done",),
            ),
            cols=40,
        )
    )
    return s


SCENARIOS: list[Scenario] = _claude_scenarios() + _generic_scenarios()
BY_NAME: dict[str, Scenario] = {sc.name: sc for sc in SCENARIOS}
assert len(BY_NAME) == len(SCENARIOS), "scenario names must be unique"
