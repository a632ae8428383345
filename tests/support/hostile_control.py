"""The office of the hostile control tests: `ctl` on sqlite, agent D's command filled in."""

from __future__ import annotations

from tests.support.office_toml import sqlite_office_toml

CONFIG = (
    sqlite_office_toml("ctl")
    + """
[engine]
shutdown_grace = 1

[pool]
max_sessions = 2
warm_roles = ["D"]

[[agents]]
role = "D"
profile = "generic"
command = {command}
"""
)
