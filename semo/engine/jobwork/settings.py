"""`[git]` of semo.toml: the office's base branch and the agents' committer identity.

See docs/CONFIG.md and docs/JOBS.md "Shipping a job's work".

    [git]
    base_branch = ""                           # default: the repository's checked-out branch
    author_name = "semo {role}"                # {role}, {name}: the agent's
    author_email = "{role_lower}@agents.semo.invalid"
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["GitSection", "identity_env"]

_BRANCH = re.compile(r"^(?!-)(?!.*\.\.)(?!.*//)[A-Za-z0-9._/-]{1,200}(?<![./])$")
_FIELDS = ("role", "role_lower", "name")


class GitSection(BaseModel):
    """`[git]`: the base branch jobs start from and the agents' git identity."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_branch: str = ""
    author_name: str = Field(default="semo {role}", min_length=1, max_length=200)
    author_email: str = Field(
        default="{role_lower}@agents.semo.invalid", min_length=3, max_length=200
    )

    @field_validator("base_branch")
    @classmethod
    def _branch(cls, value: str) -> str:
        if value and (not _BRANCH.fullmatch(value) or value.endswith(".lock")):
            raise ValueError(f"{value!r} is not a branch name")
        return value

    @field_validator("author_name", "author_email")
    @classmethod
    def _template(cls, value: str) -> str:
        if any(c in value for c in "<>\n\0"):
            raise ValueError("must not hold '<', '>' or a line break")
        try:
            value.format(**dict.fromkeys(_FIELDS, "x"))
        except (KeyError, IndexError, ValueError) as error:
            raise ValueError(
                f"{value!r}: only {{role}}, {{role_lower}} and {{name}} can be filled in ({error})"
            ) from None
        return value

    def identity(self, role: str, name: str = "") -> dict[str, str]:
        """The git identity of an agent of `role` (named `name`), as environment variables."""
        return identity_env(
            self.author_name.format(role=role, role_lower=role.lower(), name=name or role),
            self.author_email.format(role=role, role_lower=role.lower(), name=name or role),
        )


def identity_env(name: str, email: str) -> dict[str, str]:
    """GIT_AUTHOR_* and GIT_COMMITTER_* for `name` <`email`>."""
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }
