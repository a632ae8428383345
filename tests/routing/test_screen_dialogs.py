"""Claude Code dialogs read off the screen (engine/agents/claude/dialogs.py), as the real CLI
2.1.328 draws them (rows copied from its screen behind a local endpoint), and the keys that
answer them: Enter where Enter goes on, the arrows to "Yes" then Enter, Escape to deny."""

from __future__ import annotations

from semo.engine.agents.claude.dialogs import read_dialog
from semo.engine.approval_policy import Answer

RULE = "─" * 100
DASH = "╌" * 100

CANT_CHECK = [
    "● Making.",
    "  Making a file",
    '  ⎿  $ python3 -c \'open("made.txt","w")\'',
    RULE,
    "  Auto mode can't check actions in this session",
    "  Auto mode's safety check runs on the server. Your requests go through 127.0.0.1:45563, and",
    "  the check isn't getting through.",
    "  You can stay in auto mode and approve each action that needs the check yourself.",
    "  Enter to stay in auto mode · shift+Tab to leave for accept edits mode and stop · Esc",
]

PROCEED_AUTO = [
    RULE,
    " Bash command",
    " Make a file",
    DASH,
    ' python3 -c \'open("made.txt","w")\'',
    DASH,
    " Auto mode can't check actions in this session, so this one needs your approval",
    " Do you want to proceed?",
    " ❯ No",
    "   Yes",
    " Esc to cancel · Tab to amend",
]

PROCEED_CLASSIC = [
    RULE,
    " Bash command",
    " Make a file",
    DASH,
    " touch made.txt",
    DASH,
    " Do you want to proceed?",
    " ❯ 1. Yes",
    "   2. Yes, and always allow access to /tmp/work from this project",
    "   3. Yes, and switch to auto mode · auto mode handles these prompts for you",
    "   4. No",
    " Esc to cancel · Tab to amend",
]

ALLOW = Answer(decision="allow")
DENY = Answer(decision="deny", reason="no")


def test_the_cant_check_dialog() -> None:
    dialog = read_dialog(["", *CANT_CHECK, "", ""])
    assert dialog is not None and dialog.enter_allows
    assert "Auto mode can't check actions in this session" in dialog.summary
    assert dialog.summary.startswith("Claude Code's dialog: ")
    assert (dialog.keys(ALLOW), dialog.keys(DENY)) == ("<Enter>", "<Esc>")


def test_the_unnumbered_proceed_dialog_goes_down_to_yes() -> None:
    dialog = read_dialog(PROCEED_AUTO)
    assert dialog is not None and not dialog.enter_allows
    assert dialog.options == ("No", "Yes") and dialog.highlighted == 0
    assert 'python3 -c \'open("made.txt","w")\'' in dialog.summary
    assert dialog.keys(ALLOW) == "<Down><Enter>"
    assert dialog.keys(Answer(decision="allow_session")) == "<Down><Enter>"
    assert dialog.keys(DENY) == "<Tab><Sleep:300>no<Sleep:200><Enter>"  # No, with a message
    assert dialog.keys(Answer(decision="deny")) == "<Esc>"
    assert dialog.amend and dialog.request is not None
    assert dialog.request.key() == ("Bash", 'python3 -c \'open("made.txt","w")\'')


def test_a_reason_is_typed_inert_into_the_dialogs_no() -> None:
    """The reason is one line without controls, its `<` typed as itself (not a key name),
    cut at REASON_CHARS; the arrows go from the highlighted row to No."""
    rows = [*PROCEED_AUTO[:-4], "   No", " ❯ Yes", " Esc to cancel · Tab to amend"]
    dialog = read_dialog(rows)
    assert dialog is not None and dialog.highlighted == 1
    keys = dialog.keys(Answer(decision="deny", reason="a <Enter>\r\nb\x1b[2J" + "x" * 600))
    assert keys.startswith("<Up><Tab><Sleep:300>a <lt>Enter>")
    assert keys.endswith("<Sleep:200><Enter>") and "\x1b" not in keys and "\n" not in keys
    assert len(keys) < 600


def test_the_command_is_read_for_rules_and_grants() -> None:
    """The notice's "⎿  $ command" row and the dialog's box give the same request; a command
    wrapped over rows, or cut short with "…", is not matched as a shorter one."""
    notice = read_dialog(["", *CANT_CHECK, "", ""])
    proceed = read_dialog(PROCEED_AUTO)
    assert notice is not None and proceed is not None and notice.request is not None
    assert notice.request == proceed.request
    spaced = read_dialog([*CANT_CHECK[:3], *[""] * 14, *CANT_CHECK[3:]])  # a taller screen
    assert spaced is not None and spaced.request == notice.request
    assert notice.request.summary == 'Bash: python3 -c \'open("made.txt","w")\''
    assert notice.summary.startswith(f"Claude Code's dialog: {notice.request.summary} · Auto")
    assert proceed.summary.endswith("[allow: Yes; deny: No, and the reason]")
    wrapped = [*CANT_CHECK[:3], "     && rm -rf ~", *CANT_CHECK[3:]]
    assert (dialog := read_dialog(wrapped)) is not None and dialog.request is None
    cut = [*PROCEED_AUTO[:4], " touch a.txt && rm …", *PROCEED_AUTO[5:]]
    assert (dialog := read_dialog(cut)) is not None and dialog.request is None
    two = [*PROCEED_AUTO[:5], " && rm -rf ~", *PROCEED_AUTO[5:]]
    assert (dialog := read_dialog(two)) is not None and dialog.request is not None
    assert dialog.request.subject.endswith("\n&& rm -rf ~")
    assert read_dialog(PROCEED_CLASSIC).request.subject == "touch made.txt"  # type: ignore[union-attr]


def test_the_classic_dialog_takes_yes_where_it_is() -> None:
    dialog = read_dialog(PROCEED_CLASSIC)
    assert dialog is not None
    assert dialog.options[0] == "Yes" and dialog.highlighted == 0 and len(dialog.options) == 4
    assert dialog.keys(ALLOW) == "<Enter>"


def test_no_dialog_and_no_yes() -> None:
    assert read_dialog(["● Done.", "❯ "]) is None
    hostile = [" Do you want to proceed?", " ❯ Sure \x1b]52;c;x\x07", " Esc to cancel"]
    dialog = read_dialog(hostile)
    assert dialog is not None and dialog.keys(ALLOW) == "<Esc>"  # no Yes: never a guess
    assert "\x1b" not in dialog.summary


#: Claude Code 2.1.328's offer, when the operator's settings ask for the classic mode (rows
#: copied from the real CLI's screen)
AUTO_OFFER = [
    RULE,
    "  Make auto mode your default permission mode?",
    "  Auto mode lets Claude handle permission prompts automatically. Claude checks each tool"
    " call for",
    "  risky actions and prompt injection before executing, runs the ones it assesses as"
    " lower-risk,",
    "  and blocks the rest.",
    "  ❯ Yes, set auto mode as my default permission mode",
    "    No, keep manual mode",
]


def test_the_auto_mode_offer_says_what_allow_picks() -> None:
    dialog = read_dialog(AUTO_OFFER)
    assert dialog is not None and not dialog.enter_allows
    assert dialog.options == (
        "Yes, set auto mode as my default permission mode",
        "No, keep manual mode",
    )
    assert dialog.summary.startswith("Claude Code's dialog: Make auto mode your default")
    assert dialog.summary.endswith(
        "[allow: Yes, set auto mode as my default permission mode; deny: Esc]"
    )
    assert (dialog.keys(ALLOW), dialog.keys(DENY)) == ("<Enter>", "<Esc>")
