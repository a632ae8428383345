"""The agent-adapter seam: the registry's adapters against what the rest of semo assumes."""

from __future__ import annotations

from typing import get_args

import pytest

from semo.engine.agents import registry
from semo.engine.approval_policy import Answer
from semo.engine.config import SCREEN_PROFILES, AgentProfileName


def test_semo_toml_offers_exactly_the_registry_s_profiles():
    """config.py cannot import the registry (a foundation): its list is held the same here."""
    assert set(get_args(AgentProfileName)) == set(registry.names())
    screen_only = {n for n in registry.names() if not registry.profile_named(n).uses_hooks}
    assert set(SCREEN_PROFILES) == screen_only


def test_an_unknown_profile_is_refused_with_the_known_ones():
    with pytest.raises(
        ValueError, match=r"unknown agent profile 'nope' \(known: claude, generic\)"
    ):
        registry.adapter("nope")


@pytest.mark.parametrize(
    ("command", "profile"),
    [(["claude"], "claude"), (["/usr/local/bin/claude", "--x"], "claude"), (["bash"], "generic")],
)
def test_an_agent_without_a_profile_gets_the_adapter_its_command_runs(command, profile):
    assert registry.adapter_for_command(command).name == profile
    assert registry.profile_for_command(command).name == profile


def test_only_an_id_the_adapter_accepts_reaches_a_resume_command():
    claude = registry.adapter("claude")
    uuid = "0d9c1b7e-3f41-4b8e-9c55-2a1e6f0b7d31"
    assert claude.conversation_id({"session_id": uuid}) == uuid
    for forged in ("--dangerously-skip-permissions", "../x", uuid + "\n", 7, None):
        assert claude.conversation_id({"session_id": forged}) is None
        assert not claude.valid_conversation_id(forged)
    with pytest.raises(ValueError):
        claude.resume_command(["claude"], "--dangerously-skip-permissions")
    assert claude.resume_command(["claude", "--model", "x"], uuid) == [
        "claude", "--model", "x", "--resume", uuid,
    ]  # fmt: skip
    generic = registry.adapter("generic")
    assert generic.conversation_id({"session_id": uuid}) is None
    with pytest.raises(ValueError):
        generic.resume_command(["bash"], uuid)


def test_the_hook_server_accepts_every_adapter_s_events():
    events = registry.hook_events()
    for name in registry.names():
        assert set(registry.adapter(name).hook_events) <= set(events)


def test_semo_toml_s_overrides_reach_the_profile():
    generic = registry.profile_named("generic", prompt_pattern="[%]$", reads_prompts=True)
    assert (generic.prompt_pattern, generic.reads_prompts) == ("[%]$", True)
    assert registry.profile_named("generic").reads_prompts is False
    claude = registry.profile_named("claude", prompt_pattern="[%]$", reads_prompts=False)
    assert claude.prompt_pattern != "[%]$" and claude.reads_prompts is False


def test_a_permission_decision_is_printed_in_the_cli_s_own_shape():
    claude = registry.adapter("claude")
    denied = claude.permission_output(Answer(decision="deny"), "no reason given")
    assert denied == {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "deny", "message": "no reason given"},
        }
    }
    allowed = claude.permission_output(Answer(decision="allow_session"), "x")
    assert allowed["hookSpecificOutput"]["decision"] == {"behavior": "allow"}
    assert registry.adapter("generic").permission_output(Answer(decision="allow"), "x") == {}
