"""`[git]` of semo.toml: the agents' identity (defaults naming the role, templates checked) and
the base branch (a branch name or empty); bad values are clear errors when the file loads."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from semo.engine.config import ConfigError, load_config
from semo.engine.jobwork.settings import GitSection


def test_the_default_identity_names_the_role() -> None:
    assert GitSection().identity("FE") == {
        "GIT_AUTHOR_NAME": "semo FE",
        "GIT_AUTHOR_EMAIL": "fe@agents.semo.invalid",
        "GIT_COMMITTER_NAME": "semo FE",
        "GIT_COMMITTER_EMAIL": "fe@agents.semo.invalid",
    }
    custom = GitSection(author_name="{name} ({role})", author_email="bots+{role_lower}@shop.test")
    assert custom.identity("BE", "be agent")["GIT_AUTHOR_NAME"] == "be agent (BE)"
    assert custom.identity("BE", "be agent")["GIT_COMMITTER_EMAIL"] == "bots+be@shop.test"


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("author_name", "semo {team}", "only {role}, {role_lower} and {name}"),
        ("author_name", "semo <FE>", "must not hold"),
        ("author_email", "a\n@b", "must not hold"),
        ("base_branch", "-main", "is not a branch name"),
        ("base_branch", "a..b", "is not a branch name"),
        ("base_branch", "x.lock", "is not a branch name"),
    ],
)
def test_bad_values_are_refused(field: str, value: str, words: str) -> None:
    with pytest.raises(ValidationError, match=words.replace("{", r"\{").replace("}", r"\}")):
        GitSection(**{field: value})


def test_semo_toml_sets_it_and_says_what_is_wrong(tmp_path: Path) -> None:
    path = tmp_path / "semo.toml"
    path.write_text(
        '[office]\nname = "o"\n[git]\nbase_branch = "develop"\nauthor_name = "bot {role}"\n'
    )
    config = load_config(path)
    assert config.git.base_branch == "develop"
    assert config.git.identity("QA")["GIT_AUTHOR_NAME"] == "bot QA"
    path.write_text('[office]\nname = "o"\n[git]\nauthor_nme = "x"\n')
    with pytest.raises(ConfigError, match="author_nme"):
        load_config(path)
