"""`[ship]` of semo.toml: where a job's work goes and what happens when a job is done.

See docs/CONFIG.md and docs/JOBS.md "Shipping a job's work".

    [ship]
    remote = "origin"                      # a remote's name, or a URL / path
    on_done = ["push", "pr"]               # steps run by the engine when a job is done
    pr_tool = "auto"                       # "gh", "api", or auto: gh when logged in, else api
    github_api_url = "https://api.github.com"   # GitHub Enterprise: https://HOST/api/v3
    github_repo = ""                       # owner/name; default: from the remote's URL
    # github_token = "..."                 # better: GITHUB_TOKEN or GH_TOKEN in the environment
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from semo.engine.ship.github import DEFAULT_API_URL, PrTool, is_slug

__all__ = ["SHIP_STEPS", "ShipSection", "ShipStep"]

ShipStep = Literal["push", "pr", "merge"]
SHIP_STEPS: tuple[ShipStep, ...] = ("push", "pr", "merge")
#: The environment variables a GitHub token is read from, the first set one wins.
TOKEN_VARIABLES = ("GITHUB_TOKEN", "GH_TOKEN")


_API_URL = re.compile(r"^https?://[^\s]+$")


class ShipSection(BaseModel):
    """`[ship]`: the remote, the pull request's tool and GitHub, the automatic steps."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    remote: str = Field(default="origin", min_length=1, max_length=500)
    on_done: list[ShipStep] = Field(default_factory=list)
    pr_tool: PrTool = "auto"
    github_api_url: str = DEFAULT_API_URL
    github_repo: str = ""
    github_token: SecretStr | None = None

    @field_validator("github_api_url")
    @classmethod
    def _api_url(cls, value: str) -> str:
        if not _API_URL.match(value):
            raise ValueError(f"{value!r} is not an http:// or https:// URL")
        return value

    @field_validator("github_repo")
    @classmethod
    def _repo(cls, value: str) -> str:
        if value and not is_slug(value):
            raise ValueError(f'{value!r} is not "owner/name" (or "": from the remote\'s URL)')
        return value

    @field_validator("remote")
    @classmethod
    def _no_option(cls, value: str) -> str:
        if value.startswith("-") or "\0" in value or value.strip() != value:
            raise ValueError(f"{value!r} is not a remote (a name, a URL or a path)")
        return value

    @field_validator("on_done")
    @classmethod
    def _once_each(cls, value: list[ShipStep]) -> list[ShipStep]:
        if len(set(value)) != len(value):
            raise ValueError("each step at most once")
        return value

    def token(self, env: Mapping[str, str] | None = None) -> str | None:
        """The GitHub token: GITHUB_TOKEN or GH_TOKEN from the environment, else the file's."""
        env = os.environ if env is None else env
        for name in TOKEN_VARIABLES:
            if env.get(name):
                return env[name]
        return self.github_token.get_secret_value() if self.github_token else None
