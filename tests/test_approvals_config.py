"""`[approvals]` and `[[agents]] permission_mode` in semo.toml, and what they do to a worktree.

- `semo init`'s example has the section commented out; uncommented, it loads: a wait and three
  rules, first match wins, per role.
- Mistakes are errors that name the key: an unknown rule key, a decision that is not allow or
  deny, a wait of 0 minutes, a permission mode Claude Code does not have.
- `permission_mode` goes into the worktree's `.claude/settings.local.json` as
  `permissions.defaultMode` (the user's other permission keys kept); without it the file's own
  mode stays. The PermissionRequest hook gets the policy's wait as its timeout.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from semo.engine.agents.claude.settings import install_hooks
from semo.engine.approval_policy import ApprovalsSection, PermissionRequest
from semo.engine.config import EXAMPLE_CONFIG, ConfigError, parse_config

OFFICE = '[office]\nname = "o"\n'


def uncommented_example() -> str:
    start = EXAMPLE_CONFIG.index("[approvals]")
    end = EXAMPLE_CONFIG.index("# One [[agents]] table")
    block = EXAMPLE_CONFIG[start:end]
    lines = [re.sub(r"^# ?", "", line) for line in block.splitlines()]
    keep = [line for line in lines if re.match(r"^(\[|[a-z_]+ = |$)", line)]
    return "\n".join(keep)


def test_the_example_section_loads(tmp_path: Path) -> None:
    assert "[approvals]" in EXAMPLE_CONFIG and "# [[approvals.rules]]" in EXAMPLE_CONFIG
    assert parse_config(EXAMPLE_CONFIG, tmp_path / "semo.toml").approvals == ApprovalsSection()
    config = parse_config(OFFICE + uncommented_example(), tmp_path / "semo.toml")
    policy = config.approvals
    assert policy.deny_after_minutes == 30 and policy.hook_timeout() == 30 * 60 + 60
    assert [r.label() for r in policy.rules] == ["git status", "reads in the worktree", "no pushes"]
    push = PermissionRequest.from_hook(
        {"tool_name": "Bash", "tool_input": {"command": "git push origin main"}}
    )
    rule = policy.match(push, "BE", None)
    assert rule is not None and rule.decision == "deny"
    assert policy.match(push, "QA", None) is None  # the rule names FE and BE only
    assert ApprovalsSection().hook_timeout() == 7 * 24 * 3600


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('[[approvals.rules]]\ntool = "Bash"\ndecision = "allow"\npatern = "x"\n', "patern"),
        ('[[approvals.rules]]\ntool = "Bash"\ndecision = "maybe"\n', "decision"),
        ("[approvals]\ndeny_after_minutes = 0\n", "deny_after_minutes"),
        ('[[agents]]\nrole = "FE"\npermission_mode = "yolo"\n', "permission_mode"),
    ],
)
def test_mistakes_name_the_key(tmp_path: Path, text: str, named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        parse_config(OFFICE + text, tmp_path / "semo.toml")


def test_the_mode_and_the_hook_timeout_go_into_the_worktree(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.local.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"permissions": {"allow": ["Bash(ls)"], "defaultMode": "auto"}}))
    install_hooks(tmp_path, ["semo", "hook"], exclude_from_git=False)
    written = json.loads(settings.read_text())
    assert written["permissions"] == {"allow": ["Bash(ls)"], "defaultMode": "auto"}
    install_hooks(
        tmp_path,
        ["semo", "hook"],
        timeouts={"PermissionRequest": 1860},
        permission_mode="default",
        exclude_from_git=False,
    )
    written = json.loads(settings.read_text())
    assert written["permissions"] == {"allow": ["Bash(ls)"], "defaultMode": "default"}
    [group] = written["hooks"]["PermissionRequest"]
    assert group["hooks"][0]["timeout"] == 1860
    assert group["hooks"][0]["command"] == "semo hook PermissionRequest"
    assert written["hooks"]["Stop"][0]["hooks"][0]["timeout"] == 10
