"""The daemon-test office: one bash agent on sqlite, for tests of `semo engine` as a process."""

from __future__ import annotations

from pathlib import Path

from tests.support.git_repo import make_repo
from tests.support.office_toml import sqlite_office_toml

CONFIG = (
    sqlite_office_toml("daemon-test")
    + """
[engine]
log_format = "json"
command_timeout = 10
shutdown_grace = 1

[pool]
max_sessions = 3
warm_roles = ["SH"]

[[agents]]
role = "SH"
profile = "generic"
command = ["bash", "--norc", "--noprofile", "-i"]
env = { PS1 = "$ " }
cols = 80
rows = 24
"""
)


def make_office(folder: Path) -> Path:
    make_repo(folder / "repo")
    config = folder / "semo.toml"
    config.write_text(CONFIG)
    return config
